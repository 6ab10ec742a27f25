"""Which plan made ahead the stream job takes (streamjoin.spark.plan_ahead): the one for the batch it runs
next, cut at the batch size or bounded by an available-now ceiling; a failed or caught-up one is planned again."""

from __future__ import annotations

from streamjoin.core.batch_plan import BatchPlan, RecordsIndex, SourceOrder, plan_batch
from streamjoin.core.errors import KafkaUnavailableError
from streamjoin.spark.plan_ahead import NextBatch, PlanAhead

SOURCES = {"regions": SourceOrder(rank=0, position=0), "clicks": SourceOrder(rank=2, position=1)}
# a global table (regions, read to its end) and a stream of 10 records
INDEX = RecordsIndex({("regions", 0): [1, 2, 3], ("clicks", 0): list(range(10, 20))})


def next_batch(start: int, max_records: int) -> NextBatch:
    begin = {("regions", 0): 0, ("clicks", 0): start}
    latest = INDEX.latest()
    return NextBatch(list(latest), begin, plan_batch(begin, latest, SOURCES, INDEX, max_records), latest)


def taken(batch: NextBatch, *, bounded: bool = False, take: int = 1) -> BatchPlan | None:
    ahead = PlanAhead()
    ahead.start(1, lambda: batch)
    got = ahead.take(take, SOURCES, bounded=bounded)
    return None if got is None else got.plan


def test_a_plan_cut_at_the_batch_size_is_taken() -> None:
    batch = next_batch(start=2, max_records=4)
    assert taken(batch) == BatchPlan({("regions", 0): 0, ("clicks", 0): 2}, {("regions", 0): 3, ("clicks", 0): 6})


def test_a_plan_that_took_all_there_was_is_made_again_unless_bounded() -> None:
    batch = next_batch(start=2, max_records=100)  # the global table's records are not counted, nor left
    assert batch.plan.end == INDEX.latest()
    assert taken(batch) is None
    assert taken(batch, bounded=True) == batch.plan


def test_a_plan_for_another_batch_or_a_failed_one_is_not_taken() -> None:
    assert taken(next_batch(start=2, max_records=4), take=2) is None

    def fails() -> NextBatch:
        raise KafkaUnavailableError("offsets of `clicks` [0]: timed out")

    ahead = PlanAhead()
    ahead.start(1, fails)
    assert ahead.take(1, SOURCES, bounded=True) is None
    assert PlanAhead().take(1, SOURCES, bounded=True) is None  # none started
