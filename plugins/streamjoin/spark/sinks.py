"""Where a batch's outputs go: Kafka topics (changelogs in emission order), Parquet files, dead letters."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamjoin.core.output_columns import AGGREGATE_COLUMNS, JOINED_COLUMNS
from streamjoin.core.spec import Format, PipelineSpec, Sink
from streamjoin.kafka.client_config import KafkaClientConfig, KafkaTarget
from streamjoin.spark.events import ORDER
from streamjoin.spark.projection import is_json_text
from streamjoin.spark.serde import AvroOutput, encode, registered_output


def _header(name: str, value: Column) -> Column:
    return F.struct(F.lit(name).alias("key"), value.cast("string").cast("binary").alias("value"))


def encode_key(key: Column, fmt: Format) -> Column:
    """Key bytes: for ``long`` (an input key format) 8 bytes big-endian as Java's LongSerializer writes
    them, for a registry format (``avro``, ``protobuf``, ``json_schema``) its serialized bytes again, else the
    key's UTF-8 text."""
    if fmt is Format.LONG:
        return encode(key.cast("long"), Format.LONG)
    if fmt.in_registry:  # the serialized bytes, as events.decode_key holds them (hex)
        return F.unhex(key)
    return key.cast("binary")


def encode_value(
    value: Column, data_type: T.DataType, fmt: Format, *, json_text: bool = False, avro: AvroOutput | None = None
) -> Column:
    """Value bytes as ``fmt`` declares: ``string`` UTF-8 text, ``long`` 8 bytes big-endian (Java's
    LongSerializer), ``json`` a JSON document (a scalar too: a string is quoted, a number is its text),
    ``avro``, ``json_schema`` and ``protobuf`` the wire format with the output's registered schema (``avro``).

    :param json_text: the column already holds JSON documents (a function joiner's results)
    """
    if fmt in (Format.AVRO, Format.JSON_SCHEMA, Format.PROTOBUF):
        return encode(value, fmt, avro)
    structured = isinstance(data_type, (T.StructType, T.MapType, T.ArrayType))
    if fmt is not Format.JSON and structured:
        raise ValueError(f"value_format {fmt.value!r} holds a scalar, not {data_type.simpleString()}")
    if fmt is Format.JSON and not structured:
        if json_text:
            return value.cast("binary")
        if isinstance(data_type, T.StringType):  # ["text"] -> "text": Spark's JSON quoting of a string
            quoted = F.to_json(F.array(value))
            return F.when(value.isNotNull(), quoted.substr(F.lit(2), F.length(quoted) - 2).cast("binary"))
        return value.cast("string").cast("binary")
    return encode(value, fmt)


#: Producer settings of the kernel's writers (:func:`write_kafka`, :func:`write_kafka_transactions`): larger
#: batches and lz4 (the defaults send small batches).
PRODUCER_OPTIONS = {
    "kafka.linger.ms": "20",
    "kafka.batch.size": str(512 * 1024),
    "kafka.compression.type": "lz4",
    "kafka.buffer.memory": str(128 * 1024 * 1024),
}
#: Consumer settings of Spark's Kafka source: fetch more per request than the 1 MiB default, and do not
#: wait 500 ms (the default) on a fetch that reaches the end of a partition: the last batch of a backlog
#: and every batch of a live stream read up to the end. Read committed, as the planner's offsets are: an
#: input written with transactions (another pipeline's exactly-once output) is read without its aborted records.
CONSUMER_OPTIONS = {
    "kafka.isolation.level": "read_committed",
    "kafka.max.partition.fetch.bytes": str(16 * 1024 * 1024),
    "kafka.fetch.max.bytes": str(64 * 1024 * 1024),
    "kafka.fetch.max.wait.ms": "10",
}


def kafka_rows(rows: DataFrame, sink: Sink, topic: str, *, sort: bool = True) -> DataFrame:
    """Kafka-shaped rows for :func:`write_kafka`, in emission order within each partition.

    The record timestamp of a result (e.g. max of both join sides) travels in the ``ts`` header: the record's
    own timestamp is its send time, as Spark's Kafka sink wrote it. ``sort=False`` when every key's rows already
    sit in one partition in emission order (a stream-table join keeps the Kafka source's partitions and order).
    """
    value_type = rows.schema["value"].dataType
    if sort:
        # one writer per key, in emission order: Kafka keeps the order of one producer per partition
        rows = rows.repartition("key").sortWithinPartitions(*ORDER, "__sub")
    # a registered output's schema is registered when its program is built (the job's first batch)
    avro = registered_output(sink, value_type) if sink.value_format.in_registry else None
    return rows.select(
        encode_key(
            F.col("key"), Format.LONG if isinstance(rows.schema["key"].dataType, T.LongType) else Format.STRING
        ).alias("key"),
        encode_value(F.col("value"), value_type, sink.value_format, json_text=is_json_text(rows), avro=avro).alias(
            "value"
        ),
        F.lit(topic).alias("topic"),
        F.array(_header("ts", F.col("ts"))).alias("headers"),
    )


