"""One micro-batch through the join: decode, order, join, project, aggregate; state in and state out.

The streaming job (``jobs/stream_join.py``), batch reprocessing and ``streamjoin replay`` all call
:func:`process_batch`; only where the rows come from and where the outputs go differ.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamjoin.core.spec import Format, Joiner, PipelineSpec, Shape
from streamjoin.spark.aggregate import AGG_STATE_SCHEMA, aggregate_stream
from streamjoin.spark.events import (
    LOOKUP_KEY,
    ORDER_STATE_SCHEMA,
    BatchSummary,
    decode_batch,
    good_events,
    output_key,
    partition_max_ts,
    rejected_records,
    summarize,
    with_batch_order,
    with_file_order,
)
from streamjoin.spark.foreign_key import join_foreign_key, left_state_schema, right_state_schema
from streamjoin.spark.projection import joined_value
from streamjoin.spark.serde import spark_type
from streamjoin.spark.sinks import encode_key, encode_value
from streamjoin.spark.stream_stream import CLOCK_SCHEMA, join_stream_stream, store_schema
from streamjoin.spark.stream_table import join_stream_table, null_key_results
from streamjoin.spark.stream_table_versioned import CLOCK_SCHEMA as VERSIONED_CLOCK_SCHEMA
from streamjoin.spark.stream_table_versioned import buffer_schema, history_schema, join_stream_table_versioned
from streamjoin.spark.table_aggregate import PREVIOUS_SCHEMA, aggregate_table
from streamjoin.spark.table_table import join_table_table, side_state_schema

#: states of a few rows per partition, kept as JSON by the state store
SMALL_STATES = frozenset({"order", "clock"})
#: shapes whose results are a table (updates replace earlier results per key): aggregated with subtraction
TABLE_SHAPES = (Shape.TABLE_TABLE, Shape.TABLE_TABLE_FK)


def state_schemas(spec: PipelineSpec) -> dict[str, str]:
    """DDL schema of every state the pipeline carries between batches."""
    ltype = spark_type(spec.left.value).simpleString()
    rtype = spark_type(spec.right.value).simpleString()
    schemas = {"order": ORDER_STATE_SCHEMA}
    shape = spec.join.shape
    if shape is Shape.STREAM_STREAM:
        schemas |= {"window_store": store_schema(ltype, rtype), "clock": CLOCK_SCHEMA}
    elif shape is Shape.STREAM_TABLE and spec.right.versioned is not None:
        schemas |= {
            "history": history_schema(rtype),
            "buffer": buffer_schema(ltype),
            "clock": VERSIONED_CLOCK_SCHEMA,
        }
    elif shape is Shape.TABLE_TABLE:
        schemas |= {"left_table": side_state_schema(ltype), "right_table": side_state_schema(rtype)}
    elif shape is Shape.TABLE_TABLE_FK:
        schemas |= {"left_table": left_state_schema(ltype), "right_table": right_state_schema(rtype)}
    else:
        schemas["table"] = f"key string, rval {rtype}, rts long"
    if spec.aggregate is not None:
        schemas["agg"] = AGG_STATE_SCHEMA
        if shape in TABLE_SHAPES:
            schemas["agg_previous"] = PREVIOUS_SCHEMA
    return schemas


@dataclass(frozen=True)
class BatchOutput:
    summary: BatchSummary
    #: the batch's event rows with order columns
    events: DataFrame
    #: join results: key, value, ts, matched, tomb_out, src_*, ORDER, __sub
    results: DataFrame
    #: aggregate changelog rows: key, value, ts, ORDER, __sub (None without an aggregate), cached
    aggregates: DataFrame | None
    #: Kafka-shaped input rows that could not be processed, with ``reason``
    dead_letters: DataFrame
    state: dict[str, DataFrame]
    #: records dropped by the join's rules, event rows; None if the shape drops none (none does today)
    dropped: DataFrame | None = None
    #: frames cached for this batch (first the decoded batch: Kafka is read once); the caller unpersists
    #: them with :meth:`release` once the outputs are written
    cached: tuple[DataFrame, ...] = ()
    #: every key's aggregate rows already sit in one partition in emission order (no sort before a sink)
    aggregates_in_order: bool = False

    def release(self) -> None:
        for frame in self.cached:
            frame.unpersist()


def process_batch(
    raw: DataFrame, spec: PipelineSpec, state: dict[str, DataFrame], *, file_order: bool = False
) -> BatchOutput:
    """Run one batch of Kafka-shaped rows (``key, value, topic, partition, offset, ts``).

    :param file_order: process rows in ``offset`` order as one task (replay: offsets are line numbers)
        instead of the batch ordering rule.
    """
    decoded = decode_batch(raw, spec).persist()
    summary = summarize(decoded)
    events = good_events(with_file_order(decoded) if file_order else with_batch_order(decoded, state["order"]))
    join = spec.join
    dropped: DataFrame | None = None
    new_state = {"order": partition_max_ts(raw.sparkSession, summary, state["order"])}
    cached: tuple[DataFrame, ...] = (decoded,)
    if join.shape is Shape.STREAM_TABLE and spec.right.versioned is not None:
        # null-key stream records (left join, KIP-962) are joined with null at once, outside the buffer
        null_keys = (F.col("side") == "L") & F.col("key").isNull()
        vt = join_stream_table_versioned(
            events.filter(~null_keys),
            state["history"],
            state["buffer"],
            state["clock"],
            join.kind,
            grace=join.grace,
            retention=spec.right.versioned.history_retention,
        )
        new_state |= {"history": vt.history, "buffer": vt.buffer, "clock": vt.clock}
        results = vt.results.unionByName(null_key_results(events), allowMissingColumns=False)
    elif join.shape in (Shape.STREAM_TABLE, Shape.STREAM_GLOBALTABLE):
        lookup = F.col(LOOKUP_KEY) if join.key_selector is not None else None
        step = join_stream_table(events, state["table"], join.kind, lookup, has_updates=summary.good["R"] > 0)
        new_state["table"] = step.table_state
        results = step.results
        cached += step.cached
    elif join.shape is Shape.STREAM_STREAM:
        ss = join_stream_stream(events, state["window_store"], state["clock"], join)
        new_state |= {"window_store": ss.store, "clock": ss.clock}
        results = ss.results  # nothing is dropped as late (Kafka Streams: out-of-order records join)
        cached += ss.cached
    elif join.shape is Shape.TABLE_TABLE:
        versioned = (spec.left.versioned is not None, spec.right.versioned is not None)
        tt = join_table_table(events, state["left_table"], state["right_table"], join.kind, versioned=versioned)
        new_state |= {"left_table": tt.left_state, "right_table": tt.right_state}
        results = tt.results
    elif join.shape is Shape.TABLE_TABLE_FK:
        assert join.foreign_key is not None
        versioned = (spec.left.versioned is not None, spec.right.versioned is not None)
        fk = join_foreign_key(
            events, state["left_table"], state["right_table"], join.kind, join.foreign_key, versioned=versioned
        )
        new_state |= {"left_table": fk.left_state, "right_table": fk.right_state}
        results = fk.results
    else:
        raise NotImplementedError(f"shape {join.shape.value!r} is not implemented on Spark yet")
    results = with_joined_value(results, join.joiner)
    dead_letters = rejected_records(decoded)
    aggregates = None
    aggregates_in_order = False
    if spec.aggregate is not None and join.shape in TABLE_SHAPES:
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
        summary=summary,
        events=events,
        results=results.withColumn("key", output_key(F.col("key"), spec)),
        aggregates=aggregates,
        dead_letters=dead_letters,
        state=new_state,
        dropped=dropped,
        cached=cached,
        aggregates_in_order=aggregates_in_order,
    )


def with_joined_value(results: DataFrame, joiner: Joiner) -> DataFrame:
    """Add ``value``: the joiner's value, null for tombstones (``tomb_out``). A function joiner is only
    called for the rows that are not tombstones."""
    if joiner.function is None:
        return results.withColumn("value", F.when(~F.col("tomb_out"), joined_value(joiner)))
    values = results.filter(~F.col("tomb_out")).withColumn("value", joined_value(joiner))
    value_type = values.schema["value"].dataType
    tombstones = results.filter(F.col("tomb_out")).withColumn("value", F.lit(None).cast(value_type))
    return values.unionByName(tombstones)


def _result_letters(rejected: DataFrame, spec: PipelineSpec) -> DataFrame:
    """Dead letters for join results the aggregation rejects (``reason`` null-group/null-amount): the
    result's key and JSON value, from the join's output topic."""
    value_type = rejected.schema["value"].dataType
    return rejected.select(
        encode_key(F.col("key"), spec.left.key.format).alias("key"),
        encode_value(F.col("value"), value_type, Format.JSON).alias("value"),
        F.lit(spec.output.topic or "<join>").alias("topic"),
        F.col("__partition").alias("partition"),
        F.col("__offset").alias("offset"),
        F.col("ts"),
        F.col("reason"),
    )
