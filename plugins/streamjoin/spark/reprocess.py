"""Reprocess one past day through the streaming job's :func:`process_batch` and publish it atomically.

The input topics are read with Spark's Kafka batch source between offsets found by timestamp (see
``core/backfill.py``), processed from empty state in micro-batches cut by event time as the streaming job
cuts them (``core/batch_plan.py``: the same output as one batch, in bounded memory), and the results
whose timestamp lies in the day are written to ``<files.path>/daily/date=D/``: first into a hidden
directory beside it, then swapped in with renames. A re-run replaces the day; a killed run leaves the
previous partition in place (a half-written directory is never visible under the partition's name).
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamjoin.core.backfill import BackfillPlan, partition_location
from streamjoin.core.batch_plan import by_topic, plan_batch
from streamjoin.core.ordering import source_orders
from streamjoin.core.plans import durable_root, location
from streamjoin.core.repartition import join_view
from streamjoin.core.spec import PipelineSpec
from streamjoin.core.storage import Storage, join
from streamjoin.kafka.client_config import KafkaTarget
from streamjoin.kafka.clients import offsets_for_time
from streamjoin.kafka.offsets import KafkaOffsets
from streamjoin.spark.engine import process_batch, state_schemas, state_store
from streamjoin.spark.hadoop_storage import storage_for
from streamjoin.spark.sinks import file_rows
from streamjoin.spark.source import read_offsets

#: test knob: seconds to wait between writing the new day aside and swapping it in (to kill a run there)
PAUSE_ENV = "STREAMJOIN_REPROCESS_PAUSE_BEFORE_SWAP"


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
) -> DayResult:
    """Run ``plan``'s day through :func:`process_batch` in micro-batches of the spec's
    ``max_offsets_per_trigger``, cut by event time as the streaming job cuts them (the same output for any
    size, memory bounded by the batch); publish the enriched output (and the aggregate's updates of the
    day) unless ``dry_run``."""
    started = time.monotonic()
    spec = join_view(spec)  # a repartitioned input is read from its internal topic, as the stream read it
    result = DayResult(day=plan.day.isoformat(), dry_run=dry_run)
    ranges = topic_ranges(plan, bootstrap)
    kafka = KafkaOffsets(bootstrap)
    begin = {(r.topic, p): o for r in ranges for p, o in r.starting.items()}
    earliest = kafka.earliest([tp for tp, o in begin.items() if o < 0])
    begin = {tp: earliest.get(tp, o) for tp, o in begin.items()}
    end = {(r.topic, p): o for r in ranges for p, o in r.ending.items()}
    targets: dict[str, tuple[str, str]] = {}
    if spec.output.files:
        targets["enriched"] = (
            partition_location(location(spec.output.files.path, home), plan.day),
            spec.output.files.format,
        )
    if spec.aggregate is not None and spec.aggregate.output.files:
        files = spec.aggregate.output.files
        targets["aggregate"] = (partition_location(location(files.path, home), plan.day), files.format)
    storages = {name: storage_for(spark, target) for name, (target, _) in targets.items()}
    staged = {name: staging_path(storages[name], target) for name, (target, _) in targets.items()}
    in_day = (F.col("ts") >= F.lit(plan.start_ms)) & (F.col("ts") < F.lit(plan.end_ms))
    # inside the pipeline's checkpoint: storage the job's executors share, like the stream's own state
    root = durable_root(spec, home)
    state_root = join(root, f".reprocess-{plan.day}-{uuid.uuid4().hex[:8]}")
    state_storage = storage_for(spark, root)
    store = state_store(state_root, state_storage)
    position, batch_id = begin, 0
    try:
        while batch_id == 0 or position != end:
            batch = plan_batch(position, end, source_orders(spec), kafka, spec.trigger.max_offsets_per_trigger)
            raw = read_offsets(spark, bootstrap, by_topic(batch.start), by_topic(batch.end))
            out = process_batch(raw, spec, store.load(spark, batch_id, state_schemas(spec)))
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
            store.save(batch_id, out.state)
            out.release()
            for frame in (*frames.values(), joined):
                frame.unpersist()
            position, batch_id = batch.end, batch_id + 1
        if not dry_run:
            for name, (target, _) in targets.items():
                swap_in(storages[name], staged[name], target)
                result.paths[name] = target
    finally:
        store.close()
        for name, staging in staged.items():
            storages[name].delete(staging)
        state_storage.delete(state_root)
    result.seconds = time.monotonic() - started
    return result


def _parent(target: str) -> str:
    return target.rstrip("/").rsplit("/", 1)[0]


def _beside(target: str, name: str) -> str:
    return join(_parent(target), name)


def _name(target: str) -> str:
    return target.rstrip("/").rsplit("/", 1)[-1]


def staging_path(storage: Storage, target: str) -> str:
    """A fresh hidden directory beside ``target`` for its new content (after cleaning up a killed run's)."""
    recover(storage, target)
    return _beside(target, f".{_name(target)}.new-{uuid.uuid4().hex[:8]}")


def write_staged(frame: DataFrame, staging: str, fmt: str) -> None:
    """Add ``frame`` to the staged content (one batch of the day)."""
    writer = frame.coalesce(max(1, frame.rdd.getNumPartitions() // 4)).write.mode("append")
    writer.json(staging) if fmt == "json" else writer.parquet(staging)


def swap_in(storage: Storage, staging: str, target: str) -> None:
    """Rename the old partition aside, the staged one in, then delete the old one. A killed run leaves
    either the old or the new partition under the target's name (:func:`recover` tidies up)."""
    pause = float(os.environ.get(PAUSE_ENV, "0") or 0)
    if pause:
        print(f"streamjoin reprocess staged {staging}; swapping in {pause}s", flush=True)
        time.sleep(pause)
    old = _beside(staging, _name(staging).replace(".new-", ".old-"))
    if storage.exists(target):
        storage.rename(target, old)
    if storage.exists(staging):  # (a day without any result has nothing staged)
        storage.rename(staging, target)
    storage.delete(old)


def recover(storage: Storage, target: str) -> None:
    """Undo what a killed run left: drop staged directories; if the partition was renamed aside but the
    new one never swapped in, put the old one back."""
    parent, name = _parent(target), _name(target)
    siblings = storage.children(parent)
    if not siblings:
        storage.mkdirs(parent)
        return
    for staged in siblings:
        if staged.startswith(f".{name}.new-"):
            storage.delete(join(parent, staged))
    for old in sorted(s for s in siblings if s.startswith(f".{name}.old-")):
        if not storage.exists(target):
            storage.rename(join(parent, old), target)
        else:
            storage.delete(join(parent, old))
