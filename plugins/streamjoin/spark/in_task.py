"""The streaming job's batch as one stage (``java/kernel``'s ``TaskPipeline``): task t reads its Kafka ranges,
decodes them, runs the rules, projects each result into its Kafka record and sends it with its own producer;
its dead records go out as dead letters from the same task. No DataFrame between the steps: the decoder, the
joiner with the sink's encoding, and the dead letters' encoding are this module's DataFrame programs, built
once per pipeline over placeholders and taken by the JVM as generated projections.

:func:`in_task` decides which specs run so; the others run :func:`~streamjoin.spark.engine.process_batch`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cache
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamjoin.core.spec import PipelineSpec, Shape
from streamjoin.kafka.client_config import KafkaTarget
from streamjoin.kafka.schema_registry import batch_schemas
from streamjoin.spark.engine import with_joined_value
from streamjoin.spark.events import BatchSummary, decode_batch, output_key, rejected_records, summary_from_text
from streamjoin.spark.kernel import committed, java_class, java_map, jvm_plan
from streamjoin.spark.sinks import dead_letter_rows, kafka_rows, producer_settings
from streamjoin.spark.state import KernelCheckpoint, KernelCommit

log = logging.getLogger("streamjoin.job")


def in_task(spec: PipelineSpec) -> bool:
    """Whether the streaming job runs ``spec``'s batches in the kernel's tasks (:class:`TaskBatch`): one join (not
    a chain) whose results go to one Kafka topic in the order the rules emit them, without a Spark stage after it.

    That is a stream-table or stream-globaltable lookup (a plain table: its results come from the stream
    record's task in the Kafka source's order, ``BatchOutput.results_in_order``) or a table-table join (a key's
    updates are all in its partition's task, which emits them in the batch ordering rule, the order the sink's
    sort restores), with a ``select`` or the default joiner, no aggregate and no files. The rest needs a sort by
    key (stream-stream, a versioned lookup), a Python function (a UDF stage), a shuffle (the foreign-key join,
    an aggregate) or a second write (files): they run as Spark SQL around the kernel. A spec whose programs are
    not plain projections after all (a Python key selector) falls back too (:func:`task_pipeline`).
    """
    join = spec.join
    lookup = join.shape in (Shape.STREAM_TABLE, Shape.STREAM_GLOBALTABLE) and spec.right.versioned is None
    return (
        not spec.chained
        and (lookup or join.shape is Shape.TABLE_TABLE)
        and join.foreign_key is None
        and join.joiner.function is None
        and spec.aggregate is None
        and not spec.output.files
        and bool(spec.output.topic)
    )


def task_pipeline(spark: SparkSession, spec: PipelineSpec, spec_json: str) -> Any | None:
    """The JVM's ``TaskPipeline`` of ``spec`` (None: a program is not a plain projection; the batch runs as
    before), built once per pipeline, JVM and set of Avro input schemas (``events.decode_batch``'s rule)."""
    avro = batch_schemas(spec)
    key = " ".join([spec_json, *(a.key for a in avro.values())])
    pipelines = _pipelines(spark.sparkContext._gateway)
    if key not in pipelines:
        pipelines[key] = pipeline = _build(spark, spec, spec_json)
        if pipeline is None:
            log.warning("%s: a program is not a plain projection: batches run as Spark SQL stages", spec.name)
        else:
            log.info("%s: batches run in the kernel's tasks (%s)", spec.name, pipeline.toString())
    return pipelines[key]


def _build(spark: SparkSession, spec: PipelineSpec, spec_json: str) -> Any | None:
    jclass = java_class(spark, "dev.streamjoin.kernel.TaskPipeline")
    session = spark._jsparkSession
    raw = DataFrame(jclass.rawPlaceholder(session), spark)
    decoded = decode_batch(raw, spec, spec_json)
    result_rows = DataFrame(jclass.resultPlaceholder(session, decoded._jdf), spark)
    joined = with_joined_value(result_rows, spec.join.joiner, spec.output.value_format)
    keyed = joined.withColumn("key", output_key(F.col("key"), spec))
    assert spec.output.topic is not None  # in_task
    results = _for_producer(kafka_rows(keyed, spec.output, spec.output.topic, sort=False))
    decoded_rows = DataFrame(jclass.placeholder(session, decoded._jdf.schema()), spark)
    letters = _for_producer(dead_letter_rows(rejected_records(decoded_rows), spec.dead_letter_topic))
    return jclass.of(raw._jdf, decoded._jdf, result_rows._jdf, results._jdf, decoded_rows._jdf, letters._jdf)


def _for_producer(rows: DataFrame) -> DataFrame:
    """The writers' columns (``sinks.write_kafka``'s casts)."""
    return rows.select(F.col("key").cast("binary"), F.col("value").cast("binary"), "topic", "headers")


@cache
def _pipelines(gateway: Any) -> dict[str, Any]:
    """The JVM's task pipelines by spec (a gateway per JVM)."""
    return {}


@dataclass(frozen=True)
class TaskBatch:
    """What one batch run in the kernel's tasks did."""

    summary: BatchSummary
    #: the store files the batch's tasks committed
    commit: KernelCommit
    #: join results sent
    result_count: int
    #: ``tasks=T sent=S[ skipped=K]`` of its writer, and ``jobs=J stages=S tasks=T`` of its Spark job
    written: str
    #: ``{"jobs": J, "stages": S, "tasks": T}``: the Spark jobs the batch ran
    job: dict[str, int]

    def release(self) -> None:
        """Nothing to free: the batch cached nothing (``BatchOutput.release``'s counterpart)."""


def run_in_tasks(
    pipeline: Any,
    raw: DataFrame,
    spec: PipelineSpec,
    checkpoint: KernelCheckpoint,
    batch_id: int,
    kafka: KafkaTarget,
    *,
    query_id: str,
    check_markers: bool,
) -> TaskBatch:
    """Run and write batch ``batch_id`` of ``raw`` (``source.read_task_ranges``' frame) in the kernel's tasks,
    its stores read at ``checkpoint`` and committed at the next version; exactly once with ``spec.exactly_once``
    (a transaction per task, its marker saying T = ``kafka.partitions`` tasks), else at least once."""
    spark = raw.sparkSession
    assert checkpoint.root is not None
    marker = spec.marker_topic if spec.exactly_once else None
    batch = pipeline.run(
        spark._jsparkSession, raw._jdf, jvm_plan(spark, spec), checkpoint.root, checkpoint.version, batch_id,
        java_map(spark.sparkContext._gateway, tuple(sorted(producer_settings(kafka).items()))), spec.name, marker,
        query_id, check_markers,
    )  # fmt: skip
    empty = BatchSummary(max_ts={}, rows=0, rejected=0, good={"L": 0, "R": 0})
    summary = summary_from_text(str(batch.summary())) or empty
    job = dict((part.split("=")[0], int(part.split("=")[1])) for part in str(batch.job()).split())
    tasks = spec.kafka.partitions
    written = f"tasks={tasks} sent={batch.sent()}" + (f" skipped={batch.skipped()}" if marker else "")
    return TaskBatch(summary, committed(spec, checkpoint), int(batch.resultCount()), f"{written} {batch.job()}", job)
