"""Each join shape on Spark behind one interface: the states it carries between micro-batches and its join
over one batch of ordered events. :func:`streamjoin.spark.engine.process_batch` looks the shape up here;
what a shape *is* (roles, kinds, table or stream result) is declared once in ``core/shapes.py``.

Adding a shape: its Spark module, one :class:`SparkShape` here and one entry in :data:`SPARK_SHAPES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamjoin.core.shapes import Shape
from streamjoin.core.spec import Format, PipelineSpec
from streamjoin.spark import foreign_key, stream_stream, stream_table, stream_table_versioned, table_table
from streamjoin.spark.events import LOOKUP_KEY, BatchSummary


@dataclass(frozen=True)
class ShapeStep:
    """One batch through a shape: its results (``key, ts, lval, rval, matched, tomb_out, src_*`` and the
    order columns), its new states, and the frames it cached (released by the caller)."""

    results: DataFrame
    #: a DataFrame per state, a KeyedLayers per layered state (``engine.LAYERED_STATES``)
    state: dict[str, Any]
    cached: tuple[DataFrame, ...] = ()


class SparkShape(Protocol):
    #: every key's results sit in the partition of the stream record that made them, in the Kafka source's
    #: order: a Kafka sink needs no sort to keep each key's order
    in_source_order: bool
    #: results are a broadcast lookup away from the cached batch (cheaper to compute again for each use than
    #: to cache: 1.7 s vs 5.9 s for 3M rows on 2 cores), and a left join emits one per good stream record
    lookup: bool

    def state_schemas(self, spec: PipelineSpec, ltype: str, rtype: str) -> dict[str, str]:
        """DDL schema of each state it carries, given the Spark types of the left and right values."""
        ...

    def join(self, events: DataFrame, state: Mapping[str, Any], spec: PipelineSpec, summary: BatchSummary) -> ShapeStep:
        """Join one batch of ordered events (see ``spark/events.py``) against the carried states."""
        ...


def _versioned(spec: PipelineSpec) -> tuple[bool, bool]:
    return spec.left.versioned is not None, spec.right.versioned is not None


class StreamStream:
    in_source_order = False
    lookup = False

    def state_schemas(self, spec: PipelineSpec, ltype: str, rtype: str) -> dict[str, str]:
        return {"window_store": stream_stream.store_schema(ltype, rtype), "clock": stream_stream.CLOCK_SCHEMA}

    def join(self, events: DataFrame, state: Mapping[str, Any], spec: PipelineSpec, summary: BatchSummary) -> ShapeStep:
        step = stream_stream.join_stream_stream(
            events, state["window_store"], state["clock"], spec.join, long_keys=spec.left.key.format is Format.LONG
        )
        return ShapeStep(step.results, {"window_store": step.store, "clock": step.clock}, step.cached)


class StreamTable:
    """Lookups in the latest value per key; the global table is the same join with an optional key selector."""

    in_source_order = True
    lookup = True

    def state_schemas(self, spec: PipelineSpec, ltype: str, rtype: str) -> dict[str, str]:
        return {"table": stream_table.table_state_schema(rtype)}

    def join(self, events: DataFrame, state: Mapping[str, Any], spec: PipelineSpec, summary: BatchSummary) -> ShapeStep:
        lookup = F.col(LOOKUP_KEY) if spec.join.key_selector is not None else None
        step = stream_table.join_stream_table(
            events, state["table"], spec.join.kind, lookup, has_updates=summary.good["R"] > 0
        )
        return ShapeStep(step.results, {"table": step.table_state}, step.cached)


class StreamVersionedTable:
    """Lookups as of the stream record's time, stream records held for the grace."""

    # held records come out of the buffer (state) beside the batch's own: a key's rows are not in one
    # partition in source order (the page-views demo wrote carol's 8000 ms view before her 3000 ms one)
    in_source_order = False
    lookup = False

    def state_schemas(self, spec: PipelineSpec, ltype: str, rtype: str) -> dict[str, str]:
        return {
            "history": stream_table_versioned.history_schema(rtype),
            "buffer": stream_table_versioned.buffer_schema(ltype),
            "clock": stream_table_versioned.CLOCK_SCHEMA,
        }

    def join(self, events: DataFrame, state: Mapping[str, Any], spec: PipelineSpec, summary: BatchSummary) -> ShapeStep:
        assert spec.right.versioned is not None
        # null-key stream records (left join, KIP-962) are joined with null at once, outside the buffer
        null_keys = (F.col("side") == "L") & F.col("key").isNull()
        step = stream_table_versioned.join_stream_table_versioned(
            events.filter(~null_keys),
            state["history"],
            state["buffer"],
            state["clock"],
            spec.join.kind,
            grace=spec.join.grace,
            retention=spec.right.versioned.history_retention,
            long_keys=spec.left.key.format is Format.LONG,
        )
        results = step.results.unionByName(stream_table.null_key_results(events), allowMissingColumns=False)
        return ShapeStep(results, {"history": step.history, "buffer": step.buffer, "clock": step.clock})


class TableTable:
    in_source_order = False
    lookup = False

    def state_schemas(self, spec: PipelineSpec, ltype: str, rtype: str) -> dict[str, str]:
        return {"left_table": table_table.side_state_schema(ltype), "right_table": table_table.side_state_schema(rtype)}

    def join(self, events: DataFrame, state: Mapping[str, Any], spec: PipelineSpec, summary: BatchSummary) -> ShapeStep:
        step = table_table.join_table_table(
            events, state["left_table"], state["right_table"], spec.join.kind, versioned=_versioned(spec)
        )
        return ShapeStep(step.results, {"left_table": step.left_state, "right_table": step.right_state})


class ForeignKey:
    in_source_order = False
    lookup = False

    def state_schemas(self, spec: PipelineSpec, ltype: str, rtype: str) -> dict[str, str]:
        return {
            "left_table": foreign_key.left_state_schema(ltype),
            "right_table": foreign_key.right_state_schema(rtype),
        }

    def join(self, events: DataFrame, state: Mapping[str, Any], spec: PipelineSpec, summary: BatchSummary) -> ShapeStep:
        step = foreign_key.join_foreign_key(
            events,
            state["left_table"],
            state["right_table"],
            spec.join.kind,
            versioned=_versioned(spec),
            long_keys=spec.left.key.format is Format.LONG,
        )
        return ShapeStep(step.results, {"left_table": step.left_state, "right_table": step.right_state})


SPARK_SHAPES: dict[Shape, SparkShape] = {
    Shape.STREAM_STREAM: StreamStream(),
    Shape.STREAM_TABLE: StreamTable(),
    Shape.STREAM_GLOBALTABLE: StreamTable(),
    Shape.TABLE_TABLE: TableTable(),
    Shape.TABLE_TABLE_FK: ForeignKey(),
}


def spark_shape(spec: PipelineSpec) -> SparkShape:
    """The Spark implementation of the spec's join (a stream-table join with a versioned table is its own)."""
    if spec.join.shape is Shape.STREAM_TABLE and spec.right.versioned is not None:
        return StreamVersionedTable()
    return SPARK_SHAPES[spec.join.shape]
