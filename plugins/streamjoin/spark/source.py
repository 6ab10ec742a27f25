"""Kafka records between given offsets as Kafka-shaped rows (``key, value, topic, partition, offset, ts``).

The streaming job and reprocessing read a batch with :func:`read_task_ranges`: the kernel's tasks read their own
partitions, so the join needs no shuffle before its rules. :func:`read_offsets` (Spark's Kafka batch source)
reads what is not a join's batch: the repartition copy's input, tests and benchmarks."""

from __future__ import annotations

import json

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamjoin.core.job_files import Offsets
from streamjoin.core.spec import PipelineSpec, Role
from streamjoin.kafka.client_config import KafkaClientConfig, KafkaTarget
from streamjoin.spark.local_frames import local_frame
from streamjoin.spark.sinks import CONSUMER_OPTIONS

RAW_DDL = "key binary, value binary, topic string, partition int, offset long, ts long"


def read_task_ranges(
    spark: SparkSession, kafka: KafkaTarget, spec: PipelineSpec, start: Offsets, end: Offsets
) -> DataFrame:
    """The records :func:`read_offsets` reads, read by the kernel's tasks themselves (``java/kernel``'s
    ``KafkaRanges``, consumers kept per executor, read committed): partition t of the frame holds task t's,
    partition t of every co-partitioned input and every partition of a global table (each task keeps a
    replica), so the join takes them as they are (``process_batch(..., aligned=True)``).

    :raises Py4JJavaError: a ``TerminalKernelException`` when an input has a partition the spec's
        ``kafka.partitions`` does not (terminal)
    """
    from streamjoin.spark.kernel import java_class, java_map

    global_topics = {inp.topic for inp in spec.inputs.values() if inp.role is Role.GLOBAL_TABLE}
    lines = [
        f"{topic}\t{p}\t{first}\t{stop}\t{'G' if topic in global_topics else 'C'}\n"
        for topic, parts in sorted(end.items()) for p, stop in sorted(parts.items())
        if (first := start.get(topic, {}).get(p, -2)) != stop
    ]  # fmt: skip
    ranges = java_class(spark, "dev.streamjoin.kernel.KafkaRanges")
    settings = java_map(spark.sparkContext._gateway, _settings_key(kafka))
    return DataFrame(ranges.frame(spark._jsparkSession, settings, "".join(lines), spec.kafka.partitions), spark)


def _settings_key(kafka: KafkaTarget) -> tuple[tuple[str, str], ...]:
    """The consumer's Java settings: the connection's (security included) and the fetch sizes."""
    options = {key.removeprefix("kafka."): value for key, value in CONSUMER_OPTIONS.items()}
    return tuple(sorted({**KafkaClientConfig.of(kafka).java(), **options}.items()))


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
