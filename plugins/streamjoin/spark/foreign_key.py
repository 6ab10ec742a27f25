"""Foreign-key table-table joins (inner, left), vectorised over one micro-batch.

Left table ``order -> {product, qty}``, right table ``product -> name``, ``fk = value.product``:

=======  =====================  ===============  =============================================
Time     Left table             Right table      Output (keyed by the left key)
=======  =====================  ===============  =============================================
t1       o1: {p1, 2}                             inner: - ; left: o1: ({p1, 2}, null)
t2                              p1: pen          o1: ({p1, 2}, pen), ts 2
t3       o2: {p1, 5}                             o2: ({p1, 5}, pen)
t4                              p1: ink          o1: (.., ink), then o2: (.., ink) (key order)
t5       o1: {p9, 2}                             inner: o1: tombstone (p9 absent; moved)
t6                              p1: null         inner: o2: tombstone; left: o2: ({p1, 5}, null)
t7       o2: null                                o2: tombstone (a result exists)
=======  =====================  ===============  =============================================

Output ts is always the triggering record's. A left update looks up its foreign key's current right
value; a right update fans out to every left key currently pointing at it, in key order. "A result
exists" means the key's last output was not a tombstone.

Vectorised: right values as of each left update come from one window per foreign key; the left keys
pointing at a foreign key when a right update arrives come from an equi-join on the foreign key with the
intervals during which each left value held; whether a result exists before each event comes from one
window per left key (each event decides alone whether a result exists after it).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamjoin.core.spec import Kind, Projection
from streamjoin.spark.events import ORDER
from streamjoin.spark.projection import selector
from streamjoin.spark.table_table import result_rows

SOURCE = list(dict.fromkeys(["ts", "topic", "__partition", "__offset", "__task", *ORDER]))


def left_state_schema(value_type: str) -> str:
    """DDL of the left table: value, foreign key and whether the key's last output was a result."""
    return f"key string, lval {value_type}, fk string, has_result boolean"


def right_state_schema(value_type: str) -> str:
    return f"key string, rval {value_type}"


@dataclass(frozen=True)
class ForeignKeyStep:
    results: DataFrame
    left_state: DataFrame
    right_state: DataFrame


def _at() -> Column:
    """A row's position in ``ORDER`` as one comparable struct (null: before the batch)."""
    return F.struct(*ORDER)


def _right_as_of(lefts: DataFrame, rights: DataFrame, right_state: DataFrame) -> DataFrame:
    """Each left update with the right value of its foreign key just before it (``__rv``: struct
    ``value, present``; null when never seen)."""
    probes = lefts.filter(~F.col("tomb") & F.col("fk").isNotNull()).select("key", "fk", "__at")
    mark = F.struct(F.col("rval").alias("value"), (~F.col("tomb")).alias("present"))
    marks = rights.select(F.col("key").alias("fk"), "__at", mark.alias("__mark"))
    by_fk = Window.partitionBy("fk").orderBy("__at").rowsBetween(Window.unboundedPreceding, 0)
    carried = right_state.select(
        F.col("key").alias("fk"), F.struct(F.col("rval").alias("value"), F.lit(True).alias("present")).alias("__c")
    )
    seen = (
        probes.unionByName(marks, allowMissingColumns=True)
        .withColumn("__rv", F.last("__mark", True).over(by_fk))
        .filter(F.col("key").isNotNull())
        .join(carried, "fk", "left")
        .select("key", "__at", F.coalesce("__rv", "__c").alias("__rv"))
    )
    return lefts.join(seen, ["key", "__at"], "left")


