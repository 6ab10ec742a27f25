"""Reprocessing a day through Spark: equal to the stream's output for the day, idempotent, crash-safe."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from backfill_data import DAY, day_events, write_seed_spec

from exactly_once import bag, bag_difference
from streamjoin.core.backfill import partition_path, plan_day
from streamjoin.core.output_columns import JOINED_COLUMNS
from streamjoin.core.plans import PROJECT_HOME, connector_jars
from streamjoin.core.spec import PipelineSpec, load_spec

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def _provision(spec: PipelineSpec, bootstrap: str) -> None:
    from streamjoin.kafka.admin import ensure_topics
    from streamjoin.kafka.topics import plan_topics

    ensure_topics({"bootstrap.servers": bootstrap}, plan_topics(spec))


def _run_stream(spark: Any, spec: PipelineSpec, bootstrap: str, home: Path) -> None:
    from streamjoin.spark.job import JobSettings, run_stream

    settings = JobSettings(bootstrap, str(home / "checkpoint"), available_now=True, home=str(home))
    assert run_stream(spark, spec, settings) >= 1


def _rows(spark: Any, path: str | Path) -> Counter[tuple]:
    """The rows of an enriched output's files, which hold the columns its quality suites check, no more."""
    frame = spark.read.parquet(str(path))
    assert tuple(c for c in frame.columns if c != "date") == JOINED_COLUMNS
    return bag(frame.select(*JOINED_COLUMNS).collect())


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
    stream_rows: Counter[tuple] = Counter()
    for part in sorted(stream_dir.glob(f"batch_id=*/date={DAY.isoformat()}")):
        stream_rows += _rows(spark, part)
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
    assert stream_rows.total() > 300
    day_end = plan_day(spec, DAY).end_ms
    late = [r for r in batch_rows.elements() if r[2] > day_end - 120_000]  # only phase 2's late clicks are this late
    assert len(late) == 3, late
    assert batch_rows == stream_rows, bag_difference(batch_rows, stream_rows, ("batch", "stream"))
    assert result.results == stream_rows.total()
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
    in_batches = _rows(spark, result.paths["enriched"])
    assert in_batches == seeded["stream_rows"], bag_difference(in_batches, seeded["stream_rows"], ("batches", "stream"))
    assert aggregates(result.paths["aggregate"]) == one_batch and len(one_batch) == result.aggregates


def test_rerun_leaves_exactly_one_copy_and_dry_run_writes_nothing(spark: Any, seeded: dict[str, Any]) -> None:
    from streamjoin.spark.reprocess import reprocess_day

    spec: PipelineSpec = seeded["spec"]
    plan = plan_day(spec, DAY)
    first = reprocess_day(spark, spec, plan, seeded["bootstrap"], home=seeded["home"])
    target = Path(first.paths["enriched"])
    second = reprocess_day(spark, spec, plan, seeded["bootstrap"], home=seeded["home"])
    assert second.paths == first.paths
    assert [p.name for p in target.parent.iterdir()] == [target.name]  # no staged or old copies
    rows = _rows(spark, target)
    assert rows == seeded["stream_rows"], bag_difference(rows, seeded["stream_rows"], ("after a rerun", "stream"))
    files = {p.relative_to(target): p.stat().st_mtime_ns for p in target.rglob("*")}
    stamp = target.stat().st_mtime_ns
    dry = reprocess_day(spark, spec, plan, seeded["bootstrap"], home=seeded["home"], dry_run=True)
    assert dry.results == second.results and dry.paths == {}
    assert target.stat().st_mtime_ns == stamp and [p.name for p in target.parent.iterdir()] == [target.name]
    assert {p.relative_to(target): p.stat().st_mtime_ns for p in target.rglob("*")} == files and files


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
    log = seeded["home"] / "killed-reprocess.log"
    with log.open("wb") as out:  # a file, polled: a line read from a pipe would wait as long as the run is silent
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + 300  # a spark-submit start and a day's read: ~40 s alone, minutes under load
    try:
        while "streamjoin reprocess staged" not in (output := log.read_text(errors="replace")):
            assert proc.poll() is None, f"the run ended ({proc.returncode}) before it staged:\n{output[-3000:]}"
            assert time.monotonic() < deadline, f"the run did not stage the new partition in 300 s:\n{output[-3000:]}"
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert list(target.parent.glob(f".{target.name}.new-*")), "the killed run left no staged directory"
    still = _rows(spark, target)
    assert still == previous, bag_difference(still, previous, ("after the kill", "before"))  # the whole previous day
    result = reprocess_day(spark, spec, plan_day(spec, DAY), seeded["bootstrap"], home=seeded["home"])
    assert [p.name for p in target.parent.iterdir()] == [target.name]  # leftovers cleaned up
    again = _rows(spark, result.paths["enriched"])
    assert again == previous, bag_difference(again, previous, ("rerun", "before"))
