"""One micro-batch through the join: decode, join and aggregate on the kernel, project; state in and state out.

The streaming job (``jobs/stream_join.py``), batch reprocessing and ``streamjoin replay`` all call
:func:`process_batch`; only where the rows come from and where the outputs go differ.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any, Protocol

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamjoin.core.errors import SpecError
from streamjoin.core.shapes import ROLE_RANK, Shape, traits
from streamjoin.core.spec import Format, Joiner, PipelineSpec, Role
from streamjoin.spark.aggregate import rejected_results, staged_results
from streamjoin.spark.events import (
    BatchSummary,
    decode_batch,
    output_key,
    rejected_records,
    summarize,
    summary_from_text,
)
from streamjoin.spark.kernel import KernelResults, committed, kernel_join
from streamjoin.spark.kernel import aggregate as kernel_aggregate
from streamjoin.spark.projection import is_json_text, joined_value
from streamjoin.spark.sinks import encode_key, encode_value
from streamjoin.spark.state import KernelCheckpoint, KernelCommit
from streamjoin.spark.table_aggregate import kernel_staged_table_results
from streamjoin.spark.templates import templated


class Unpersistable(Protocol):
    def unpersist(self) -> Any: ...


@dataclass(frozen=True)
class BatchOutput:
    #: the batch's counts, computed (a Spark job) when first read
    summary_of: Callable[[], BatchSummary]
    #: join results: key, value, ts, matched, tomb_out, src_*, ORDER, __sub
    results: DataFrame
    #: aggregate changelog rows: key, value, ts, ORDER, __sub (None without an aggregate), every group's in one
    #: partition in emission order
    aggregates: DataFrame | None
    #: Kafka-shaped input rows that could not be processed, with ``reason``
    dead_letters: DataFrame
    #: the store files the batch's tasks commit, for the state's manifest
    commit: KernelCommit
    #: every key's results sit in one partition in the Kafka source's order (a stream-table lookup's come from
    #: the task of the stream record that made them): a Kafka sink needs no sort to keep each key's order
    results_in_order: bool
    #: the join's result rows, counted by the kernel's tasks as they emit them (once the batch ran)
    result_count: Callable[[], int]
    #: what this batch cached (first the decoded batch: Kafka is read once); the caller unpersists them
    #: with :meth:`release` once the outputs are written
    cached: tuple[Unpersistable, ...] = ()

    @cached_property
    def summary(self) -> BatchSummary:
        return self.summary_of()

    def release(self) -> None:
        for frame in self.cached:
            frame.unpersist()


def process_batch(
    raw: DataFrame,
    spec: PipelineSpec,
    checkpoint: KernelCheckpoint,
    *,
    file_order: bool = False,
    aligned: bool = False,
    read_once: bool = False,
) -> BatchOutput:
    """Run one batch of Kafka-shaped rows (``key, value, topic, partition, offset, ts``) through the kernel,
    its stores read at ``checkpoint`` (``KernelCheckpoint(None)``: a fresh state in a temporary folder).

    :param file_order: process rows in ``offset`` order as one task (replay: offsets are line numbers)
        instead of the batch ordering rule.
    :param aligned: ``raw`` is :func:`~streamjoin.spark.source.read_task_ranges`' frame: partition t holds
        task t's records (a global table's in every partition), which the join takes without a shuffle
    """
    spec_json = spec.model_dump_json()  # names the pipeline's batch programs (templated), once a batch
    decoded = decode_batch(raw, spec, spec_json).persist()
    join = spec.join
    read_once = read_once and spec.aggregate is None
    kernel = kernel_join(decoded, spec, checkpoint, file_order=file_order, aligned=aligned, read_once=read_once)
    cached: tuple[Unpersistable, ...] = (decoded, kernel)
    results = templated(
        kernel.frame, f"results {spec_json}",
        lambda rows: with_joined_value(rows, join.joiner, spec.output.value_format),
    )  # fmt: skip
    replicated = aligned and not file_order and any(i.role is Role.GLOBAL_TABLE for i in spec.inputs.values())
    if replicated:  # each record once: a global table's at its home task, as the kernel counts it
        tasks = spec.kafka.partitions
        decoded_once = templated(decoded, f"once {tasks}", partial(_home_copies, tasks=tasks))
    else:
        decoded_once = decoded
    dead_letters = templated(decoded_once, f"dead letters {spec_json}", rejected_records)
    aggregates = None
    if spec.aggregate is not None:
        if traits(join.shape).table_result:
            stage = partial(kernel_staged_table_results, agg=spec.aggregate)
            staged = templated(results, f"table staged {spec_json}", stage)
            rejected = lambda s: _result_letters(rejected_results(s.filter(F.col("__letter").isNotNull())), spec)  # noqa: E731
        else:
            staged = templated(results, f"staged {spec_json}", partial(staged_results, agg=spec.aggregate))
            rejected = lambda s: _result_letters(rejected_results(s), spec)  # noqa: E731
        updates = kernel_aggregate(staged, spec, kernel, checkpoint.version, file_order=file_order)
        aggregates, cached = updates.frame, (*cached, updates)
        dead_letters = dead_letters.unionByName(templated(staged, f"rejected {spec_json}", rejected))
    lookup = join.shape in (Shape.STREAM_TABLE, Shape.STREAM_GLOBALTABLE) and spec.right.versioned is None
    return BatchOutput(
        summary_of=partial(_kernel_summary, kernel, decoded_once),
        results=templated(
            results, f"keyed {spec_json}", lambda rows: rows.withColumn("key", output_key(F.col("key"), spec))
        ),
        aggregates=aggregates,
        dead_letters=dead_letters,
        commit=committed(spec, checkpoint),
        results_in_order=lookup,
        result_count=kernel.result_count,
        cached=cached,
    )


def _home_copies(decoded: DataFrame, tasks: int) -> DataFrame:
    """An aligned batch's rows with a global table's record once: in partition ``partition mod tasks`` (the
    kernel's ``Routing.home``); every task reads the global table."""
    home = F.spark_partition_id() == F.pmod(F.col("__partition"), F.lit(tasks))
    return decoded.filter((F.col("__rank") != F.lit(ROLE_RANK[Role.GLOBAL_TABLE])) | home)


def _kernel_summary(kernel: KernelResults, decoded: DataFrame) -> BatchSummary:
    """What the kernel's tasks counted as they read the batch; a job over the decoded batch if it has not
    run yet."""
    return summary_from_text(kernel.handle.summary()) or summarize(decoded)


def with_joined_value(results: DataFrame, joiner: Joiner, fmt: Format = Format.JSON) -> DataFrame:
    """Add ``value``: the joiner's value, null for tombstones (``tomb_out``). A function joiner is only
    called for the rows that are not tombstones.

    :param fmt: the output's ``value_format``
    :raises SpecError: a ``select`` of one expression whose type the format cannot hold
    """
    if joiner.function is None:
        value = joined_value(joiner, fmt)
        out = results.withColumn("value", F.when(~F.col("tomb_out"), value))
        _check_scalar_type(out.schema["value"].dataType, joiner, fmt)
        return out
    values = results.filter(~F.col("tomb_out")).withColumn("value", joined_value(joiner, fmt))
    field = values.schema["value"]
    tombstones = results.filter(F.col("tomb_out")).withColumn(
        "value", F.lit(None).cast(field.dataType).alias("value", metadata=field.metadata)
    )
    return values.unionByName(tombstones)


def _check_scalar_type(data_type: T.DataType, joiner: Joiner, fmt: Format) -> None:
    if fmt is Format.LONG and not isinstance(data_type, T.IntegralType):
        raise SpecError(
            "<spec>", "join.joiner.select", joiner.select,
            f"an integer expression for value_format 'long' (this one is {data_type.simpleString()})",
        )  # fmt: skip


def _result_letters(rejected: DataFrame, spec: PipelineSpec) -> DataFrame:
    """Dead letters for join results the aggregation rejects (``reason`` null-group/null-amount): the
    result's key and JSON value, from the join's output topic."""
    value_type = rejected.schema["value"].dataType
    return rejected.select(
        encode_key(F.col("key"), spec.left.key.format).alias("key"),
        encode_value(F.col("value"), value_type, Format.JSON, json_text=is_json_text(rejected)).alias("value"),
        F.lit(spec.output.topic or "<join>").alias("topic"),
        F.col("__partition").alias("partition"),
        F.col("__offset").alias("offset"),
        F.col("ts"),
        F.col("reason"),
    )
