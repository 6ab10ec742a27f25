"""Which offsets the next micro-batch reads: batches cut by event time, so that any batch size gives the
order Kafka Streams' partition group processes records in (docs/SEMANTICS.md, "Batch ordering rule").

Within a task, Kafka Streams always takes the head record with the smallest timestamp among partitions that
still hold data (with ``max.task.idle.ms = 0``, a partition read up to its end offset does not hold the
others back; records already on the broker are fetched first). Over a backlog this is one global *merge
order* by (effective timestamp, role rank, input position, partition, offset), the effective timestamp
being the running max of ``ts`` within the record's own partition.

Kafka's offsets-for-time answers, per partition, "the first offset whose timestamp is >= t". Every record
before that offset has a timestamp < t, and the record at it has one >= t. So cutting every partition at
``offsets_for_time(t + 1)`` takes exactly the records whose effective timestamp is <= t: a *prefix* of the
merge order. A batch that is a prefix of what is left processes the same records in the same order as one
big batch would, so the output does not depend on the batch size. To hit ``max_records`` exactly, the
records at effective timestamp ``t + 1`` (``[offsets_for_time(t + 1), offsets_for_time(t + 2))`` of each
partition) are taken in merge order up to the limit.

Spark's own Kafka source instead cuts a backlog in proportion to offsets; a table topic whose records are
older than the stream's is then spread over all batches, and early stream records miss their table rows.

Global-table partitions are not time-synchronised: every batch reads them to their end (the "bootstrap").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

#: ``(topic, partition)``
TopicPartition = tuple[str, int]

#: Kafka timestamps are >= -1 (-1: none); everything is after this.
BEFORE_ALL = -2


class OffsetIndex(Protocol):
    """Kafka's offsets-for-time over a set of partitions (the broker, or records held in memory)."""

    def offsets_for_time(self, partitions: Sequence[TopicPartition], ts: int) -> dict[TopicPartition, int]:
        """Per partition, the first offset whose record timestamp is >= ``ts``; the end offset if none is."""
        ...

    def max_timestamp(self, partitions: Sequence[TopicPartition]) -> int | None:
        """The largest record timestamp of the partitions (None: they hold no record)."""
        ...


@dataclass(frozen=True)
class SourceOrder:
    """How an input topic's records rank in the merge order at equal effective timestamps."""

    #: 0 global table, 1 table, 2 stream (see ``core.ordering.ROLE_RANK``)
    rank: int
    #: the input's position in ``spec.inputs``
    position: int

    @property
    def synchronized(self) -> bool:
        """Global tables are read to their end every batch, not cut by time."""
        return self.rank != 0


@dataclass(frozen=True)
class BatchPlan:
    """The next batch: read ``[start, end)`` of every partition."""

    start: dict[TopicPartition, int]
    end: dict[TopicPartition, int]

    @property
    def records(self) -> int:
        """Offsets in the batch (compacted topics and transaction markers make this an upper bound)."""
        return sum(self.end[tp] - self.start[tp] for tp in self.end)

    @property
    def empty(self) -> bool:
        return self.records == 0


def plan_batch(
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    sources: Mapping[str, SourceOrder],
    index: OffsetIndex,
    max_records: int | None,
) -> BatchPlan:
    """The end offsets of the next batch: a prefix of the merge order of at most ``max_records`` offsets
    of the time-synchronised partitions (global tables are read to their end and not counted).

    :param start: per partition, the next offset to read.
    :param latest: per partition, its end offset now (where the batch may read up to).
    :param sources: per topic, its rank in the merge order.
    :param index: offsets-for-time over the partitions.
    :param max_records: the batch size (None: no limit). A batch holds exactly this many offsets whenever
        more are left.
    """
    missing = sorted(set(latest) - set(start))
    if missing:
        raise ValueError(f"no start offset for partitions {missing}")
    begin = {tp: min(start[tp], latest[tp]) for tp in latest}
    end = dict(latest)
    synced = [tp for tp in latest if sources[tp[0]].synchronized]
    pending = sum(latest[tp] - begin[tp] for tp in synced)
    if max_records is None or pending <= max_records:
        return BatchPlan(begin, end)
    if max_records < 1:
        raise ValueError(f"max_records must be at least 1, got {max_records}")

    def cut(ts: int) -> dict[TopicPartition, int]:
        """Per partition, the end of the records with effective timestamp < ``ts`` (within [begin, latest])."""
        found = index.offsets_for_time(synced, ts)
        return {tp: min(max(found[tp], begin[tp]), latest[tp]) for tp in synced}

    def taken(ends: Mapping[TopicPartition, int]) -> int:
        return sum(ends[tp] - begin[tp] for tp in synced)

    # the largest t with at most max_records records at effective timestamp <= t (count(t) is monotone)
    lo, hi = BEFORE_ALL, index.max_timestamp(synced)
    assert hi is not None, "pending records but no timestamp"
    lo_ends = cut(lo + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        mid_ends = cut(mid + 1)
        if taken(mid_ends) <= max_records:
            lo, lo_ends = mid, mid_ends
        else:
            hi = mid
    # fill up with the records at effective timestamp lo + 1, in merge order
    tie_ends = cut(lo + 2)
    room = max_records - taken(lo_ends)
    ends = dict(lo_ends)
    for tp in sorted(synced, key=lambda tp: (sources[tp[0]].rank, sources[tp[0]].position, tp[1])):
        if room <= 0:
            break
        extra = min(tie_ends[tp] - lo_ends[tp], room)
        ends[tp] += extra
        room -= extra
    end.update(ends)
    return BatchPlan(begin, end)


def by_topic(flat: Mapping[TopicPartition, int]) -> dict[str, dict[int, int]]:
    """``{(topic, partition): offset}`` as ``{topic: {partition: offset}}`` (Kafka's and Spark's JSON shape)."""
    nested: dict[str, dict[int, int]] = {}
    for (topic, partition), offset in sorted(flat.items()):
        nested.setdefault(topic, {})[partition] = offset
    return nested


class RecordsIndex:
    """:class:`OffsetIndex` over records held in memory: per partition, the timestamps in offset order
    (offset i is the i-th timestamp)."""

    def __init__(self, timestamps: Mapping[TopicPartition, Sequence[int]]) -> None:
        self.timestamps = {tp: list(ts) for tp, ts in timestamps.items()}

    def offsets_for_time(self, partitions: Sequence[TopicPartition], ts: int) -> dict[TopicPartition, int]:
        found = {}
        for tp in partitions:
            log = self.timestamps.get(tp, [])
            found[tp] = next((offset for offset, t in enumerate(log) if t >= ts), len(log))
        return found

    def max_timestamp(self, partitions: Sequence[TopicPartition]) -> int | None:
        stamps = [t for tp in partitions for t in self.timestamps.get(tp, [])]
        return max(stamps) if stamps else None

    def latest(self) -> dict[TopicPartition, int]:
        return {tp: len(log) for tp, log in self.timestamps.items()}


def plan_all(
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    sources: Mapping[str, SourceOrder],
    index: OffsetIndex,
    max_records: int | None,
) -> list[BatchPlan]:
    """Every batch from ``start`` to ``latest`` (the available-now run over what is there)."""
    plans: list[BatchPlan] = []
    position = dict(start)
    while True:
        plan = plan_batch(position, latest, sources, index, max_records)
        if plan.empty and plans:
            return plans
        plans.append(plan)
        if plan.empty:
            return plans
        position = dict(plan.end)