def dead_letter_rows(dead: DataFrame, topic: str) -> DataFrame:
    """Original bytes with the reason and the source coordinates in headers."""
    return dead.select(
        "key",
        "value",
        F.lit(topic).alias("topic"),
        F.array(
            _header("reason", F.col("reason")),
            _header("source_topic", F.col("topic")),
            _header("source_partition", F.col("partition")),
            _header("source_offset", F.col("offset")),
            _header("ts", F.col("ts")),
        ).alias("headers"),
    )


#: ``headers`` of Spark's Kafka sink's rows
HEADERS = T.ArrayType(T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())]))


def producer_settings(kafka: KafkaTarget) -> dict[str, str]:
    """The kernel's producers' settings: the connection's (security included) and :data:`PRODUCER_OPTIONS`."""
    producer = {key.removeprefix("kafka."): value for key, value in PRODUCER_OPTIONS.items()}
    return {**KafkaClientConfig.of(kafka).java(), **producer}


def write_kafka(rows: DataFrame, kafka: KafkaTarget) -> str:
    """Write Kafka-shaped rows (``key, value, topic[, headers]``; a string key or value as its UTF-8 bytes) at
    least once: each task sends its rows in their order through its executor's pooled idempotent producer
    (``java/kernel``'s ``KafkaTaskWriter``), the records Spark's Kafka sink would send. A send error fails the
    job with the kernel's terminal or transient exception, naming the topic.

    :return: ``tasks=T sent=S``
    """
    headers = F.col("headers") if "headers" in rows.columns else F.lit(None).cast(HEADERS)
    frame = rows.select(F.col("key").cast("binary"), F.col("value").cast("binary"), "topic", headers.alias("headers"))
    writer = _kernel_class(rows.sparkSession, "KafkaTaskWriter")
    return str(writer.write(rows.sparkSession._jsparkSession, frame._jdf, producer_settings(kafka)))


def close_producers(spark: SparkSession) -> None:
    """Close the producers of :func:`write_kafka` that the driver's JVM keeps (local mode: every task's)."""
    _kernel_class(spark, "KafkaTaskWriter").close()


def write_kafka_transactions(
    rows: DataFrame, kafka: KafkaTarget, spec: PipelineSpec, query_id: str, batch_id: int, *, check_markers: bool
) -> str:
    """Write Kafka-shaped rows (``key, value, topic, headers``) exactly once (``output.delivery:
    exactly_once``): a transaction per write task with its batch marker on ``spec.marker_topic``; a task whose
    marker says the batch is committed sends nothing again (``java/kernel``'s ``TransactionalWriter``).

    :param query_id: the checkpoint's query id (a marker of another checkpoint's batch N is not this one's)
    :param check_markers: every task looks for its marker first (a driver's first batch may be a rerun)
    :return: ``tasks=T sent=S skipped=K``
    """
    writer = _kernel_class(rows.sparkSession, "TransactionalWriter")
    frame = rows.select("key", "value", "topic", "headers")
    return str(writer.write(rows.sparkSession._jsparkSession, frame._jdf, producer_settings(kafka), spec.name,
                            spec.marker_topic, query_id, batch_id, check_markers))  # fmt: skip


def close_transactional_producers(spark: SparkSession, spec: PipelineSpec) -> None:
    """Close the producers of :func:`write_kafka_transactions` that the driver's JVM keeps (local mode)."""
    _kernel_class(spark, "TransactionalWriter").close(spec.name)


def _kernel_class(spark: SparkSession, name: str) -> Any:
    from streamjoin.spark.kernel import java_class

    return java_class(spark, f"dev.streamjoin.kernel.{name}")


def file_rows(results: DataFrame) -> DataFrame:
    """Join results as files: one row per output, with its source coordinates and the UTC day."""
    columns = [c for c in JOINED_COLUMNS if c in AGGREGATE_COLUMNS or c in results.columns]
    return results.select(*columns).withColumn("date", F.date_format(F.timestamp_millis(F.col("ts")), "yyyy-MM-dd"))


def write_files(rows: DataFrame, path: str, fmt: str, batch_id: int) -> None:
    """Write one micro-batch under ``path/stream/batch_id=N/date=D/``: a replayed batch overwrites its own
    files. (Published day partitions, ``path/daily/date=D/``, are written by reprocessing.)"""
    writer = rows.write.mode("overwrite").partitionBy("date")
    target = f"{path.rstrip('/')}/stream/batch_id={batch_id}"
    if fmt == "json":
        writer.json(target)
    else:
        writer.parquet(target)
