"""One micro-batch through the join: decode, order, join, project, aggregate; state in and state out.

The streaming job (``jobs/stream_join.py``), batch reprocessing and ``streamjoin replay`` all call
:func:`process_batch`; only where the rows come from and where the outputs go differ.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any, Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamjoin.core.errors import SpecError
from streamjoin.core.shapes import traits
from streamjoin.core.spec import Format, Joiner, PipelineSpec
from streamjoin.core.storage import Storage
from streamjoin.spark.aggregate import AGG_STATE_SCHEMA, aggregate_stream, rejected_results, staged_results
from streamjoin.spark.events import (
    ORDER_STATE_SCHEMA,
    BatchSummary,
    decode_batch,
    good_events,
    output_key,
    partition_max_ts,
    rejected_records,
    summarize,
    summary_from_text,
    with_batch_order,
    with_file_order,
)
from streamjoin.spark.kernel import KERNEL_STATE, KernelResults, committed, kernel_join, runs_on_kernel
from streamjoin.spark.kernel import aggregate as kernel_aggregate
from streamjoin.spark.kernel import table_aggregate as kernel_table_aggregate
from streamjoin.spark.projection import is_json_text, joined_value
from streamjoin.spark.serde import spark_type
from streamjoin.spark.shapes import spark_shape
from streamjoin.spark.sinks import encode_key, encode_value
from streamjoin.spark.state import StateStore, empty_states
from streamjoin.spark.table_aggregate import PREVIOUS_SCHEMA, aggregate_table, kernel_staged_table_results
from streamjoin.spark.templates import templated

#: states of a few rows per partition, kept as JSON by the state store
SMALL_STATES = frozenset({"order", "clock"})
#: states kept as layers (:class:`~streamjoin.spark.layers.KeyedLayers`): a batch writes what it changed
LAYERED_STATES = frozenset({"table"})


class Unpersistable(Protocol):
    def unpersist(self) -> Any: ...


def state_store(root: str, storage: Storage) -> StateStore:
    """The store of a pipeline's states under ``root``, each state kept the way its kind is kept best."""
    return StateStore(root, storage, small=SMALL_STATES, layered=LAYERED_STATES, kernel={KERNEL_STATE})


def state_schemas(spec: PipelineSpec) -> dict[str, str]:
    """DDL schema of every state the pipeline carries between batches (the kernel's: its name only)."""
    ltype = spark_type(spec.left.value).simpleString()
    rtype = spark_type(spec.right.value).simpleString()
    if runs_on_kernel(spec):
        return {KERNEL_STATE: "kernel"}  # the join's and the aggregate's stores, in Spark's state store
    schemas = {"order": ORDER_STATE_SCHEMA} | spark_shape(spec).state_schemas(spec, ltype, rtype)
    if spec.aggregate is not None:
        schemas["agg"] = AGG_STATE_SCHEMA
        if traits(spec.join.shape).table_result:
            schemas["agg_previous"] = PREVIOUS_SCHEMA
    return schemas


def empty_state(spark: SparkSession, spec: PipelineSpec) -> dict[str, Any]:
    """The states of a pipeline before its first batch."""
    return empty_states(spark, state_schemas(spec), LAYERED_STATES, {KERNEL_STATE})


@dataclass(frozen=True)
class BatchOutput:
    #: the batch's counts, computed (a Spark job) when first read
    summary_of: Callable[[], BatchSummary]
    #: the batch's event rows with order columns
    events: DataFrame
    #: join results: key, value, ts, matched, tomb_out, src_*, ORDER, __sub
    results: DataFrame
    #: aggregate changelog rows: key, value, ts, ORDER, __sub (None without an aggregate), cached
    aggregates: DataFrame | None
    #: Kafka-shaped input rows that could not be processed, with ``reason``
    dead_letters: DataFrame
    #: the states to save (a kernel state: what its tasks committed, ``KernelCommit``)
    state: dict[str, Any]
    #: frames cached for this batch (first the decoded batch: Kafka is read once); the caller unpersists
    #: them with :meth:`release` once the outputs are written
    cached: tuple[Unpersistable, ...] = ()
    #: every key's aggregate rows already sit in one partition in emission order (no sort before a sink)
    aggregates_in_order: bool = False

    @cached_property
    def summary(self) -> BatchSummary:
        return self.summary_of()

    def release(self) -> None:
        for frame in self.cached:
            frame.unpersist()


