"""``output.delivery: exactly_once`` on the real broker: the seed pipeline (a join and an aggregate) over a
backlog in 500-record batches, its driver killed three ways, then started again:

- after every write task's transaction committed and before ``commits/N`` (the whole batch runs again);
- in the middle of a join task's transaction (its records on the broker, uncommitted, the task dead);
- after an aggregate task's transaction committed, while the batch's other tasks ran.

Read committed, the enriched topic holds each click once and the aggregate's changelog each update once;
read uncommitted it holds the dead attempts' records too, which is what at-least-once consumers would see.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from job_crash import Crash, crashing_job
from streamjoin.core.batch_plan import by_topic
from streamjoin.core.codec import decode
from streamjoin.core.spec import Format, PipelineSpec, parse_spec
from streamjoin.core.topic_plan import plan_topics
from streamjoin.kafka.admin import ensure_topics
from streamjoin.kafka.clients import ConsumedRecord, consume_all
from streamjoin.kafka.offsets import KafkaOffsets

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_stream_job_backlog import CLICKS, REGIONS, USERS, backlog, produce, seed_spec

FAULT = "streamjoin.kernel.fault"  # TransactionalTask.FAULT


def exactly_once_spec(tmp_path: Path) -> PipelineSpec:
    data = seed_spec(tmp_path, max_records=500).model_dump(mode="json", by_alias=True, exclude_none=True)
    data["output"]["delivery"] = "exactly_once"
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
def test_a_killed_driver_leaves_each_result_and_update_once_on_the_topics_read_committed(
    spark: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    from py4j.protocol import Py4JJavaError

    from streamjoin.spark.job import JobSettings, StreamJob
    from streamjoin.spark.source import read_offsets

    spec = exactly_once_spec(tmp_path)
    assert spec.aggregate is not None and spec.output.topic and spec.aggregate.output.topic
    plan = plan_topics(spec)
    assert plan.topic(spec.marker_topic).partitions == 1
    ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan)
    records, expected = backlog(int(time.time() * 1000) - 3_600_000)
    produce(kafka_bootstrap, spec, [r for r in records if r[0] == "clicks"])
    produce(kafka_bootstrap, spec, [r for r in records if r[0] == "regions"])
    settings = JobSettings(kafka_bootstrap, str(tmp_path / "ck"), available_now=True, home=str(tmp_path))
    system = spark.sparkContext._jvm.java.lang.System

    with pytest.raises(Crash):  # batch 2 written, every transaction committed, commits/2 not written
        crashing_job(2)(spark, spec, settings).run()
    # batch 2 again (its markers found: nothing sent), then batch 3 dies in join task 0's open transaction
    # (the write's tasks: the join's 4 partitions, the aggregate's 4, then the dead letters')
    for fault in ("mid_transaction:3:0", "after_commit:4:5"):
        system.setProperty(FAULT, fault)
        try:
            with pytest.raises(Py4JJavaError, match="test fault"):
                StreamJob(spark, spec, settings).run()
        finally:
            system.clearProperty(FAULT)
    assert StreamJob(spark, spec, settings).run() == 3  # batch 4 again, then 5 and 6

    # the enriched clicks: each click's (user, timestamp) once, read committed
    clicks = Counter((str(key), str(ts)) for name, key, _, ts in records if name == "clicks")
    enriched = consume_all(kafka_bootstrap, spec.output.topic, timeout=60)
    got = Counter((r.key.decode() if r.key else "", header(r, "ts")) for r in enriched)
    assert got == clicks, f"{sum(got.values())} enriched records for {CLICKS} clicks; duplicated: " + str(
        [c for c, n in got.items() if n > 1][:3]
    )
    # the aggregate's changelog: each region's running total once per click, rising to its total
    users = [int(str(key)[1:]) for name, key, _, _ in records if name == "clicks"]
    per_region = Counter(REGIONS[user % 4] if user < USERS else "UNKNOWN" for user in users)
    updates = region_updates(consume_all(kafka_bootstrap, spec.aggregate.output.topic, timeout=60))
    assert {region: len(totals) for region, totals in updates.items()} == dict(per_region)
    assert all(a < b for totals in updates.values() for a, b in itertools.pairwise(totals)), updates
    assert {region: totals[-1] for region, totals in updates.items()} == expected

    # read uncommitted, the dead attempts' records are there too: batch 3's task 0 records, aborted
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
