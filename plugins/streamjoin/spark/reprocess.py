"""Reprocess one past day through the streaming job's :func:`process_batch` and publish it atomically.

The input topics are read with Spark's Kafka batch source between offsets found by timestamp (see
``core/backfill.py``), processed as one batch (the batch ordering rule) from empty state, and the results
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
from streamjoin.core.plans import resolve
from streamjoin.core.spec import PipelineSpec
from streamjoin.kafka.clients import offsets_for_time
from streamjoin.spark.engine import process_batch, state_schemas
from streamjoin.spark.local_frames import local_frame
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


def topic_ranges(plan: BackfillPlan, bootstrap: str) -> list[TopicRange]:
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


def read_ranges(spark: SparkSession, bootstrap: str, ranges: list[TopicRange]) -> DataFrame:
    """The ranges as Kafka-shaped rows (``key, value, topic, partition, offset, ts``)."""
    start = {r.topic: dict(r.starting) for r in ranges}
    end = {r.topic: dict(r.ending) for r in ranges}
    return read_offsets(spark, bootstrap, start, end)


def reprocess_day(
    spark: SparkSession,
    spec: PipelineSpec,
    plan: BackfillPlan,
    bootstrap: str,
    *,
    home: Path,
    dry_run: bool = False,
) -> DayResult:
    """Run ``plan``'s day through :func:`process_batch`; publish the enriched output (and the aggregate's
    updates of the day) unless ``dry_run``."""
    started = time.monotonic()
    result = DayResult(day=plan.day.isoformat(), dry_run=dry_run)
    raw = read_ranges(spark, bootstrap, topic_ranges(plan, bootstrap))
    state = {name: local_frame(spark, [], schema) for name, schema in state_schemas(spec).items()}
    out = process_batch(raw, spec, state)
    # the decoded batch is cached by process_batch; here the join too, for the aggregate
    result.input_rows = out.summary.rows
    joined = out.results.persist()
    in_day = (F.col("ts") >= F.lit(plan.start_ms)) & (F.col("ts") < F.lit(plan.end_ms))
    results = file_rows(joined.filter(in_day)).drop("date").persist()
    result.results = results.count()
    result.dead_letters = out.dead_letters.filter(in_day).count()
    outputs: list[tuple[str, DataFrame, str, str]] = []
    if spec.output.files:
        outputs.append(("enriched", results, spec.output.files.path, spec.output.files.format))
    aggregates: DataFrame | None = None
    if spec.aggregate is not None and out.aggregates is not None:
        aggregates = file_rows(out.aggregates.filter(in_day)).drop("date").persist()
        result.aggregates = aggregates.count()
        if spec.aggregate.output.files:
            files = spec.aggregate.output.files
            outputs.append(("aggregate", aggregates, files.path, files.format))
    if not dry_run:
        for name, frame, path, fmt in outputs:
            target = partition_path(resolve(path, home), plan.day)
            publish(frame, target, fmt)
            result.paths[name] = str(target)
    out.release()
    for cached in (results, aggregates, joined):
        if cached is not None:
            cached.unpersist()
    result.seconds = time.monotonic() - started
    return result


def publish(frame: DataFrame, target: Path, fmt: str) -> None:
    """Write ``frame`` beside ``target`` and swap it in: rename the old partition aside, the new one in,
    then delete the old one. Leftovers of a killed run are cleaned up (or the old partition restored)."""
    recover(target)
    token = uuid.uuid4().hex[:8]
    staging = target.with_name(f".{target.name}.new-{token}")
    writer = frame.coalesce(max(1, frame.rdd.getNumPartitions() // 4)).write.mode("overwrite")
    writer.json(str(staging)) if fmt == "json" else writer.parquet(str(staging))
    pause = float(os.environ.get(PAUSE_ENV, "0") or 0)
    if pause:
        print(f"streamjoin reprocess staged {staging}; swapping in {pause}s", flush=True)
        time.sleep(pause)
    old = target.with_name(f".{target.name}.old-{token}")
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
