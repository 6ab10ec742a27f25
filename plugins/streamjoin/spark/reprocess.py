"""Reprocess one past day through the streaming job's :func:`process_batch` and publish it atomically.

The input topics are read with Spark's Kafka batch source between offsets found by timestamp (see
``core/backfill.py``), processed from empty state in micro-batches cut by event time as the streaming job
cuts them (``core/batch_plan.py``: the same output as one batch, in bounded memory), and the results
whose timestamp lies in the day are written to ``<files.path>/daily/date=D/`` (``--stage``: to
``daily/_staging/date=D/``, for its quality check to decide, ``core/publish.py``): first into a hidden
directory beside it, then swapped in with renames. A re-run replaces the day; a killed run leaves the
previous partition in place (a half-written directory is never visible under the partition's name).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamjoin.core.backfill import BackfillPlan, partition_location
from streamjoin.core.batch_plan import by_topic, plan_batch
from streamjoin.core.join_plan import JoinPlan
from streamjoin.core.ordering import source_orders
from streamjoin.core.plans import durable_root, location
from streamjoin.core.publish import PAUSE_ENV, staged_location, staging_path, swap_in
from streamjoin.core.repartition import join_view
from streamjoin.core.spec import PipelineSpec
from streamjoin.core.storage import join
from streamjoin.kafka.client_config import KafkaTarget
from streamjoin.kafka.clients import offsets_for_time
from streamjoin.kafka.offsets import KafkaOffsets
from streamjoin.spark.engine import process_batch
from streamjoin.spark.hadoop_storage import storage_for
from streamjoin.spark.kernel import unload
from streamjoin.spark.repartition import join_partitions
from streamjoin.spark.sinks import file_rows
from streamjoin.spark.source import read_offsets, read_task_ranges
from streamjoin.spark.state import KERNEL_DIR, StateStore

__all__ = ["PAUSE_ENV", "DayResult", "reprocess_day", "topic_ranges"]


@dataclass(frozen=True)
class TopicRange:
    topic: str
    starting: dict[int, int]  # partition -> first offset (-2: earliest)
    ending: dict[int, int]  # partition -> offset after the last one read


@dataclass
class DayResult:
    day: str
    input_rows: int = 0
    results: int = 0
    aggregates: int | None = None
    dead_letters: int = 0
    seconds: float = 0.0
    paths: dict[str, str] = field(default_factory=dict)
    dry_run: bool = False

    def line(self) -> str:
        what = "would write" if self.dry_run else "wrote"
        agg = "" if self.aggregates is None else f", {self.aggregates} aggregate rows"
        rate = self.input_rows / self.seconds if self.seconds else 0.0
        return (
            f"{self.day}: read {self.input_rows} input records, {what} {self.results} results{agg}, "
            f"{self.dead_letters} dead letters in {self.seconds:.1f}s ({rate:.0f} rows/s)"
        )


def topic_ranges(plan: BackfillPlan, bootstrap: KafkaTarget) -> list[TopicRange]:
    """Offsets for each read of the plan, from Kafka's offsets-for-time."""
    ranges = []
    for read in plan.reads:
        ending = offsets_for_time(bootstrap, read.topic, read.to_ms)
        if read.from_ms is None:
            starting = {p: -2 for p in ending}
        else:
            starting = offsets_for_time(bootstrap, read.topic, read.from_ms)
        ranges.append(TopicRange(read.topic, starting, ending))
    return ranges


def read_ranges(spark: SparkSession, bootstrap: KafkaTarget, ranges: list[TopicRange]) -> DataFrame:
    """The ranges as Kafka-shaped rows (``key, value, topic, partition, offset, ts``)."""
    start = {r.topic: dict(r.starting) for r in ranges}
    end = {r.topic: dict(r.ending) for r in ranges}
    return read_offsets(spark, bootstrap, start, end)


