"""The streaming job over a backlog that is already on the topics, in small micro-batches, on the real
broker: regions (earlier timestamps) and clicks (later) as a first deployment or a restart after an outage
finds them. Kafka Streams processes the regions first; so must the job, whatever its batch size, and also
when it dies mid-backlog and starts again from its checkpoint."""

from __future__ import annotations

import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from exactly_once import assert_each_once, file_coordinates, input_coordinates
from job_crash import Crash, crashing_job
from streamjoin.core.codec import decode, encode
from streamjoin.core.job_files import PipelineFiles
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.spec import Format, PipelineSpec, load_spec, parse_spec
from streamjoin.core.topic_plan import plan_topics
from streamjoin.kafka.admin import ensure_topics
from streamjoin.kafka.clients import consume_all, produce_records

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_streaming_scenarios import renamed

REGIONS = ["europe", "asia", "americas", "africa"]
USERS, CLICKS = 400, 3000


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


def seed_spec(tmp_path: Path, max_records: int) -> PipelineSpec:
    spec, _ = renamed(load_spec(PROJECT_HOME / "include/pipelines/clicks_per_region.yaml"), "-" + uuid.uuid4().hex[:8])
    data = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["kafka"] = {"partitions": 4, "replication_factor": 1}
    data["trigger"] = {"processing_time": 0, "max_offsets_per_trigger": max_records}
    for sink in (data["output"], data["aggregate"]["output"]):
        sink["files"]["path"] = str(tmp_path / Path(sink["files"]["path"]).name)
    return parse_spec(data, "test")


@pytest.mark.spark
@pytest.mark.kafka
def test_an_old_table_backlog_in_small_batches_gives_the_exact_totals_across_a_crash(
    spark: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    from streamjoin.spark.job import JobSettings, StreamJob

    spec = seed_spec(tmp_path, max_records=500)
    ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan_topics(spec))
    base = int(time.time() * 1000) - 3_600_000
    records, expected = backlog(base)
    # the table arrives after the clicks on the broker, with earlier timestamps: arrival order is no help
    produce(kafka_bootstrap, spec, [r for r in records if r[0] == "clicks"])
    produce(kafka_bootstrap, spec, [r for r in records if r[0] == "regions"])
    settings = JobSettings(kafka_bootstrap, str(tmp_path / "ck"), available_now=True, home=str(tmp_path))

    with pytest.raises(Crash):  # after batch 2's outputs and state are written, before its commit
        crashing_job(2)(spark, spec, settings).run()
    ran = StreamJob(spark, spec, settings).run()
    # 3400 records are 7 batches of at most 500; batch 2 runs again, then 3 to 6
    assert ran == 5, f"{USERS + CLICKS} records in batches of 500: {ran} batches after the crash"
    assert final_totals(kafka_bootstrap, spec) == expected

    # the watermark the job reports for the backfill equals the one read from its committed offsets
    from streamjoin.airflow.sensors import stream_watermark

    files = PipelineFiles(tmp_path / "ck")
    # the counts of the query's batches, the crashed run's 0 and 1 and this run's 2 to 6, each once: every
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
