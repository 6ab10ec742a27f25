"""The backfill's wait, deferred: the trigger reads the watermark on the real broker and fires once the day is
final; its lines give times in UTC, not epoch milliseconds. No Spark, no Airflow DB (~5 s)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from backfill_data import DAY, USERS, write_seed_spec

from streamjoin.core.backfill import DAY_MS, day_start_ms
from streamjoin.core.spec import Format, load_spec

pytestmark = [pytest.mark.kafka, pytest.mark.airflow]


def test_the_trigger_fires_once_the_stream_passed_the_day_and_says_so_in_utc(
    tmp_path: Path, kafka_bootstrap: str, topic_factory: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from streamjoin.airflow.sensors import WatermarkTrigger, watermark_status
    from streamjoin.core.codec import encode
    from streamjoin.core.partitioner import partition_for
    from streamjoin.kafka.admin import ensure_topics
    from streamjoin.kafka.clients import produce_records
    from streamjoin.kafka.topics import plan_topics

    spec_path = write_seed_spec(tmp_path / "pipelines", topic_factory, name=f"wm_{topic_factory('x')[-8:]}")
    spec = load_spec(spec_path)
    ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan_topics(spec))
    assert {partition_for(u.encode(), spec.kafka.partitions) for u in USERS} == set(range(spec.kafka.partitions))
    end = day_start_ms(DAY) + DAY_MS

    def clicks_at(ts: int) -> None:
        produce_records(kafka_bootstrap, [(spec.left.topic, u.encode(), encode(1, Format.LONG), ts, []) for u in USERS])

    clicks_at(end + 30 * 60_000)  # half an hour after the day: within the hour of lateness
    ready, line = watermark_status(str(spec_path), DAY.isoformat(), kafka_bootstrap)
    assert not ready
    assert line == (
        f"{spec.name} {DAY}: stream watermark {DAY + timedelta(days=1)} 00:30:00 UTC (from input topics' latest "
        f"records); the day is final at {DAY + timedelta(days=1)} 01:00:00 UTC (day end + 60 min lateness): waiting"
    )

    clicks_at(end + 2 * 3_600_000)
    host, port = kafka_bootstrap.split(":")
    monkeypatch.setenv(
        "AIRFLOW_CONN_WM_KAFKA", json.dumps({"conn_type": "streamjoin_kafka", "host": host, "port": int(port)})
    )
    trigger = WatermarkTrigger(spec_path=str(spec_path), day=DAY.isoformat(), kafka_conn_id="wm_kafka", poll=0.5)
    path, kwargs = trigger.serialize()
    assert path == "streamjoin.airflow.sensors.WatermarkTrigger" and WatermarkTrigger(**kwargs).serialize() == (
        path,
        kwargs,
    )

    async def first_event() -> dict[str, object]:
        async for event in trigger.run():
            return event.payload
        raise AssertionError("the trigger ended without an event")

    payload = asyncio.run(asyncio.wait_for(first_event(), timeout=60))  # bound: the broker answers in seconds
    assert payload["ready"] is True
    assert f"stream watermark {DAY + timedelta(days=1)} 02:00:00 UTC" in str(payload["status"])