def reprocess_day(
    spark: SparkSession,
    spec: PipelineSpec,
    plan: BackfillPlan,
    bootstrap: KafkaTarget,
    *,
    home: Path,
    dry_run: bool = False,
    stage: bool = False,
) -> DayResult:
    """Run ``plan``'s day through :func:`process_batch` in micro-batches of the spec's
    ``max_offsets_per_trigger``, cut by event time as the streaming job cuts them (the same output for any
    size, memory bounded by the batch); publish the enriched output (and the aggregate's updates of the
    day) unless ``dry_run``; with ``stage``, into ``daily/_staging/date=D`` instead, for its check to decide
    (``core/publish.py``)."""
    JoinPlan.stages_of(spec)  # a spec the kernel does not run yet is refused before any read (terminal)
    started = time.monotonic()
    kafka = KafkaOffsets(bootstrap)
    # a repartitioned input is read from its internal topic, as the stream read it
    spec = join_view(spec, join_partitions(spec, kafka))
    result = DayResult(day=plan.day.isoformat(), dry_run=dry_run)
    ranges = topic_ranges(plan, bootstrap)
    begin = {(r.topic, p): o for r in ranges for p, o in r.starting.items()}
    earliest = kafka.earliest([tp for tp, o in begin.items() if o < 0])
    begin = {tp: earliest.get(tp, o) for tp, o in begin.items()}
    end = {(r.topic, p): o for r in ranges for p, o in r.ending.items()}
    where = staged_location if stage else partition_location
    targets: dict[str, tuple[str, str]] = {}
    if spec.output.files:
        targets["enriched"] = (where(location(spec.output.files.path, home), plan.day), spec.output.files.format)
    if spec.aggregate is not None and spec.aggregate.output.files:
        files = spec.aggregate.output.files
        targets["aggregate"] = (where(location(files.path, home), plan.day), files.format)
    storages = {name: storage_for(spark, target) for name, (target, _) in targets.items()}
    staged = {name: staging_path(storages[name], target) for name, (target, _) in targets.items()}
    in_day = (F.col("ts") >= F.lit(plan.start_ms)) & (F.col("ts") < F.lit(plan.end_ms))
    # inside the pipeline's checkpoint: storage the job's executors share, like the stream's own state
    root = durable_root(spec, home)
    state_root = join(root, f".reprocess-{plan.day}-{uuid.uuid4().hex[:8]}")
    state_storage = storage_for(spark, root)
    store = StateStore(state_root, state_storage, pipeline=spec.name)
    position, batch_id = begin, 0
    try:
        while batch_id == 0 or position != end:
            batch = plan_batch(position, end, source_orders(spec), kafka, spec.trigger.max_offsets_per_trigger)
            raw = read_task_ranges(spark, bootstrap, spec, by_topic(batch.start), by_topic(batch.end))
            out = process_batch(raw, spec, store.load(batch_id), aligned=True)
            result.input_rows += out.summary.rows
            joined = out.results.persist()
            frames = {"enriched": file_rows(joined.filter(in_day)).drop("date").persist()}
            result.results += frames["enriched"].count()
            result.dead_letters += out.dead_letters.filter(in_day).count()
            if spec.aggregate is not None and out.aggregates is not None:
                frames["aggregate"] = file_rows(out.aggregates.filter(in_day)).drop("date").persist()
                result.aggregates = (result.aggregates or 0) + frames["aggregate"].count()
            if not dry_run:
                for name, staging in staged.items():
                    write_staged(frames[name], staging, targets[name][1])
            store.save(batch_id, out.commit)
            out.release()
            for frame in (*frames.values(), joined):
                frame.unpersist()
            position, batch_id = batch.end, batch_id + 1
        if not dry_run:
            for name, (target, _) in targets.items():
                swap_in(storages[name], staged[name], target)
                result.paths[name] = target
    finally:
        unload(spark, join(state_root, KERNEL_DIR), spec.kafka.partitions)
        for name, staging in staged.items():
            storages[name].delete(staging)
        state_storage.delete(state_root)
    result.seconds = time.monotonic() - started
    return result


def write_staged(frame: DataFrame, staging: str, fmt: str) -> None:
    """Add ``frame`` to the staged content (one batch of the day)."""
    writer = frame.coalesce(max(1, frame.rdd.getNumPartitions() // 4)).write.mode("append")
    writer.json(staging) if fmt == "json" else writer.parquet(staging)
