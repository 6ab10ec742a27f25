"""Repartitioning one side of a join on the real broker (seed 003's remedy): page views on a 3-partition
topic joined with profiles on a 4-partition topic. Provisioning creates the internal topic with the
profiles' 4 partitions (not the spec's kafka.partitions), the streaming job copies the views there with
murmur2 placement and joins them in micro-batches; the output topic equals the reference engine's answer,
the internal topic holds exactly the views where murmur2 puts them, and the reprocessed day agrees."""

from __future__ import annotations

import random
import sys
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from streamjoin.core.backfill import day_start_ms, plan_day
from streamjoin.core.codec import decode, encode
from streamjoin.core.partitioner import partition_for
from streamjoin.core.records import Record
from streamjoin.core.reference import ReferenceEngine
from streamjoin.core.spec import Format, parse_spec
from streamjoin.core.topic_plan import plan_topics
from streamjoin.kafka.admin import ensure_topics
from streamjoin.kafka.clients import RecordTuple, consume_all, produce_records

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from kafka_helpers import create_topic, describe

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

VIEWS_PARTITIONS, PROFILES_PARTITIONS = 3, 4
DAY = (datetime.now(UTC) - timedelta(days=1)).date()


def inputs(views: str, profiles: str) -> list[Record]:
    """Profile updates (a tombstone among them) and page views interleaved in time, each timestamp once; a
    view without a profile, and a view with a null value (a dead letter)."""
    rng = random.Random(18)
    users = [f"user-{i}" for i in range(12)]
    records: list[Record] = []
    base = day_start_ms(DAY) + 2 * 3_600_000
    for step in range(70):
        ts = base + step * 1000
        if step % 4 == 0:
            user = rng.choice(users[:10])  # user-10 and user-11 never get a profile
            region = None if step == 40 else rng.choice(["europe", "americas", "asia"])
            records.append(Record(profiles, user, region, ts))
        else:
            value = None if step == 33 else f"/page/{rng.randint(1, 9)}"
            records.append(Record(views, rng.choice(users), value, ts))
    return records


def test_a_repartitioned_side_joins_exactly(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[[str], str], tmp_path: Path
) -> None:
    from streamjoin.spark.job import JobSettings, run_stream
    from streamjoin.spark.reprocess import reprocess_day

    views, profiles = topic_factory("page-views"), topic_factory("user-profiles")
    name = f"rp_{views.rsplit('-', 1)[1]}"
    spec = parse_spec(
        {
            "name": name,
            "kafka": {"partitions": 2},  # the internal topic must follow the profiles' count instead
            "inputs": {
                "views": {"topic": views, "role": "stream", "repartition": True},
                "profiles": {"topic": profiles, "role": "table"},
            },
            "join": {"shape": "stream-table", "kind": "left", "left": "views", "right": "profiles"},
            "output": {"topic": topic_factory("enriched-views"), "files": {"path": "out/enriched"}},
            "dead_letter_topic": topic_factory("views-dlq"),
            "trigger": {"max_offsets_per_trigger": 40},  # batches cut by event time over the internal topic
        },
        "repartition-test",
    )
    internal = spec.repartition_topic("views")
    create_topic(kafka_bootstrap, views, VIEWS_PARTITIONS)
    create_topic(kafka_bootstrap, profiles, PROFILES_PARTITIONS, {"cleanup.policy": "compact"})
    try:
        report = ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan_topics(spec))
        assert internal in report.created
        internal_topic = describe(kafka_bootstrap, internal)
        assert internal_topic.partitions == PROFILES_PARTITIONS
        assert internal_topic.config["cleanup.policy"] == "delete"

        records = inputs(views, profiles)
        produce_records(
            kafka_bootstrap,
            [(r.topic, encode(r.key, Format.STRING), encode(r.value, Format.STRING), r.ts, []) for r in records],
        )
        settings = JobSettings(bootstrap=kafka_bootstrap, checkpoint_dir=str(tmp_path / "ck"), available_now=True,
                               home=str(tmp_path))  # fmt: skip
        batches = run_stream(spark, spec, settings)
        assert batches >= 2

        # the reference engine, each key in its co-partitioned task (murmur2 over the profiles' count)
        placed = [
            Record(r.topic, r.key, r.value, r.ts, partition_for(key_bytes(r.key), PROFILES_PARTITIONS)) for r in records
        ]
        expected = ReferenceEngine(spec).replay(placed)
        expected_out = per_key([(e.key, e.value, e.ts) for e in expected if e.topic == spec.output.topic])
        assert spec.output.topic is not None
        got = consume_all(kafka_bootstrap, spec.output.topic, timeout=30)
        got_out = per_key(
            [
                (decode(r.key, Format.STRING), decode(r.value, Format.JSON), int(dict(r.headers)["ts"] or b""))
                for r in got
            ]
        )
        assert got_out == expected_out
        assert sum(len(v) for v in got_out.values()) == sum(1 for r in records if r.topic == views) - 1
        assert any(value["right"] is None for rows in got_out.values() for value, _ in rows)  # user-10/11
        dead = consume_all(kafka_bootstrap, spec.dead_letter_topic, timeout=30)
        assert len(dead) == sum(1 for e in expected if e.topic == spec.dead_letter_topic) == 1

        # the internal topic: every view once, where murmur2 puts its key, with its own timestamp, in order
        copied = consume_all(kafka_bootstrap, internal, timeout=30)
        source_views = [r for r in records if r.topic == views]
        assert len(copied) == len(source_views)
        for record in copied:
            assert record.key is not None
            assert record.partition == partition_for(record.key, PROFILES_PARTITIONS)
        assert sorted((decode(r.key, Format.STRING), r.timestamp) for r in copied) == sorted(
            (r.key, r.ts) for r in source_views
        )
        for partition in range(PROFILES_PARTITIONS):
            stamps = [r.timestamp for r in copied if r.partition == partition]
            assert stamps == sorted(stamps)

        # reprocessing the day reads the internal topic: the same joined records as the stream (in one batch)
        whole = spec.model_copy(update={"trigger": spec.trigger.model_copy(update={"max_offsets_per_trigger": None})})
        result = reprocess_day(spark, whole, plan_day(whole, DAY), kafka_bootstrap, home=tmp_path)
        daily = spark.read.parquet(result.paths["enriched"]).select("key", "value", "ts").collect()
        reprocessed = per_key([(row["key"], row["value"].asDict(), row["ts"]) for row in daily])
        assert {k: sorted(v, key=lambda x: x[1]) for k, v in reprocessed.items()} == expected_out
    finally:
        from streamjoin.kafka.admin import delete_topics

        delete_topics({"bootstrap.servers": kafka_bootstrap}, [internal], timeout=15)


