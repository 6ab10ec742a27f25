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
value; a right update fans out to every left key currently pointing at it, in key order (a delete of a
foreign key the right table does not hold is a no-op). "A result exists" means the key's last output was
not a tombstone. A versioned side ignores updates older than that key's latest (tombstones count).

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
    """DDL of the left table: value, foreign key, whether the key's last output was a result, and the
    update's ts; ``deleted`` rows only for a versioned input (their ts still rejects older updates)."""
    return f"key string, lval {value_type}, fk string, has_result boolean, ts long, deleted boolean"


def right_state_schema(value_type: str) -> str:
    """DDL of the right table (``deleted`` rows only for a versioned input)."""
    return f"key string, rval {value_type}, ts long, deleted boolean"


def keep_applied(updates: DataFrame, state: DataFrame) -> DataFrame:
    """The updates of a versioned table that are applied: not older than the key's latest (carried or
    earlier in the batch). A skipped update is older than the running max, so it never raises it."""
    before = Window.partitionBy("key").orderBy("__at").rowsBetween(Window.unboundedPreceding, -1)
    carried = state.select("key", F.col("ts").alias("__latest"))
    latest = F.greatest(F.max("ts").over(before), F.col("__latest"))
    applied = updates.join(carried, "key", "left").withColumn("__ok", latest.isNull() | (F.col("ts") >= latest))
    return applied.filter("__ok").drop("__ok", "__latest")


def effective_rights(rights: DataFrame, right_state: DataFrame) -> DataFrame:
    """Drop deletes of a foreign key the right table does not hold at that moment (no-ops)."""
    before = Window.partitionBy("key").orderBy("__at").rowsBetween(Window.unboundedPreceding, -1)
    carried = right_state.select("key", (~F.col("deleted")).alias("__carried"))
    held = F.coalesce(F.last(~F.col("tomb")).over(before), F.col("__carried"))
    with_held = rights.join(carried, "key", "left").withColumn("__held", F.coalesce(held, F.lit(False)))
    return with_held.filter(~F.col("tomb") | F.col("__held")).drop("__carried", "__held")


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
        F.col("key").alias("fk"),
        F.struct(F.col("rval").alias("value"), (~F.col("deleted")).alias("present")).alias("__c"),
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
    carried = left_state.select(
        "key", "lval", "fk", "ts", F.col("deleted").alias("tomb"), "has_result", before_batch.alias("__at")
    )
    history = carried.unionByName(lefts.select("key", "lval", "fk", "ts", "tomb", "__at"), allowMissingColumns=True)
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
    events: DataFrame,
    left_state: DataFrame,
    right_state: DataFrame,
    kind: Kind,
    foreign_key: Projection,
    *,
    versioned: tuple[bool, bool] = (False, False),
) -> ForeignKeyStep:
    """Join the batch's left (L) table updates to the right (R) table by ``foreign_key(key, value)``.

    :param left_state: :func:`left_state_schema` rows carried from earlier batches.
    :param versioned: whether the left and right inputs are versioned (older updates are ignored).
    """
    fk = selector(foreign_key, T.StringType())
    # a function foreign key is only called for values: a Python UDF runs for every row it is given
    updates = events.filter(F.col("side") == "L")
    live = updates.filter(~F.col("tomb")).withColumn("value", F.col("lval")).withColumn("fk", fk).drop("value")
    deletes = updates.filter(F.col("tomb")).withColumn("fk", F.lit(None).cast("string"))
    lefts = live.unionByName(deletes).withColumn("__at", _at())
    rights = events.filter(F.col("side") == "R").withColumn("__at", _at())
    if versioned[0]:
        lefts = keep_applied(lefts, left_state)
    if versioned[1]:
        rights = keep_applied(rights, right_state)
    rights = effective_rights(rights, right_state)
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
    last_event = timeline.groupBy("key").agg(F.max_by("__after", "__at").alias("__has"))
    updated = (
        history.filter(F.col("__next").isNull() & (~F.col("tomb") | F.lit(versioned[0])))
        .join(last_event, "key")
        .select(
            "key",
            "lval",
            "fk",
            (F.col("__has") & ~F.col("tomb")).alias("has_result"),
            "ts",
            F.col("tomb").alias("deleted"),
        )
    )
    new_left = left_state.join(last_event.select("key"), "key", "left_anti").unionByName(updated)
    last_right = rights.groupBy("key").agg(F.max_by(F.struct("rval", "ts", "tomb"), "__at").alias("u"))
    fresh_right = last_right.select("key", "u.rval", "u.ts", F.col("u.tomb").alias("deleted"))
    if not versioned[1]:
        fresh_right = fresh_right.filter(~F.col("deleted"))
    new_right = right_state.join(last_right.select("key"), "key", "left_anti").unionByName(fresh_right)
    return ForeignKeyStep(results=results, left_state=new_left, right_state=new_right)
