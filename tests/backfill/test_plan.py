"""Day plans and the trigger form's validation: each bad input fails with a message naming it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path

import pytest
from backfill_data import DAY, write_seed_spec

from streamjoin.core.backfill import (
    DAY_MS,
    BackfillError,
    RetentionFact,
    check_retention,
    day_start_ms,
    plan_day,
    validate_request,
)
from streamjoin.core.spec import Role, load_spec, parse_spec

TODAY = date(2026, 11, 23)
PIPELINES = ["clicks_per_region", "orders"]


def _seed(tmp_path: Path):
    return load_spec(write_seed_spec(tmp_path, lambda base: base))


def test_stream_table_day_plan_reads_tables_from_the_beginning_and_streams_from_day_start(tmp_path: Path) -> None:
    spec = _seed(tmp_path)
    plan = plan_day(spec, "2026-11-20")
    start = day_start_ms(date(2026, 11, 20))
    assert (plan.start_ms, plan.end_ms) == (start, start + DAY_MS)
    reads = {r.role: r for r in plan.reads}
    assert reads[Role.STREAM].from_ms == start and reads[Role.TABLE].from_ms is None
    assert reads[Role.STREAM].to_ms == reads[Role.TABLE].to_ms == start + DAY_MS + 3_600_000
    assert plan.contains(start) and not plan.contains(start + DAY_MS)


def test_stream_stream_day_plan_looks_back_by_the_window_and_grace() -> None:
    spec = parse_spec(
        {
            "name": "ss",
            "inputs": {"a": {"topic": "a", "role": "stream"}, "b": {"topic": "b", "role": "stream"}},
            "join": {"shape": "stream-stream", "kind": "inner", "left": "a", "right": "b",
                     "window": {"before": "5m", "after": "1m"}, "grace": "2h"},
            "output": {"topic": "out"},
            "dead_letter_topic": "dlq",
        }
    )  # fmt: skip
    plan = plan_day(spec, date(2026, 11, 20))
    assert {r.from_ms for r in plan.reads} == {plan.start_ms - 6 * 60_000 - 2 * 3_600_000}
    assert plan.ready_at_ms == plan.end_ms + 2 * 3_600_000


@pytest.mark.parametrize(
    ("pipeline", "start", "end", "message"),
    [
        ("nope", "2026-11-01", "2026-11-02", "unknown pipeline 'nope'"),
        ("orders", "2026-11-31", "2026-11-02", "start '2026-11-31' is not a date"),
        ("orders", "2026-11-05", "2026-11-02", "end 2026-11-02 is before start 2026-11-05"),
        ("orders", "2026-11-20", "2026-11-23", "end 2026-11-23 is not over yet"),
        ("orders", "2026-11-20", "2026-12-01", "end 2026-12-01 is not over yet"),
        ("orders", "2024-01-01", "2026-11-01", "at most 366 per run"),
    ],
)
def test_bad_requests_fail_naming_the_value(pipeline: str, start: str, end: str, message: str) -> None:
    with pytest.raises(BackfillError, match=message):
        validate_request(pipeline, start, end, pipelines=PIPELINES, today=TODAY)


def test_a_good_request_gives_its_days_and_refuses_published_days_without_overwrite() -> None:
    days = validate_request("orders", "2026-11-20", "2026-11-22", pipelines=PIPELINES, today=TODAY)
    assert days == [date(2026, 11, 20), date(2026, 11, 21), date(2026, 11, 22)]
    with pytest.raises(BackfillError, match=r"already published: \['2026-11-21'\]"):
        validate_request(
            "orders", "2026-11-20", "2026-11-22", pipelines=PIPELINES, today=TODAY,
            existing=[date(2026, 11, 21)], overwrite=False,
        )  # fmt: skip


def test_retention_rule_on_facts(tmp_path: Path) -> None:
    plan = plan_day(_seed(tmp_path), "2026-11-20")
    clicks, regions = (r.topic for r in plan.reads)
    later = plan.start_ms + 1000
    check_retention(plan, {clicks: RetentionFact(False, later)})  # never truncated: the day began later
    with pytest.raises(BackfillError, match=f"beyond Kafka retention: topic '{clicks}'"):
        check_retention(plan, {clicks: RetentionFact(True, later)})
    with pytest.raises(BackfillError, match=f"table topic '{regions}' was truncated"):
        check_retention(plan, {regions: RetentionFact(True, plan.start_ms - DAY_MS)})


@pytest.mark.kafka
def test_a_range_beyond_kafka_retention_is_refused(
    tmp_path: Path, kafka_bootstrap: str, topic_factory: Callable[[str], str]
) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    from streamjoin.airflow.operators.reprocess import retention_facts
    from streamjoin.core.codec import encode
    from streamjoin.core.spec import Format
    from streamjoin.kafka.admin import ensure_topics
    from streamjoin.kafka.clients import produce_records
    from streamjoin.kafka.topics import plan_topics

    spec = load_spec(write_seed_spec(tmp_path, topic_factory))
    ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan_topics(spec))
    start = day_start_ms(DAY)  # recent: the broker's 7-day retention would delete an older day's records
    clicks = spec.left.topic
    rows = [(clicks, b"u1", encode(n, Format.LONG), start + n * 3_600_000, []) for n in range(6)]
    produce_records(kafka_bootstrap, rows)
    plan = plan_day(spec, DAY)
    check_retention(plan, retention_facts(kafka_bootstrap, [clicks]))  # all there
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    partition = next(iter({p for p, o in _ends(kafka_bootstrap, clicks).items() if o > 0}))
    for future in admin.delete_records([TopicPartition(clicks, partition, 2)]).values():
        future.result(timeout=30)
    with pytest.raises(BackfillError, match=f"topic '{clicks}' holds records from {DAY.isoformat()}T02:00:00"):
        check_retention(plan, retention_facts(kafka_bootstrap, [clicks]))


def _ends(bootstrap: str, topic: str) -> dict[int, int]:
    from streamjoin.kafka.clients import end_offsets

    return end_offsets(bootstrap, topic)


@pytest.mark.kafka
def test_stream_watermark_from_the_checkpoint_else_the_topics(
    tmp_path: Path, kafka_bootstrap: str, topic_factory: Callable[[str], str]
) -> None:
    import json

    from streamjoin.airflow.sensors import stream_watermark
    from streamjoin.core.codec import encode
    from streamjoin.core.spec import Format
    from streamjoin.kafka.admin import ensure_topics
    from streamjoin.kafka.clients import end_offsets, produce_records
    from streamjoin.kafka.topics import plan_topics

    spec = load_spec(write_seed_spec(tmp_path, topic_factory))
    ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan_topics(spec))
    clicks = spec.left.topic
    start = day_start_ms(DAY)  # recent: the broker's 7-day retention would delete an older day's records
    produce_records(kafka_bootstrap, [(clicks, b"u1", encode(1, Format.LONG), start + n * 1000, []) for n in range(5)])
    checkpoint = tmp_path / "checkpoint"
    assert stream_watermark(spec, kafka_bootstrap, checkpoint) == (start + 4000, "input topics' latest records")
    (partition,) = [p for p, o in end_offsets(kafka_bootstrap, clicks).items() if o > 0]
    (checkpoint / "query" / "offsets").mkdir(parents=True)
    (checkpoint / "query" / "commits").mkdir(parents=True)
    offsets = {clicks: {str(partition): 3}}
    (checkpoint / "query" / "offsets" / "0").write_text(f'v1\n{{"batchWatermarkMs":0}}\n{json.dumps(offsets)}\n')
    (checkpoint / "query" / "commits" / "0").write_text("v1\n{}\n")
    assert stream_watermark(spec, kafka_bootstrap, checkpoint) == (start + 2000, "checkpoint offsets")
    (checkpoint / "status.json").write_text(json.dumps({"watermark_ms": start + 9000}))
    assert stream_watermark(spec, kafka_bootstrap, checkpoint)[0] == start + 9000


@pytest.mark.kafka
def test_a_partition_s_last_record_that_cannot_be_read_is_an_error_not_left_out(
    tmp_path: Path, kafka_bootstrap: str, topic_factory: Callable[[str], str]
) -> None:
    """The watermark is a minimum over partitions: one left out would make it too late (a day reprocessed
    before its records are in). A record deleted by retention is named; it was once read as "no record"."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    from streamjoin.airflow.sensors import stream_watermark
    from streamjoin.core.codec import encode
    from streamjoin.core.errors import KafkaUnavailableError
    from streamjoin.core.spec import Format
    from streamjoin.kafka.admin import ensure_topics
    from streamjoin.kafka.clients import produce_records
    from streamjoin.kafka.topics import plan_topics

    spec = load_spec(write_seed_spec(tmp_path, topic_factory))
    ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan_topics(spec))
    clicks, start = spec.left.topic, day_start_ms(DAY)
    produce_records(kafka_bootstrap, [(clicks, b"u1", encode(1, Format.LONG), start + n * 1000, []) for n in range(3)])
    (partition,) = [p for p, o in _ends(kafka_bootstrap, clicks).items() if o > 0]
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for future in admin.delete_records([TopicPartition(clicks, partition, 3)]).values():
        future.result(timeout=30)
    with pytest.raises(KafkaUnavailableError, match=f"offset 2 of '{clicks}' partition {partition}"):
        stream_watermark(spec, kafka_bootstrap, tmp_path / "checkpoint")
