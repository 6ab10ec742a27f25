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
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamjoin.core.backfill import BackfillPlan, partition_path
from streamjoin.core.batch_plan import by_topic, plan_batch
from streamjoin.core.ordering import source_orders
from streamjoin.core.plans import checkpoint_dir, resolve
from streamjoin.core.repartition import join_view
from streamjoin.core.spec import PipelineSpec
from streamjoin.kafka.client_config import KafkaTarget
from streamjoin.kafka.clients import offsets_for_time
from streamjoin.kafka.offsets import KafkaOffsets
from streamjoin.spark.engine import SMALL_STATES, process_batch, state_schemas
from streamjoin.spark.sinks import file_rows
from streamjoin.spark.source import read_offsets
from streamjoin.spark.state import StateStore

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
    targets: dict[str, tuple[Path, str]] = {}
    if spec.output.files:
        targets["enriched"] = (
            partition_path(resolve(spec.output.files.path, home), plan.day),
            spec.output.files.format,
        )
    if spec.aggregate is not None and spec.aggregate.output.files:
        files = spec.aggregate.output.files
        targets["aggregate"] = (partition_path(resolve(files.path, home), plan.day), files.format)
    staged = {name: staging_path(target) for name, (target, _) in targets.items()}
    in_day = (F.col("ts") >= F.lit(plan.start_ms)) & (F.col("ts") < F.lit(plan.end_ms))
    # beside the pipeline's checkpoint: storage the job's executors share, like the stream's own state
    state_root = checkpoint_dir(spec, home).with_name(f".reprocess-{spec.name}-{plan.day}-{uuid.uuid4().hex[:8]}")
    store = StateStore(state_root, small=SMALL_STATES)
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
                swap_in(staged[name], target)
                result.paths[name] = str(target)
    finally:
        for staging in staged.values():
            shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(state_root, ignore_errors=True)
    result.seconds = time.monotonic() - started
    return result


def staging_path(target: Path) -> Path:
    """A fresh hidden directory beside ``target`` for its new content (after cleaning up a killed run's)."""
    recover(target)
    return target.with_name(f".{target.name}.new-{uuid.uuid4().hex[:8]}")


def write_staged(frame: DataFrame, staging: Path, fmt: str) -> None:
    """Add ``frame`` to the staged content (one batch of the day)."""
    writer = frame.coalesce(max(1, frame.rdd.getNumPartitions() // 4)).write.mode("append")
    writer.json(str(staging)) if fmt == "json" else writer.parquet(str(staging))


def swap_in(staging: Path, target: Path) -> None:
    """Rename the old partition aside, the staged one in, then delete the old one. A killed run leaves
    either the old or the new partition under the target's name (:func:`recover` tidies up)."""
    pause = float(os.environ.get(PAUSE_ENV, "0") or 0)
    if pause:
        print(f"streamjoin reprocess staged {staging}; swapping in {pause}s", flush=True)
        time.sleep(pause)
    old = staging.with_name(staging.name.replace(".new-", ".old-"))
    if target.exists():
        target.rename(old)
    staging.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def recover(target: Path) -> None:
    """Undo what a killed run left: drop staged directories; if the partition was renamed aside but the
    new one never swapped in, put the old one back."""
    parent = target.parent
    if not parent.exists():
        parent.mkdir(parents=True, exist_ok=True)
        return
    for staged in parent.glob(f".{target.name}.new-*"):
        shutil.rmtree(staged, ignore_errors=True)
    for old in sorted(parent.glob(f".{target.name}.old-*")):
        if not target.exists():
            old.rename(target)
        else:
            shutil.rmtree(old, ignore_errors=True)
