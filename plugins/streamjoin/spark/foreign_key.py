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

Kafka Streams 3.7+/4.x without a record cache (see ``streamjoin.core.semantics.foreign_key``): a
left-triggered result is at ``max(left ts, ts of the right row looked up)``, a right-triggered one at the
right record's ts. A left update looks up its new foreign key's current right value; inner: no right value
gives a tombstone only when the old value had another non-null foreign key, a delete or a move to a null
foreign key gives a tombstone when the old value had a non-null one (Kafka cannot know whether it joined).
A right update or delete (even of a foreign key the right table does not hold) fans out to every left key
currently pointing at it, in key order. A versioned side ignores updates older than that key's latest.

Vectorised: right values as of each left update (for its new and its old foreign key) come from one
window per foreign key; the left keys pointing at a foreign key when a right update arrives come from an
equi-join on the foreign key with the intervals during which each left value held; each left update's old
value is the previous one of its key (in the batch, else the carried table).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from streamjoin.core.spec import Kind
from streamjoin.spark.events import LOOKUP_KEY, ORDER, serialized_key
from streamjoin.spark.table_table import result_rows

SOURCE = list(dict.fromkeys(["ts", "topic", "__partition", "__offset", "__task", *ORDER]))


def left_state_schema(value_type: str) -> str:
    """DDL of the left table: value, foreign key and the update's ts; ``deleted`` rows only for a versioned
    input (their ts still rejects older updates)."""
    return f"key string, lval {value_type}, fk string, ts long, deleted boolean"


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


@dataclass(frozen=True)
class ForeignKeyStep:
    results: DataFrame
    left_state: DataFrame
    right_state: DataFrame


def _cut(frame: DataFrame) -> DataFrame:
    """``frame`` with its lineage cut (computed once, when first needed). The FK join reads its inputs and
    intermediates several times each: without cuts the plan doubles with every reuse, and an aggregate
    after the join planned for minutes and filled a 1 GiB driver heap."""
    return frame.localCheckpoint(eager=False)


def _at() -> Column:
    """A row's position in ``ORDER`` as one comparable struct (null: before the batch)."""
    return F.struct(*ORDER)


def _right_as_of(probes: DataFrame, rights: DataFrame, right_state: DataFrame) -> DataFrame:
    """For each probe (``key, fk, __at, __probe``), the right row of ``fk`` just before it (``__rv``: struct
    ``value, present, ts``; null when never seen)."""
    mark = F.struct(F.col("rval").alias("value"), (~F.col("tomb")).alias("present"), F.col("ts").alias("ts"))
    marks = rights.select(F.col("key").alias("fk"), "__at", mark.alias("__mark"))
    by_fk = Window.partitionBy("fk").orderBy("__at").rowsBetween(Window.unboundedPreceding, 0)
    carried = right_state.select(
        F.col("key").alias("fk"),
        F.struct(F.col("rval").alias("value"), (~F.col("deleted")).alias("present"), F.col("ts").alias("ts")).alias(
            "__c"
        ),
    )
    return (
        probes.unionByName(marks, allowMissingColumns=True)
        .withColumn("__rv", F.last("__mark", True).over(by_fk))
        .filter(F.col("key").isNotNull())
        .join(carried, "fk", "left")
        .select("key", "__at", "__probe", F.coalesce("__rv", "__c").alias("__rv"))
    )


def _fan_out(
    lefts: DataFrame, rights: DataFrame, left_state: DataFrame, long_keys: bool
) -> tuple[DataFrame, DataFrame]:
    """One event per (right update, left key pointing at its foreign key at that moment), plus each left
    key's history (carried row first, ``__at`` null) with ``__next``: the position of the key's next row."""
    before_batch = F.lit(None).cast(lefts.schema["__at"].dataType)
    carried = left_state.select("key", "lval", "fk", "ts", F.col("deleted").alias("tomb"), before_batch.alias("__at"))
    history = carried.unionByName(lefts.select("key", "lval", "fk", "ts", "tomb", "__at"), allowMissingColumns=True)
    per_key = Window.partitionBy("key").orderBy(F.col("__at").asc_nulls_first())
    history = _cut(history.withColumn("__next", F.lead("__at").over(per_key)))
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
        F.col("r.tomb").alias("__delete"),
        *[F.col(f"r.{c}").alias(c) for c in [*SOURCE, "__at"]],
    )
    # Kafka scans the subscriptions in serialized-key order: for long keys (8 bytes big-endian, two's
    # complement) non-negative ones ascending, then negative ones
    in_key_order = Window.partitionBy("__at").orderBy(serialized_key(F.col("key"), long_keys))
    return fan.withColumn("__sub", F.row_number().over(in_key_order) - 1), history


