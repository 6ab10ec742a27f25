"""Batches cut by event time are prefixes of Kafka Streams' merge order, whatever the batch size."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.core.batch_plan import BatchPlan, RecordsIndex, SourceOrder, TopicPartition, plan_all, plan_batch

SOURCES = {"regions": SourceOrder(rank=1, position=1), "clicks": SourceOrder(rank=2, position=0)}
GLOBAL = {"products": SourceOrder(rank=0, position=2)}

Key = tuple[int, int, int, int, int]


def merge_keys(
    logs: dict[TopicPartition, list[int]], sources: dict[str, SourceOrder]
) -> dict[tuple[str, int, int], Key]:
    """(topic, partition, offset) -> its merge-order key, effective timestamps over the whole log."""
    keys = {}
    for (topic, partition), log in logs.items():
        running = None
        for offset, ts in enumerate(log):
            running = ts if running is None else max(running, ts)
            order = sources[topic]
            keys[(topic, partition, offset)] = (running, order.rank, order.position, partition, offset)
    return keys


def batch_records(plan: BatchPlan) -> list[tuple[str, int, int]]:
    return [(tp[0], tp[1], o) for tp in plan.end for o in range(plan.start[tp], plan.end[tp])]


logs_strategy = st.dictionaries(
    st.tuples(st.sampled_from(["regions", "clicks"]), st.integers(0, 2)),
    st.lists(st.integers(-1, 30), max_size=25),
    min_size=1,
)


@settings(max_examples=300, deadline=None)
@given(logs=logs_strategy, max_records=st.integers(1, 40))
def test_batches_concatenate_to_the_one_batch_order(logs: dict[TopicPartition, list[int]], max_records: int) -> None:
    index = RecordsIndex(logs)
    start = {tp: 0 for tp in logs}
    plans = plan_all(start, index.latest(), SOURCES, index, max_records)
    keys = merge_keys(logs, SOURCES)
    in_batches = [r for plan in plans for r in sorted(batch_records(plan), key=keys.__getitem__)]
    assert in_batches == sorted(keys, key=keys.__getitem__)
    sizes = [plan.records for plan in plans]
    assert (all(size == max_records for size in sizes[:-1]) and 0 < sizes[-1] <= max_records) or sizes == [0]


@settings(max_examples=100, deadline=None)
@given(logs=logs_strategy, cuts=st.lists(st.integers(1, 12), min_size=1, max_size=6))
def test_any_sequence_of_batch_sizes_gives_the_same_order(
    logs: dict[TopicPartition, list[int]], cuts: list[int]
) -> None:
    """A restart may change the batch size mid-backlog: still one merge order."""
    index = RecordsIndex(logs)
    position = {tp: 0 for tp in logs}
    keys = merge_keys(logs, SOURCES)
    seen: list[tuple[str, int, int]] = []
    for size in [*cuts, None]:
        plan = plan_batch(position, index.latest(), SOURCES, index, size)
        seen += sorted(batch_records(plan), key=keys.__getitem__)
        position = plan.end
    assert seen == sorted(keys, key=keys.__getitem__)


def test_an_old_table_backlog_is_read_before_the_later_stream() -> None:
    """The failure Spark's offset-proportional cut produced: regions (earlier timestamps) spread over
    every batch. Cut by time, the first batch holds the whole table."""
    logs = {("regions", 0): list(range(0, 10)), ("clicks", 0): list(range(100, 200))}
    index = RecordsIndex(logs)
    plan = plan_batch({tp: 0 for tp in logs}, index.latest(), SOURCES, index, 30)
    assert plan.end == {("regions", 0): 10, ("clicks", 0): 20}


def test_a_partition_read_to_its_end_does_not_hold_the_others_back() -> None:
    logs = {("regions", 0): [50], ("clicks", 0): [1, 2, 3, 60, 61]}
    index = RecordsIndex(logs)
    plan = plan_batch({("regions", 0): 1, ("clicks", 0): 0}, index.latest(), SOURCES, index, 4)
    assert plan.end == {("regions", 0): 1, ("clicks", 0): 4}


def test_ties_at_one_timestamp_are_split_in_merge_order() -> None:
    """Five records at one millisecond, batches of two: table before stream, then partition, then offset."""
    logs = {("clicks", 0): [7, 7], ("regions", 0): [7], ("clicks", 1): [7, 7]}
    index = RecordsIndex(logs)
    plans = plan_all({tp: 0 for tp in logs}, index.latest(), SOURCES, index, 2)
    assert [set(batch_records(p)) for p in plans] == [
        {("regions", 0, 0), ("clicks", 0, 0)},
        {("clicks", 0, 1), ("clicks", 1, 0)},
        {("clicks", 1, 1)},
    ]


def test_global_tables_are_read_to_their_end_and_not_counted() -> None:
    sources = SOURCES | GLOBAL
    logs = {("products", 0): [500, 1, 900], ("clicks", 0): [1, 2, 3, 4]}
    index = RecordsIndex(logs)
    plan = plan_batch({tp: 0 for tp in logs}, index.latest(), sources, index, 2)
    assert plan.end == {("products", 0): 3, ("clicks", 0): 2}


def test_a_start_beyond_what_the_index_knows_is_refused() -> None:
    with pytest.raises(ValueError, match="no start offset"):
        plan_batch({}, {("clicks", 0): 3}, SOURCES, RecordsIndex({("clicks", 0): [1, 2, 3]}), 1)