def _fan_out(lefts: DataFrame, rights: DataFrame, left_state: DataFrame) -> tuple[DataFrame, DataFrame]:
    """One event per (right update, left key pointing at its foreign key at that moment), plus
    ``__holds``: each left key's latest value, foreign key and whether it is deleted."""
    before_batch = F.lit(None).cast(lefts.schema["__at"].dataType)
    carried = left_state.select("key", "lval", "fk", F.lit(False).alias("tomb"), before_batch.alias("__at"))
    history = carried.unionByName(lefts.select("key", "lval", "fk", "tomb", "__at"))
    per_key = Window.partitionBy("key").orderBy(F.col("__at").asc_nulls_first())
    history = history.withColumn("__next", F.lead("__at").over(per_key))
    h, r = history.alias("h"), rights.alias("r")
    pointing = (
        (F.col("h.fk") == F.col("r.key"))
        & ~F.col("h.tomb")
        & (F.col("h.__at").isNull() | (F.col("h.__at") < F.col("r.__at")))
        & (F.col("h.__next").isNull() | (F.col("r.__at") < F.col("h.__next")))
    )
    fan = h.join(r, pointing).select(
        F.col("h.key").alias("key"),
        F.col("h.lval").alias("lval"),
        F.col("r.rval").alias("rval"),
        (~F.col("r.tomb")).alias("__rv_present"),
        F.lit("R").alias("__by"),
        *[F.col(f"r.{c}").alias(c) for c in [*SOURCE, "__at"]],
    )
    in_key_order = Window.partitionBy("__at").orderBy("key")
    return fan.withColumn("__sub", F.row_number().over(in_key_order) - 1), history


def join_foreign_key(
    events: DataFrame, left_state: DataFrame, right_state: DataFrame, kind: Kind, foreign_key: Projection
) -> ForeignKeyStep:
    """Join the batch's left (L) table updates to the right (R) table by ``foreign_key(key, value)``.

    :param left_state: :func:`left_state_schema` rows carried from earlier batches.
    """
    fk = selector(foreign_key, T.StringType())
    lefts = (
        events.filter(F.col("side") == "L")
        .withColumn("value", F.col("lval"))
        .withColumn("fk", F.when(~F.col("tomb"), fk))
        .drop("value")
        .withColumn("__at", _at())
    )
    rights = events.filter(F.col("side") == "R").withColumn("__at", _at())
    looked_up = _right_as_of(lefts, rights, right_state)
    rv_present = F.coalesce(F.col("__rv.present"), F.lit(False))
    left_events = looked_up.select(
        "key",
        F.when(~F.col("tomb"), F.col("lval")).alias("lval"),
        F.when(rv_present, F.col("__rv.value")).alias("rval"),
        (~F.col("tomb") & rv_present).alias("__rv_present"),
        F.when(F.col("tomb"), F.lit("D")).otherwise(F.lit("L")).alias("__by"),
        *SOURCE,
        "__at",
        F.lit(0).alias("__sub"),
    )
    fan, history = _fan_out(lefts, rights, left_state)
    exists_after = {
        Kind.INNER: F.col("__rv_present"),
        Kind.LEFT: F.col("__by") != "D",
    }[kind]
    per_key = Window.partitionBy("key").orderBy("__at")
    has_result = left_state.select("key", F.col("has_result").alias("__carried"))
    timeline = (
        left_events.unionByName(fan.select(*left_events.columns))
        .withColumn("__after", exists_after)
        .join(has_result, "key", "left")
        .withColumn("__before", F.coalesce(F.lag("__after").over(per_key), F.col("__carried"), F.lit(False)))
    )
    emitted = timeline.filter(F.col("__after") | F.col("__before"))
    results = result_rows(
        emitted,
        F.col("lval"),
        F.when(F.col("__rv_present"), F.col("rval")),
        F.col("ts"),
        ~F.col("__after"),
        F.col("__sub"),
    )
    # every left update is an event: the keys with events are all the keys the batch changed
    last_event = timeline.groupBy("key").agg(F.max_by("__after", "__at").alias("has_result"))
    updated = (
        history.filter(F.col("__next").isNull() & ~F.col("tomb"))
        .join(last_event, "key")
        .select("key", "lval", "fk", "has_result")
    )
    new_left = left_state.join(last_event.select("key"), "key", "left_anti").unionByName(updated)
    last_right = rights.groupBy("key").agg(F.max_by(F.struct("rval", "tomb"), "__at").alias("u"))
    new_right = right_state.join(last_right.select("key"), "key", "left_anti").unionByName(
        last_right.filter(~F.col("u.tomb")).select("key", "u.rval")
    )
    return ForeignKeyStep(results=results, left_state=new_left, right_state=new_right)
