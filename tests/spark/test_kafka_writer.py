"""The kernel's at-least-once Kafka writer (``sinks.write_kafka``, ``java/kernel``'s ``KafkaTaskWriter``) sends
the records Spark's Kafka sink sent for the same rows: each key on the same partition, with the same value and
headers, in the same order. Both write one frame to a topic of three partitions each; keys and values with
nulls, headers present, empty and null."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import pytest

from streamjoin.kafka.admin import delete_topics
from streamjoin.kafka.clients import ConsumedRecord, consume_all

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def _by_key(records: list[ConsumedRecord]) -> dict[tuple[int, bytes], list[tuple[Any, ...]]]:
    """Each keyed record's value and headers, in its partition's order, under (partition, key)."""
    keyed: dict[tuple[int, bytes], list[tuple[Any, ...]]] = {}
    for r in records:
        if r.key is not None:
            keyed.setdefault((r.partition, r.key), []).append((r.value, tuple(r.headers)))
    return keyed


def _unkeyed(records: list[ConsumedRecord]) -> Counter[tuple[Any, ...]]:
    """Records without a key (spread by the producer's sticky partitioner, so compared without their partition)."""
    return Counter((r.value, tuple(r.headers)) for r in records if r.key is None)


def test_the_kernels_writer_sends_what_sparks_kafka_sink_sent(spark: Any, kafka_bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    from pyspark.sql import functions as F

    from streamjoin.spark.sinks import HEADERS, PRODUCER_OPTIONS, write_kafka

    sink, kernel = f"by-spark-{uuid.uuid4().hex[:8]}", f"by-kernel-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for future in admin.create_topics([NewTopic(t, 3, 1) for t in (sink, kernel)]).values():
        future.result(30)
    n = F.col("id")
    ts = F.struct(F.lit("ts").alias("key"), n.cast("string").cast("binary").alias("value"))
    empty = F.struct(F.lit("none").alias("key"), F.lit(None).cast("binary").alias("value"))
    rows = spark.range(0, 4000, numPartitions=2).select(
        F.when(n % 97 == 0, None).otherwise(F.concat(F.lit("k"), (n % 300).cast("string"))).cast("binary").alias("key"),
        F.when(n % 89 == 0, None).otherwise(F.concat(F.lit("v"), n.cast("string"))).cast("binary").alias("value"),
        F.when(n % 3 == 0, F.array(ts, empty)).when(n % 3 == 1, F.array().cast(HEADERS)).alias("headers"), n,
    ).repartition(4, "key").sortWithinPartitions("id").drop("id").cache()  # fmt: skip
    try:
        rows.withColumn("topic", F.lit(sink)).write.format("kafka").options(**PRODUCER_OPTIONS).option(
            "kafka.bootstrap.servers", kafka_bootstrap
        ).save()
        assert write_kafka(rows.withColumn("topic", F.lit(kernel)), kafka_bootstrap) == "tasks=4 sent=4000"
        by_spark, by_kernel = consume_all(kafka_bootstrap, sink, 60), consume_all(kafka_bootstrap, kernel, 60)
    finally:
        rows.unpersist()
        delete_topics({"bootstrap.servers": kafka_bootstrap}, [sink, kernel], timeout=30)
    assert len(by_spark) == len(by_kernel) == 4000
    assert len({p for p, _ in _by_key(by_spark)}) == 3  # the keys spread over every partition
    assert _by_key(by_kernel) == _by_key(by_spark)
    assert _unkeyed(by_kernel) == _unkeyed(by_spark)
