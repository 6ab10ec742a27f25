"""Reprocessing a day through Spark: equal to the stream's output for the day, idempotent, crash-safe."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from backfill_data import DAY, day_events, write_seed_spec

from streamjoin.core.backfill import partition_path, plan_day
from streamjoin.core.plans import PROJECT_HOME, connector_jars
from streamjoin.core.spec import PipelineSpec, load_spec

pytestmark = [pytest.mark.spark, pytest.mark.kafka]
COLUMNS = ["key", "value", "ts", "matched", "src_topic", "src_partition", "src_offset"]


def _provision(spec: PipelineSpec, bootstrap: str) -> None:
    from streamjoin.kafka.admin import ensure_topics
    from streamjoin.kafka.topics import plan_topics

    ensure_topics({"bootstrap.servers": bootstrap}, plan_topics(spec))


def _run_stream(spark: Any, spec: PipelineSpec, bootstrap: str, home: Path) -> None:
    from streamjoin.spark.job import JobSettings, run_stream

    settings = JobSettings(bootstrap, str(home / "checkpoint"), available_now=True, home=str(home))
    assert run_stream(spark, spec, settings) >= 1


def _rows(spark: Any, path: str | Path) -> set[tuple]:
    return {tuple(r) for r in spark.read.parquet(str(path)).select(*COLUMNS).collect()}


@pytest.fixture(scope="module")
def seeded(spark: Any, kafka_broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The seed pipeline on fresh topics: two phases of events, each followed by a streaming run."""
    import uuid

    from streamjoin.kafka.clients import produce_records

    home = tmp_path_factory.mktemp("backfill")
    suffix = uuid.uuid4().hex[:8]
    spec = load_spec(write_seed_spec(home, lambda base: f"{base}-{suffix}"))
    bootstrap = kafka_broker.bootstrap
    _provision(spec, bootstrap)
    phase1, phase2 = day_events(spec)
    produce_records(bootstrap, phase1)
    _run_stream(spark, spec, bootstrap, home)
    produce_records(bootstrap, phase2)
    _run_stream(spark, spec, bootstrap, home)
    assert spec.output.files is not None
    stream_dir = Path(spec.output.files.path) / "stream"
    stream_rows: set[tuple] = set()
    for part in sorted(stream_dir.glob(f"batch_id=*/date={DAY.isoformat()}")):
        stream_rows |= _rows(spark, part)
    yield {"spec": spec, "home": home, "bootstrap": bootstrap, "stream_rows": stream_rows, "late": len(phase2)}
    from streamjoin.kafka.admin import delete_topics
    from streamjoin.kafka.topics import plan_topics

    delete_topics({"bootstrap.servers": bootstrap}, [t.name for t in plan_topics(spec).topics], timeout=15)


def test_batch_output_equals_the_streams_output_for_the_day(spark: Any, seeded: dict[str, Any]) -> None:
    from streamjoin.spark.reprocess import reprocess_day

    spec: PipelineSpec = seeded["spec"]
    result = reprocess_day(spark, spec, plan_day(spec, DAY), seeded["bootstrap"], home=seeded["home"])
    batch_rows = _rows(spark, result.paths["enriched"])
    stream_rows = seeded["stream_rows"]
    assert len(stream_rows) > 300
    day_end = plan_day(spec, DAY).end_ms
    late = [r for r in batch_rows if r[2] > day_end - 120_000]  # only the late clicks of phase 2 are this late
    assert len(late) == 3, late
    assert batch_rows == stream_rows, (
        f"only in batch: {sorted(batch_rows - stream_rows)[:5]}, only in stream: {sorted(stream_rows - batch_rows)[:5]}"
    )
    assert result.results == len(stream_rows)
    assert Path(result.paths["aggregate"]).is_dir()


