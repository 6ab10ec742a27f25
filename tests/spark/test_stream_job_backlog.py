"""The streaming job over a backlog that is already on the topics, in small micro-batches, on the real
broker: regions (earlier timestamps) and clicks (later) as a first deployment or a restart after an outage
finds them. Kafka Streams processes the regions first; so must the job, whatever its batch size, and also
when it dies mid-backlog and starts again from its checkpoint.

The pipeline's Kafka output is ``exactly_once`` and its driver dies three ways: after every write task's
transaction committed and before ``commits/N`` (the whole batch runs again); in the middle of a join task's
transaction (its records on the broker, uncommitted); after an aggregate task's transaction committed, while
the batch's other tasks ran. Read committed, the enriched topic holds each click once and the aggregate's
changelog each update once; read uncommitted it holds the dead attempts' records too."""

from __future__ import annotations

import itertools
import json
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from exactly_once import assert_each_once, file_coordinates, input_coordinates
from job_crash import Crash, crashing_job
from streamjoin.core.batch_plan import by_topic
from streamjoin.core.codec import decode, encode
from streamjoin.core.job_files import PipelineFiles
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.spec import Format, PipelineSpec, load_spec, parse_spec
from streamjoin.core.topic_plan import plan_topics
from streamjoin.kafka.admin import ensure_topics
from streamjoin.kafka.clients import ConsumedRecord, consume_all, produce_records
from streamjoin.kafka.offsets import KafkaOffsets

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_streaming_scenarios import renamed

REGIONS = ["europe", "asia", "americas", "africa"]
USERS, CLICKS = 400, 3000
FAULT = "streamjoin.kernel.fault"  # TransactionalTask.FAULT: a crash point in a write task


def backlog(base: int) -> tuple[list[tuple[str, str | None, Any, int]], dict[str, int]]:
    """(records as (input, key, value, ts), expected clicks per region). Users u0..u399 get a region at
    base + i ms; clicks come later, a few from users that have none (UNKNOWN)."""
    records: list[tuple[str, str | None, Any, int]] = []
    for i in range(USERS):
        records.append(("regions", f"u{i}", REGIONS[i % 4], base + i))
    totals: Counter[str] = Counter()
    for i in range(CLICKS):
        user = (i * 37) % (USERS + 20)  # u400..u419 have no region
        amount = 1 + i % 7
        records.append(("clicks", f"u{user}", amount, base + 10_000 + i))
        totals[REGIONS[user % 4] if user < USERS else "UNKNOWN"] += amount
    return records, dict(totals)


def produce(bootstrap: str, spec: PipelineSpec, records: list[tuple[str, str | None, Any, int]]) -> None:
    produce_records(
        bootstrap,
        [
            (spec.inputs[name].topic, None if key is None else key.encode(),
             encode(value, spec.inputs[name].value.format), ts, [])
            for name, key, value, ts in records
        ],
    )  # fmt: skip


def final_totals(bootstrap: str, spec: PipelineSpec) -> dict[str, int]:
    assert spec.aggregate is not None and spec.aggregate.output.topic
    latest: dict[str, int] = {}
    for record in consume_all(bootstrap, spec.aggregate.output.topic, timeout=30):
        assert record.key is not None
        latest[record.key.decode()] = decode(record.value, Format.LONG)
    return latest


def seed_spec(tmp_path: Path, max_records: int, delivery: str = "at_least_once") -> PipelineSpec:
    spec, _ = renamed(load_spec(PROJECT_HOME / "include/pipelines/clicks_per_region.yaml"), "-" + uuid.uuid4().hex[:8])
    data = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["kafka"] = {"partitions": 4, "replication_factor": 1}
    data["output"]["delivery"] = delivery
    data["trigger"] = {"processing_time": 0, "max_offsets_per_trigger": max_records}
    for sink in (data["output"], data["aggregate"]["output"]):
        sink["files"]["path"] = str(tmp_path / Path(sink["files"]["path"]).name)
    return parse_spec(data, "test")


def header(record: ConsumedRecord, name: str) -> str:
    return next(v for k, v in record.headers if k == name and v is not None).decode()


def region_updates(records: list[ConsumedRecord]) -> dict[str, list[int]]:
    """Each region's totals in the changelog's order (a region's updates share one partition)."""
    updates: dict[str, list[int]] = {}
    for record in records:
        assert record.key is not None
        updates.setdefault(record.key.decode(), []).append(decode(record.value, Format.LONG))
    return updates


