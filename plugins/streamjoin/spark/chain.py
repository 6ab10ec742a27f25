"""Chained joins (``joins:``, docs/SEMANTICS.md section 11) on the kernel.

Each stage is one kernel call with its own stores, all in the batch's one Spark job. Stage 1 reads its two inputs
as a one-join pipeline does (its stores where a one-join pipeline keeps them); stage N > 1 keeps its stores in
``stage<N>/`` beside them and reads the records of its right input in the batch plus stage N-1's results as its
left records (:func:`derived_rows`): the joined value as it is (no serde between stages, as in Kafka Streams'
topology), the result's key, timestamp and task, tombstones included. A derived record takes the place in the
processing order of the record that made it, after the results emitted before it, and before that record itself
when the stage reads it too: a record goes through the stages depth first, as in Kafka Streams.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamjoin.core.join_plan import stage_specs
from streamjoin.core.shapes import ROLE_RANK
from streamjoin.core.spec import Format, PipelineSpec, Role, Shape
from streamjoin.spark.events import DEAD_KEY, DEAD_VALUE, LOOKUP_KEY, null_key_sides
from streamjoin.spark.projection import is_json_text, key_selector
from streamjoin.spark.sinks import encode_key, encode_value

__all__ = ["derived_rows", "index_in_task", "root_of", "stage_input", "stage_specs", "stage_topics",
           "with_emission_order"]  # fmt: skip

#: a derived record's place (the kernel's ``Layout.CHAIN``): its trigger's ``__pos``, its emission order, its task
CHAIN_POS, CHAIN_SEQ, CHAIN_TASK = "__chain_pos", "__chain_seq", "__chain_task"
#: the kernel results' emission order within their task (``monotonically_increasing_id`` on the kernel's rows)
EMITTED = "__emitted"


def stage_topics(spec: PipelineSpec, index: int) -> list[str]:
    """The input topics stage ``index`` of ``spec`` reads from the batch (stage 1 both, a later stage its right)."""
    join = spec.stages[index]
    names = [join.left, join.right] if index == 0 else [join.right]
    return list(dict.fromkeys(spec.inputs[name].topic for name in names))


def root_of(root: str, index: int) -> str:
    """Where stage ``index`` keeps its stores under the kernel's root ``root``."""
    return root if index == 0 else f"{root}/stage{index + 1}"


def with_emission_order(results: DataFrame, *, last: bool) -> DataFrame:
    """The kernel's result rows numbered in the order their tasks emitted them (:data:`EMITTED`), before a
    joiner's stage can reorder them. The last stage's ``__sub`` becomes that number within the task: one trigger's
    results at a later stage come from several derived records, each numbering its own from 0, so the sinks'
    and the aggregate's order (the trigger's place, then ``__sub``) needs the task's."""
    numbered = results.withColumn(EMITTED, F.monotonically_increasing_id())
    return numbered.withColumn("__sub", index_in_task()) if last else numbered


def index_in_task() -> Column:
    """A numbered result's index among its task's (:data:`EMITTED` holds the partition in its upper 31 bits, the
    row's index in the lower 33)."""
    return F.col(EMITTED).bitwiseAND(F.lit(0x7FFFFFFF)).cast("int")


def stage_input(joined: DataFrame, right: DataFrame, stage: PipelineSpec) -> DataFrame:
    """Stage ``stage``'s decoded batch: ``joined`` (the previous stage's results with their ``value`` and
    :data:`EMITTED`) as its left records (:func:`derived_rows`), and ``right`` (its right input's records,
    decoded) as they are."""
    derived = derived_rows(joined, stage, right.schema["rval"].dataType)
    lval = derived.schema["lval"].dataType
    records = right.withColumn("lval", F.lit(None).cast(lval)).select(
        *[F.col(c) for c in right.columns],
        *[F.lit(None).cast(t).alias(c) for c, t in ((CHAIN_POS, "long"), (CHAIN_SEQ, "long"), (CHAIN_TASK, "int"))],
    )
    # the input's records first: the kernel's order, not the rows' arrival, puts what a record made before it
    return records.unionByName(derived.select(*records.columns))


def derived_rows(joined: DataFrame, stage: PipelineSpec, right_type: object) -> DataFrame:
    """The previous stage's results as ``stage``'s left records, in a decoded batch's columns plus their place
    (:data:`CHAIN_POS`, :data:`CHAIN_SEQ`, :data:`CHAIN_TASK`). One the stage cannot take is a dead letter as the
    reference engine writes it: ``null-key`` (a null join key on a side the stage does not keep, KIP-962),
    ``null-value`` (a stream record without a value), from topic ``<stage name>``."""
    join, left = stage.join, stage.left
    value = F.col("value")
    rows = joined.withColumn("lval", value)
    null_join_key: Column = F.col("key").isNull()
    lookup: list[Column] = []
    if join.shape is Shape.STREAM_GLOBALTABLE and join.key_selector is not None:
        selected = F.when(value.isNotNull(), key_selector(join.key_selector, json_value=is_json_text(joined)))
        rows = rows.withColumn(LOOKUP_KEY, selected)
        null_join_key = F.when(value.isNotNull(), F.col(LOOKUP_KEY).isNull()).otherwise(F.col("key").isNull())
        lookup = [F.col(LOOKUP_KEY)]
    keeps = "L" in null_key_sides(stage)
    reason = F.when(F.lit(not keeps) & null_join_key, F.lit("null-key")).when(
        F.lit(left.role is Role.STREAM) & value.isNull(), F.lit("null-value")
    )
    rows = rows.withColumn("reason", reason)
    dead = F.col("reason").isNotNull()
    value_bytes = encode_value(value, joined.schema["value"].dataType, Format.JSON, json_text=is_json_text(joined))
    if join.foreign_key is not None:  # a live left value's foreign key
        fk = key_selector(join.foreign_key, value="value", json_value=is_json_text(joined))
        rows = rows.withColumn(LOOKUP_KEY, F.when(value.isNotNull() & ~dead, fk))
        lookup = [F.col(LOOKUP_KEY)]
    return rows.select(
        F.lit("L").alias("side"),
        F.col("key"),
        F.col("lval"),
        F.lit(None).cast(right_type).alias("rval"),  # type: ignore[arg-type]
        value.isNull().alias("tomb"),
        F.col("ts"),
        F.col("__task"),
        F.lit(ROLE_RANK[left.role]).alias("__rank"),
        F.col("__input"),
        F.col("__partition"),
        F.col("__offset"),
        F.lit(left.topic).alias("topic"),
        F.col("reason"),
        F.when(dead, encode_key(F.col("key"), left.key.format)).alias(DEAD_KEY),
        F.when(dead, value_bytes).alias(DEAD_VALUE),
        *lookup,
        F.col("__pos").alias(CHAIN_POS),
        F.col(EMITTED).alias(CHAIN_SEQ),
        F.col("__task").alias(CHAIN_TASK),
    )