def test_a_day_in_small_batches_equals_the_day_in_one(spark: Any, seeded: dict[str, Any]) -> None:
    """Bounded memory: the day read in batches of 100 offsets, cut by event time, gives the same rows."""
    from streamjoin.spark.reprocess import reprocess_day

    def aggregates(path: str) -> list[tuple]:
        return sorted(tuple(r) for r in spark.read.parquet(path).select("key", "value", "ts").collect())

    spec: PipelineSpec = seeded["spec"]
    whole = reprocess_day(spark, spec, plan_day(spec, DAY), seeded["bootstrap"], home=seeded["home"])
    one_batch = aggregates(whole.paths["aggregate"])
    small = spec.model_copy(update={"trigger": spec.trigger.model_copy(update={"max_offsets_per_trigger": 100})})
    result = reprocess_day(spark, small, plan_day(small, DAY), seeded["bootstrap"], home=seeded["home"])
    assert result.input_rows > 3 * 100  # at least four batches
    assert _rows(spark, result.paths["enriched"]) == seeded["stream_rows"]
    assert aggregates(result.paths["aggregate"]) == one_batch and len(one_batch) == result.aggregates


def test_rerun_leaves_exactly_one_copy_and_dry_run_writes_nothing(spark: Any, seeded: dict[str, Any]) -> None:
    from streamjoin.spark.reprocess import reprocess_day

    spec: PipelineSpec = seeded["spec"]
    plan = plan_day(spec, DAY)
    first = reprocess_day(spark, spec, plan, seeded["bootstrap"], home=seeded["home"])
    target = Path(first.paths["enriched"])
    before = {p.name for p in target.iterdir()}
    second = reprocess_day(spark, spec, plan, seeded["bootstrap"], home=seeded["home"])
    assert second.paths == first.paths
    assert [p.name for p in target.parent.iterdir()] == [target.name]  # no staged or old copies
    rows = spark.read.parquet(str(target)).select(*COLUMNS).collect()
    assert len(rows) == len(set(map(tuple, rows))) == len(seeded["stream_rows"])
    stamp = target.stat().st_mtime_ns
    dry = reprocess_day(spark, spec, plan, seeded["bootstrap"], home=seeded["home"], dry_run=True)
    assert dry.results == second.results and dry.paths == {}
    assert target.stat().st_mtime_ns == stamp and {p.name for p in target.iterdir()} != set() and before


def test_killed_run_leaves_the_previous_partition_intact(spark: Any, seeded: dict[str, Any]) -> None:
    from streamjoin.spark.reprocess import PAUSE_ENV, reprocess_day

    spec: PipelineSpec = seeded["spec"]
    assert spec.output.files is not None
    target = partition_path(spec.output.files.path, DAY)
    if not target.exists():
        reprocess_day(spark, spec, plan_day(spec, DAY), seeded["bootstrap"], home=seeded["home"])
    previous = _rows(spark, target)
    spark_submit = Path(sys.executable).parent / "spark-submit"
    command = [
        str(spark_submit), "--master", "local[1]", "--jars", ",".join(connector_jars()),
        "--conf", "spark.ui.enabled=false", str(PROJECT_HOME / "jobs" / "reprocess_day.py"),
        "--spec", str(seeded["home"] / "clicks_per_region.yaml"), "--bootstrap", seeded["bootstrap"],
        "--day", DAY.isoformat(), "--home", str(seeded["home"]),
    ]  # fmt: skip
    env = {**os.environ, PAUSE_ENV: "120", "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)  # fmt: skip
    staged = False
    deadline = time.monotonic() + 150
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "streamjoin reprocess staged" in line:
                staged = True
                break
            assert time.monotonic() < deadline, "the reprocessing run did not reach the swap in 150s"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert staged, "the run ended before it staged the new partition"
    assert list(target.parent.glob(f".{target.name}.new-*")), "the killed run left no staged directory"
    assert _rows(spark, target) == previous  # a reader still sees the whole previous day
    result = reprocess_day(spark, spec, plan_day(spec, DAY), seeded["bootstrap"], home=seeded["home"])
    assert [p.name for p in target.parent.iterdir()] == [target.name]  # leftovers cleaned up
    assert _rows(spark, result.paths["enriched"]) == previous