@pytest.mark.spark
@pytest.mark.kafka
def test_an_old_table_backlog_in_small_batches_gives_the_exact_totals_and_each_result_once_across_crashes(
    spark: Any, kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from py4j.protocol import Py4JJavaError

    from streamjoin.spark.job import JobSettings, StreamJob
    from streamjoin.spark.source import read_offsets

    spec = seed_spec(tmp_path, max_records=500, delivery="exactly_once")
    assert spec.aggregate is not None and spec.output.topic and spec.aggregate.output.topic
    plan = plan_topics(spec)
    assert plan.topic(spec.marker_topic).partitions == 1
    ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan)
    base = int(time.time() * 1000) - 3_600_000
    records, expected = backlog(base)
    # the table arrives after the clicks on the broker, with earlier timestamps: arrival order is no help
    produce(kafka_bootstrap, spec, [r for r in records if r[0] == "clicks"])
    produce(kafka_bootstrap, spec, [r for r in records if r[0] == "regions"])
    settings = JobSettings(kafka_bootstrap, str(tmp_path / "ck"), available_now=True, home=str(tmp_path))

    with pytest.raises(Crash):  # after batch 2's outputs and state are written, before its commit
        crashing_job(2)(spark, spec, settings).run()
    # batch 2 again (its markers found: nothing sent), then batch 3 dies in join task 0's open transaction; then
    # batch 3 again and batch 4 dies after aggregate task 5 committed (the write's tasks: the join's 4
    # partitions, the aggregate's 4, then the dead letters')
    system = spark.sparkContext._jvm.java.lang.System
    for fault in ("mid_transaction:3:0", "after_commit:4:5"):
        system.setProperty(FAULT, fault)
        try:
            with pytest.raises(Py4JJavaError, match="test fault"):
                StreamJob(spark, spec, settings).run()
        finally:
            system.clearProperty(FAULT)
    capsys.readouterr()
    ran = StreamJob(spark, spec, settings).run()
    # 3400 records are 7 batches of at most 500; batch 4 runs again, then 5 and 6
    assert ran == 3, f"{USERS + CLICKS} records in batches of 500: {ran} batches after the last crash"
    # 5 and 6 were planned while the batch before ran (4 was logged before the crash); each line gives the
    # driver's time outside the batch's job
    lines = [json.loads(line[len("streamjoin batch ") :]) for line in capsys.readouterr().out.splitlines()
             if line.startswith("streamjoin batch ")]  # fmt: skip
    assert [(b["batch_id"], b["planned_ahead"]) for b in lines] == [(4, False), (5, True), (6, True)], lines
    assert all(isinstance(b["driver_ms"], int) and b["driver_ms"] >= 0 for b in lines), lines
    assert final_totals(kafka_bootstrap, spec) == expected

    # the watermark the job reports for the backfill equals the one read from its committed offsets
    from streamjoin.airflow.sensors import stream_watermark

    files = PipelineFiles(tmp_path / "ck")
    # the counts of the query's batches, the crashed runs' 0 to 3 and this run's 4 to 6, each once: every
    # record read once, every click joined once (a left join), no dead letter
    status = files.status()
    history = [e for e in files.history.read() if e.batch_id is not None]
    assert status is not None and [e.batch_id for e in history] == [0, 1, 2, 3, 4, 5, 6]
    totals = status.totals
    assert totals.input_records == sum(e.input_records for e in history) == USERS + CLICKS
    assert totals.output_records == sum(e.output_records or 0 for e in history) == CLICKS
    assert totals.dead_letters == 0 and status.counts.state_bytes is not None
    reported = files.watermark()
    assert reported is not None and reported >= base + 10_000, files.status()
    files.status_path.unlink()
    assert stream_watermark(spec, kafka_bootstrap, files.checkpoint) == (reported, "checkpoint offsets")

    # every click enriched exactly once in the files: batch 2 was rewritten, not added twice
    enriched_path = str(tmp_path / "enriched_clicks" / "stream")
    clicks = input_coordinates(kafka_bootstrap, spec.inputs["clicks"].topic, CLICKS)
    assert_each_once(file_coordinates(spark, enriched_path), clicks, "the enriched files")
    enriched = spark.read.parquet(enriched_path)
    per_region = enriched.select("value.region", "value.clicks").groupBy("region").sum("clicks").collect()
    assert dict(per_region) == expected

    # exactly once on Kafka, read committed: each click's (user, timestamp) once on the enriched topic
    clicks_sent = Counter((str(key), str(ts)) for name, key, _, ts in records if name == "clicks")
    on_topic = consume_all(kafka_bootstrap, spec.output.topic, timeout=60)
    got = Counter((r.key.decode() if r.key else "", header(r, "ts")) for r in on_topic)
    duplicated = [c for c, n in got.items() if n > 1]
    assert got == clicks_sent, f"{sum(got.values())} enriched records for {CLICKS} clicks; duplicated {duplicated[:3]}"
    # and the aggregate's changelog: each region's running total once per click, rising to its total
    users = [int(str(key)[1:]) for name, key, _, _ in records if name == "clicks"]
    per_click = Counter(REGIONS[user % 4] if user < USERS else "UNKNOWN" for user in users)
    updates = region_updates(consume_all(kafka_bootstrap, spec.aggregate.output.topic, timeout=60))
    assert {region: len(totals) for region, totals in updates.items()} == dict(per_click)
    assert all(a < b for totals in updates.values() for a, b in itertools.pairwise(totals)), updates
    assert {region: totals[-1] for region, totals in updates.items()} == expected
    # read uncommitted, the aborted transaction's records are there too
    raw = consume_all(kafka_bootstrap, spec.output.topic, timeout=60, committed_only=False)
    assert len(raw) > CLICKS, "the aborted transaction's records should be on the topic, hidden from read committed"
    assert len(consume_all(kafka_bootstrap, spec.dead_letter_topic, timeout=30)) == 0
    # a pipeline reading this output (Spark's Kafka source as the job reads its inputs, up to the planner's
    # latest offsets) sees each result once, across the aborted records and the transactions' markers
    offsets = KafkaOffsets(kafka_bootstrap)
    partitions = offsets.partitions([spec.output.topic])
    downstream = read_offsets(spark, kafka_bootstrap, by_topic(offsets.earliest(partitions)),
                              by_topic(offsets.latest(partitions)))  # fmt: skip
    assert downstream.count() == CLICKS
