"""The copy step of a repartitioned input: its new records, read with Spark, written to its internal topic.

Before the join plans a batch, :meth:`Repartitioner.step` copies every record of the source topic that is
on the broker now (up to a ceiling in available-now runs) to ``<pipeline>-<input>-repartition``
(:mod:`streamjoin.core.repartition`: murmur2 placement, bytes and timestamps unchanged, copy order).

The copy is one Spark job whose task p owns internal partition p: the records are shuffled to the task of
their murmur2 partition, sorted there in copy order (with spilling), and written by that task's own
idempotent producer, so the copy scales with the executors, not with one producer in the driver. Why not
Spark's Kafka sink: it cannot set a record's timestamp, and the join plans its batches with Kafka's
offsets-for-time over the internal topic, so its records must carry their source timestamps.

Exactly the records, across a crash: step N's source end offsets and the internal topic's end offsets
before it are logged before it copies (its own offset log beside the job's); ``commits/N`` after every
record is acknowledged. A step run again after a crash skips, per internal partition, the records that
already reached it (the growth of that partition's end offset since the plan).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from functools import partial
from typing import Any

from confluent_kafka import KafkaError, Message, Producer
from pyspark.sql import Row, SparkSession, Window
from pyspark.sql import functions as F

from streamjoin.core.batch_plan import TopicPartition, by_topic
from streamjoin.core.errors import DeliveryError
from streamjoin.core.job_files import OffsetLog, Offsets
from streamjoin.core.repartition import AlreadyWritten, Repartitioned, repartitioned, target_partition
from streamjoin.core.spec import PipelineSpec
from streamjoin.kafka.client_config import KafkaTarget
from streamjoin.kafka.clients import producer_config
from streamjoin.kafka.offsets import KafkaOffsets
from streamjoin.spark.source import read_offsets


def join_partitions(spec: PipelineSpec, offsets: KafkaOffsets) -> int | None:
    """The partition count of ``spec``'s internal topics on the broker (the join's task count; a missing
    topic is an error naming it), or None when no input is repartitioned."""
    moved = repartitioned(spec)
    return len(offsets.partitions([moved[0].internal])) if moved else None


class Repartitioner:
    """Copies one repartitioned input to its internal topic, step by step.

    :param log: the step log (``<checkpoint>/repartition/<input>``)
    :param starting_offsets: ``earliest`` or ``latest``: where the first step starts, as the job's first batch
    """

    def __init__(
        self,
        spark: SparkSession,
        item: Repartitioned,
        kafka: KafkaTarget,
        log: OffsetLog,
        offsets: KafkaOffsets,
        starting_offsets: str = "earliest",
    ) -> None:
        self.spark, self.item, self.kafka, self.log, self.offsets = spark, item, kafka, log, offsets
        self.starting_offsets = starting_offsets
        #: records copied by this object's steps (for the job's report)
        self.copied = 0

    def step(self, ceiling: Mapping[TopicPartition, int] | None = None) -> int:
        """Copy what the source topic holds now (at most up to ``ceiling``); a step planned before a crash
        runs first, unchanged. Returns the number of records written."""
        last = self.log.last_committed()
        step_id = 0 if last is None else last + 1
        sources = self.offsets.partitions([self.item.source])
        internal = self.offsets.partitions([self.item.internal])
        start = self._start(step_id, sources)
        planned = self.log.planned(step_id)
        written: dict[int, int] = {}
        if planned is None:
            latest = self.offsets.latest(sources)
            if ceiling is not None:
                latest = {tp: min(o, ceiling.get(tp, start[tp])) for tp, o in latest.items()}
            if all(latest[tp] <= start[tp] for tp in sources):
                return 0
            planned = by_topic(latest) | by_topic(self.offsets.latest(internal))
            self.log.plan(step_id, planned, int(time.time() * 1000))
        else:
            now = self.offsets.latest(internal)
            before = planned.get(self.item.internal, {})
            written = {p: now[(t, p)] - before.get(p, 0) for t, p in internal}
            print(f"streamjoin repartition {self.item.input}: step {step_id} was not committed; it runs again "
                  f"(already written per partition: {written})", flush=True)  # fmt: skip
        ends = {self.item.source: planned[self.item.source]}
        count = self._copy(by_topic(start), ends, len(internal), written)
        self.log.commit(step_id)
        self.copied += count
        return count

    def _start(self, step_id: int, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        previous: Offsets | None = self.log.planned(step_id - 1) if step_id > 0 else self.log.initial()
        if previous is None:
            which = self.offsets.latest if self.starting_offsets == "latest" else self.offsets.earliest
            previous = by_topic(which(partitions))
            self.log.set_initial(previous)
        start = {tp: previous[tp[0]][tp[1]] for tp in partitions if tp[1] in previous.get(tp[0], {})}
        return start | self.offsets.earliest([tp for tp in partitions if tp not in start])

    def _copy(self, start: Offsets, ends: Offsets, partitions: int, written: Mapping[int, int]) -> int:
        raw = read_offsets(self.spark, self.kafka, start, ends)
        running = Window.partitionBy("partition").orderBy("offset").rowsBetween(Window.unboundedPreceding, 0)
        rows = raw.withColumn("effective_ts", F.max("ts").over(running)).select(
            "key", "value", "partition", "offset", "ts", "effective_ts"
        )

        def copy_order(row: Row) -> tuple[tuple[int, int, int, int], tuple[Any, ...]]:
            key = None if row.key is None else bytes(row.key)
            target = target_partition(key, row.partition, partitions)
            return (target, row.effective_ts, row.partition, row.offset), (key, row.value, row.ts)

        task = partial(_produce, topic=self.item.internal, source=self.item.source,
                       config=producer_config(self.kafka), written=dict(written))  # fmt: skip
        # a task per internal partition, its records sorted by the whole copy-order tuple (pyspark's stub
        # wants a SupportsOrdering key, which a tuple of ints is not declared to be)
        by_target = rows.rdd.map(copy_order).repartitionAndSortWithinPartitions(  # type: ignore[call-overload]
            partitions, partitionFunc=lambda order: order[0]
        )
        outcomes = by_target.mapPartitionsWithIndex(task).collect()
        count = sum(copied for copied, _, _ in outcomes)
        failed = sum(failures for _, failures, _ in outcomes)
        if failed:
            reason = next(error for _, failures, error in outcomes if failures)
            raise DeliveryError(self.item.internal, failed, count + failed, reason, transient=True)
        return count


def _produce(
    partition: int,
    records: Iterator[tuple[tuple[int, int, int, int], tuple[Any, ...]]],
    *,
    topic: str,
    source: str,
    config: dict[str, Any],
    written: Mapping[int, int],
) -> Iterator[tuple[int, int, str]]:
    """The task of internal partition ``partition``: its records in copy order through one idempotent producer,
    the first ``written[partition]`` skipped (they reached the topic before a crash). Yields (records written,
    records not acknowledged, the first error) for the driver to report."""
    producer = Producer(config)
    failures: list[str] = []

    def on_delivery(error: KafkaError | None, _: Message) -> None:
        if error is not None:
            failures.append(error.str())

    already = AlreadyWritten(written)
    count = 0
    for (target, _, source_partition, offset), (key, value, ts) in records:
        if already.skip(target):
            continue
        headers: list[tuple[str, str | bytes | None]] = [
            ("source_topic", source), ("source_partition", str(source_partition)), ("source_offset", str(offset)),
        ]  # fmt: skip
        while True:
            try:
                producer.produce(topic, key=key, value=None if value is None else bytes(value), partition=partition,
                                 timestamp=max(0, ts), headers=headers, on_delivery=on_delivery)  # fmt: skip
                break
            except BufferError:  # the local queue is full: let deliveries drain
                producer.poll(0.1)
        count += 1
        producer.poll(0)
    remaining = producer.flush(60)
    failed = len(failures) + remaining
    first = failures[0] if failures else "not acknowledged within 60 s"
    yield count - failed, failed, first if failed else ""