def join_foreign_key(
    events: DataFrame,
    left_state: DataFrame,
    right_state: DataFrame,
    kind: Kind,
    *,
    versioned: tuple[bool, bool] = (False, False),
    long_keys: bool = False,
) -> ForeignKeyStep:
    """Join the batch's left (L) table updates to the right (R) table by their foreign key (``__lookup``).

    :param left_state: :func:`left_state_schema` rows carried from earlier batches.
    :param versioned: whether the left and right inputs are versioned (older updates are ignored).
    :param long_keys: the left keys are longs (their text is decimal digits): fan-outs in Kafka's order.
    """
    updates = events.filter(F.col("side") == "L")
    live = updates.filter(~F.col("tomb")).withColumn("fk", F.col(LOOKUP_KEY))  # decoding's (events.decode_batch)
    deletes = updates.filter(F.col("tomb")).withColumn("fk", F.lit(None).cast("string"))
    lefts = live.unionByName(deletes).withColumn("__at", _at())
    rights = events.filter(F.col("side") == "R").withColumn("__at", _at())
    if versioned[0]:
        lefts = keep_applied(lefts, left_state)
    if versioned[1]:
        rights = keep_applied(rights, right_state)
    lefts, rights = _cut(lefts), _cut(rights)
    fan, history = _fan_out(lefts, rights, left_state, long_keys)
    # each left update with its key's previous row (in the batch, else the carried one): the old value
    per_key = Window.partitionBy("key").orderBy(F.col("__at").asc_nulls_first())
    previous = history.select(
        "key",
        "__at",
        # null when the previous row is a delete or there is none: the old value is absent
        F.lag(F.when(~F.col("tomb"), F.struct(F.col("fk").alias("fk")))).over(per_key).alias("__old"),
    ).filter(F.col("__at").isNotNull())
    changes = (
        lefts.join(previous, ["key", "__at"])
        .withColumn("__old_present", F.col("__old").isNotNull())
        .withColumn("__old_fk", F.col("__old.fk"))
    )
    new_fk = F.when(~F.col("tomb"), F.col("fk"))
    probes = changes.select("key", "__at", new_fk.alias("fk"), F.lit("new").alias("__probe")).unionByName(
        changes.select("key", "__at", F.col("__old_fk").alias("fk"), F.lit("old").alias("__probe"))
    )
    looked_up = _right_as_of(probes.filter(F.col("fk").isNotNull()), rights, right_state)
    new_rv = looked_up.filter(F.col("__probe") == "new").select("key", "__at", F.col("__rv").alias("__new_rv"))
    old_rv = looked_up.filter(F.col("__probe") == "old").select("key", "__at", F.col("__rv").alias("__old_rv"))
    rows = _cut(changes.join(new_rv, ["key", "__at"], "left").join(old_rv, ["key", "__at"], "left"))
    rv_present = F.coalesce(F.col("__new_rv.present"), F.lit(False))
    old_rv_ts = F.when(F.col("__old_rv.present"), F.col("__old_rv.ts"))
    new_rv_ts = F.when(rv_present, F.col("__new_rv.ts"))
    had_fk = F.col("__old_fk").isNotNull()
    if kind is Kind.INNER:
        to_nowhere = F.col("tomb") | F.col("fk").isNull()
        moved = had_fk & (F.col("__old_fk") != F.col("fk"))
        emit = F.when(to_nowhere, had_fk).otherwise(rv_present | moved)
        delete = to_nowhere | ~rv_present
        looked_ts = F.when(to_nowhere, old_rv_ts).otherwise(new_rv_ts)
    else:
        emit = ~F.col("tomb") | F.col("__old_present")
        delete = F.col("tomb")
        looked_ts = new_rv_ts
    left_events = rows.filter(emit).select(
        "key",
        F.when(~delete, F.col("lval")).alias("lval"),
        F.when(~delete & rv_present, F.col("__new_rv.value")).alias("rval"),
        (~delete & rv_present).alias("__rv_present"),
        delete.alias("__delete"),
        F.greatest(F.col("ts"), F.coalesce(looked_ts, F.col("ts"))).alias("ts"),
        *[c for c in SOURCE if c != "ts"],
        "__at",
        F.lit(0).alias("__sub"),
    )
    fan_delete = F.col("__delete") & F.lit(kind is Kind.INNER)
    fan_events = fan.withColumn("__delete", fan_delete).select(*left_events.columns)
    emitted = left_events.unionByName(fan_events)
    results = result_rows(
        emitted,
        F.when(~F.col("__delete"), F.col("lval")),
        F.when(~F.col("__delete") & F.col("__rv_present"), F.col("rval")),
        F.col("ts"),
        F.col("__delete"),
        F.col("__sub"),
    )
    updated = history.filter(
        F.col("__at").isNotNull() & F.col("__next").isNull() & (~F.col("tomb") | F.lit(versioned[0]))
    ).select("key", "lval", "fk", "ts", F.col("tomb").alias("deleted"))
    new_left = left_state.join(lefts.select("key").distinct(), "key", "left_anti").unionByName(updated)
    last_right = rights.groupBy("key").agg(F.max_by(F.struct("rval", "ts", "tomb"), "__at").alias("u"))
    fresh_right = last_right.select("key", "u.rval", "u.ts", F.col("u.tomb").alias("deleted"))
    if not versioned[1]:
        fresh_right = fresh_right.filter(~F.col("deleted"))
    new_right = right_state.join(last_right.select("key"), "key", "left_anti").unionByName(fresh_right)
    return ForeignKeyStep(results=_cut(results), left_state=new_left, right_state=new_right)
