"""Wait until a pipeline's stream has passed a day's end plus its grace (so late records are in).

The stream's watermark, best source first:

1. ``<checkpoint>/status.json``: the ``watermark_ms`` the streaming job reports after every batch;
2. the last offsets the streaming query committed (``<checkpoint>/query/offsets/N``): the minimum over the
   stream inputs' partitions of the timestamp of the last record processed;
3. the stream input topics' latest records (the stream is assumed to keep up).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import BaseSensorOperator
from airflow.triggers.base import BaseTrigger, TriggerEvent

from streamjoin.core.backfill import plan_day
from streamjoin.core.job_files import PipelineFiles
from streamjoin.core.plans import checkpoint_dir, resolve
from streamjoin.core.spec import PipelineSpec, Role, load_spec
from streamjoin.kafka.client_config import KafkaClientConfig, KafkaTarget


def _last_record_ts(kafka: KafkaTarget, topic: str, partition: int, next_offset: int, timeout: float) -> int | None:
    from confluent_kafka import Consumer, TopicPartition

    if next_offset <= 0:
        return None
    settings = {"group.id": "streamjoin-watermark", "enable.auto.commit": False}
    consumer = Consumer(KafkaClientConfig.of(kafka).librdkafka(**settings))
    try:
        consumer.assign([TopicPartition(topic, partition, next_offset - 1)])
        message = consumer.poll(timeout)
        if message is None or message.error() is not None:
            return None
        return message.timestamp()[1]
    finally:
        consumer.close()


def stream_watermark(
    spec: PipelineSpec, kafka: KafkaTarget, checkpoint: Path, *, timeout: float = 10.0
) -> tuple[int | None, str]:
    """(watermark in ms or None if nothing was processed yet, where it came from)."""
    files = PipelineFiles(checkpoint)
    reported = files.watermark()
    if reported is not None:
        return reported, str(files.status_path)
    from streamjoin.core.repartition import join_view

    # the topics the join reads (a repartitioned stream: its internal topic, whose offsets the job logs)
    topics = [i.topic for i in join_view(spec).inputs.values() if i.role is Role.STREAM]
    positions: Mapping[str, Mapping[int, int]] | None = files.offset_log.committed_offsets()
    source = "checkpoint offsets"
    if positions is None:
        from streamjoin.kafka.clients import end_offsets

        positions = {t: end_offsets(kafka, t, timeout=timeout) for t in topics}
        source = "input topics' latest records"
    stamps = [
        ts
        for t in topics
        for p, o in positions.get(t, {}).items()
        if (ts := _last_record_ts(kafka, t, p, o, timeout)) is not None
    ]
    return (min(stamps) if stamps else None), source


def utc(ms: int | None) -> str:
    """Epoch milliseconds as a readable UTC time (logs, messages)."""
    if ms is None:
        return "none yet (nothing processed)"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def watermark_status(spec_path: str, day: str, kafka: KafkaTarget) -> tuple[bool, str]:
    """(is the day final, a line saying why) for ``day`` of the pipeline."""
    spec = load_spec(resolve(spec_path))
    plan = plan_day(spec, day)
    watermark, source = stream_watermark(spec, kafka, checkpoint_dir(spec))
    ready = watermark is not None and watermark >= plan.ready_at_ms
    line = (
        f"{spec.name} {plan.day}: stream watermark {utc(watermark)} (from {source}); the day is final at "
        f"{utc(plan.ready_at_ms)} (day end + {plan.grace_ms // 60_000} min lateness): "
        + ("ready" if ready else "waiting")
    )
    return ready, line


class WatermarkTrigger(BaseTrigger):
    """Fires once the pipeline's stream watermark passed the day's end + lateness (polled in a thread every
    ``poll`` seconds, in the triggerer).

    :param spec_path: the pipeline's spec
    :param day: ``YYYY-MM-DD``
    :param kafka_conn_id: the Kafka connection (read in the triggerer: no secret is serialized here)
    """

    def __init__(self, *, spec_path: str, day: str, kafka_conn_id: str, poll: float = 60.0) -> None:
        super().__init__()
        self.spec_path, self.day, self.kafka_conn_id, self.poll = spec_path, day, kafka_conn_id, float(poll)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"spec_path": self.spec_path, "day": self.day, "kafka_conn_id": self.kafka_conn_id, "poll": self.poll},
        )

    def _status(self) -> tuple[bool, str]:
        from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook

        try:
            kafka = StreamJoinKafkaHook(self.kafka_conn_id).kafka_config()
            return watermark_status(self.spec_path, self.day, kafka)
        except Exception as exc:  # the broker may be down for a while: keep waiting, say why
            return False, f"watermark unavailable: {exc}"

    async def run(self) -> AsyncIterator[TriggerEvent]:
        last = ""
        while True:
            ready, line = await asyncio.to_thread(self._status)
            if line != last:
                self.log.info("%s", line)
                last = line
            if ready:
                yield TriggerEvent({"ready": True, "status": line})
                return
            await asyncio.sleep(self.poll)


class StreamWatermarkSensor(BaseSensorOperator):
    """Succeeds once the stream's watermark is past ``day`` end + the pipeline's grace/lateness. Checks once
    in the worker, then (``deferrable``, the default) waits in the triggerer, holding no worker slot; logs
    the watermark and the time the day is final in UTC.

    :param spec_path: pipeline spec (templated)
    :param day: ``YYYY-MM-DD`` (templated)
    :param deferrable: wait in the triggerer (else poke in reschedule mode)
    """

    template_fields: Sequence[str] = ("spec_path", "day", "kafka_conn_id")

    def __init__(
        self, *, spec_path: str, day: str, kafka_conn_id: str = "streamjoin_kafka_default", deferrable: bool = True,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        kwargs.setdefault("mode", "reschedule")
        kwargs.setdefault("poke_interval", 60)
        super().__init__(**kwargs)
        self.spec_path, self.day, self.kafka_conn_id, self.deferrable = spec_path, day, kafka_conn_id, deferrable

    def poke(self, context: Any) -> bool:
        from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook

        ready, line = watermark_status(
            self.spec_path, self.day, StreamJoinKafkaHook(self.kafka_conn_id).checked_config()
        )
        self.log.info("%s", line)
        return ready

    def execute(self, context: Any) -> Any:
        if not self.deferrable or self.poke(context):
            return super().execute(context) if not self.deferrable else None
        self.defer(
            trigger=WatermarkTrigger(
                spec_path=self.spec_path, day=self.day, kafka_conn_id=self.kafka_conn_id, poll=self.poke_interval
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=float(self.timeout)),
        )

    def execute_complete(self, context: Any, event: dict[str, Any] | None = None) -> None:
        self.log.info("%s", (event or {}).get("status", "watermark passed"))