def process_batch(
    raw: DataFrame, spec: PipelineSpec, state: dict[str, Any], *, file_order: bool = False
) -> BatchOutput:
    """Run one batch of Kafka-shaped rows (``key, value, topic, partition, offset, ts``).

    :param file_order: process rows in ``offset`` order as one task (replay: offsets are line numbers)
        instead of the batch ordering rule.
    """
    spec_json = spec.model_dump_json()  # names the pipeline's batch programs (templated), once a batch
    decoded = decode_batch(raw, spec, spec_json).persist()
    join = spec.join
    cached: tuple[Unpersistable, ...]
    kernel = None
    if runs_on_kernel(spec):
        kernel = kernel_join(decoded, spec, state[KERNEL_STATE], file_order=file_order)
        # the kernel keeps the order's clocks with its table; the batch's counts only when asked for
        new_state: dict[str, Any] = {KERNEL_STATE: committed(spec, state[KERNEL_STATE])}
        events, results, cached = decoded, kernel.frame, (decoded, kernel)
        summary_of: Callable[[], BatchSummary] = partial(_kernel_summary, kernel, decoded)
    else:
        summary = summarize(decoded)
        summary_of = lambda: summary  # noqa: E731
        events = good_events(with_file_order(decoded) if file_order else with_batch_order(decoded, state["order"]))
        new_state = {"order": partition_max_ts(raw.sparkSession, summary, state["order"])}
        step = spark_shape(spec).join(events, state, spec, summary)
        new_state |= step.state
        results = step.results
        cached = (decoded, *step.cached)
    results = templated(
        results, f"results {spec_json}",
        lambda rows: with_joined_value(rows, join.joiner, spec.output.value_format),
    )  # fmt: skip
    dead_letters = templated(decoded, f"dead letters {spec_json}", rejected_records)
    aggregates = None
    aggregates_in_order = False
    if spec.aggregate is not None and kernel is not None:
        version = state[KERNEL_STATE].version
        if traits(join.shape).table_result:
            stage = partial(kernel_staged_table_results, agg=spec.aggregate)
            staged = templated(results, f"table staged {spec_json}", stage)
            updates = kernel_table_aggregate(staged, spec, kernel, version, file_order=file_order)
            rejected = lambda s: _result_letters(rejected_results(s.filter(F.col("__letter").isNotNull())), spec)  # noqa: E731
        else:
            staged = templated(results, f"staged {spec_json}", partial(staged_results, agg=spec.aggregate))
            updates = kernel_aggregate(staged, spec, kernel, version, file_order=file_order)
            rejected = lambda s: _result_letters(rejected_results(s), spec)  # noqa: E731
        aggregates, aggregates_in_order, cached = updates.frame, True, (*cached, updates)
        dead_letters = dead_letters.unionByName(templated(staged, f"rejected {spec_json}", rejected))
    elif spec.aggregate is not None and traits(join.shape).table_result:
        table_agg = aggregate_table(results, state["agg"], state["agg_previous"], spec.aggregate)
        aggregates = table_agg.rows.persist()
        cached += (aggregates,)
        new_state |= {"agg": table_agg.state, "agg_previous": table_agg.previous}
        dead_letters = dead_letters.unionByName(_result_letters(table_agg.null_groups, spec))
    elif spec.aggregate is not None:
        agg = aggregate_stream(results, state["agg"], spec.aggregate)
        aggregates = agg.rows if agg.cached else agg.rows.persist()
        cached += agg.cached or (aggregates,)
        aggregates_in_order = agg.in_order
        new_state["agg"] = agg.state
        dead_letters = dead_letters.unionByName(_result_letters(agg.null_groups, spec))
    return BatchOutput(
        summary_of=summary_of,
        events=events,
        results=templated(
            results, f"keyed {spec_json}", lambda rows: rows.withColumn("key", output_key(F.col("key"), spec))
        ),
        aggregates=aggregates,
        dead_letters=dead_letters,
        state=new_state,
        cached=cached,
        aggregates_in_order=aggregates_in_order,
    )


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
