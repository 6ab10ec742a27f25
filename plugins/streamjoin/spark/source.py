"""Kafka records between given offsets as Kafka-shaped rows (``key, value, topic, partition, offset, ts``):
the one way the streaming job and reprocessing read their inputs."""

from __future__ import annotations

import json

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamjoin.core.job_files import Offsets
from streamjoin.kafka.client_config import KafkaClientConfig, KafkaTarget
from streamjoin.spark.local_frames import local_frame
from streamjoin.spark.sinks import CONSUMER_OPTIONS

RAW_DDL = "key binary, value binary, topic string, partition int, offset long, ts long"


def read_offsets(spark: SparkSession, kafka: KafkaTarget, start: Offsets, end: Offsets) -> DataFrame:
    """Records of every partition of ``end`` from ``start`` (a partition missing there: from the earliest
    offset; -2 too) up to ``end``, in one read of Spark's Kafka batch source (``kafka``: the cluster,
    security settings included)."""
    ranges = {
        topic: {p: (start.get(topic, {}).get(p, -2), stop) for p, stop in parts.items()} for topic, parts in end.items()
    }
    ranges = {t: {p: r for p, r in parts.items() if r[0] != r[1]} for t, parts in ranges.items()}
    ranges = {t: parts for t, parts in ranges.items() if parts}
    if not ranges:
        return local_frame(spark, [], RAW_DDL)
    return (
        spark.read.format("kafka")
        .options(**KafkaClientConfig.of(kafka).spark_options())
        .option("assign", json.dumps({t: sorted(parts) for t, parts in ranges.items()}))
        .option("startingOffsets", _offsets_json(ranges, 0))
        .option("endingOffsets", _offsets_json(ranges, 1))
        .option("failOnDataLoss", "true")
        .options(**CONSUMER_OPTIONS)
        .load()
        .select("key", "value", "topic", "partition", "offset", F.unix_millis("timestamp").alias("ts"))
    )


def _offsets_json(ranges: dict[str, dict[int, tuple[int, int]]], which: int) -> str:
    return json.dumps({t: {str(p): r[which] for p, r in sorted(parts.items())} for t, parts in ranges.items()})