def key_bytes(key: str) -> bytes:
    encoded = encode(key, Format.STRING)
    assert encoded is not None
    return encoded


def per_key(rows: list[tuple[Any, Any, int]]) -> dict[Any, list[tuple[Any, int]]]:
    grouped: dict[Any, list[tuple[Any, int]]] = defaultdict(list)
    for key, value, ts in rows:
        grouped[key].append((value, ts))
    return dict(grouped)


def test_a_copy_step_run_again_after_a_crash_writes_nothing_twice(
    spark: Any, kafka_bootstrap: str, topic_factory: Callable[[str], str], tmp_path: Path
) -> None:
    """The step's records all reached the internal topic but the driver died before ``commits/0``: the step
    runs again (same offsets) and skips what is there; the next step copies only the new records."""
    from streamjoin.core.job_files import OffsetLog
    from streamjoin.core.repartition import Repartitioned
    from streamjoin.kafka.offsets import KafkaOffsets
    from streamjoin.spark.repartition import Repartitioner

    source, internal = topic_factory("clicks"), topic_factory("clicks-repartition")
    create_topic(kafka_bootstrap, source, 3)
    create_topic(kafka_bootstrap, internal, 2)
    base = day_start_ms(DAY)
    rows: list[RecordTuple] = [(source, f"k{i % 7}".encode(), f"v{i}".encode(), base + i, []) for i in range(30)]
    produce_records(kafka_bootstrap, rows[:20])
    log = OffsetLog(tmp_path / "repartition" / "clicks")
    item = Repartitioned("clicks", source, internal)

    def step() -> int:
        return Repartitioner(spark, item, kafka_bootstrap, log, KafkaOffsets(kafka_bootstrap)).step()

    assert step() == 20
    (tmp_path / "repartition" / "clicks" / "commits" / "0").unlink()  # the crash: copied, not committed
    assert step() == 0  # step 0 again: every record of it is already there
    produce_records(kafka_bootstrap, rows[20:])
    assert step() == 10
    copied = consume_all(kafka_bootstrap, internal, timeout=30)
    assert sorted(r.value for r in copied if r.value) == sorted(v or b"" for _, _, v, _, _ in rows)
    assert all(r.key is not None and r.partition == partition_for(r.key, 2) for r in copied)
    coordinates = {(dict(r.headers)["source_partition"], dict(r.headers)["source_offset"]) for r in copied}
    assert len(coordinates) == len(copied) == 30  # each source record once
    assert {dict(r.headers)["source_topic"] for r in copied} == {source.encode()}
