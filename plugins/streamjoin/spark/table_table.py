"""Table-table joins (inner, left, outer) on the key, vectorised over one micro-batch.

=======  ===============  ===============  ==================================================
Time     Left table       Right table      Output (inner / left / outer)
=======  ===============  ===============  ==================================================
t1       A: view                           - / A: (view, null) / A: (view, null)
t2                        A: click         A: (view, click), ts 2 (all kinds)
t3       A: null                           A: tombstone (all kinds); outer: (null, click)
                                           instead, because the right side still has A
t4                        B: click         - / - / B: (null, click)
t5       C: null                           - (deleting an absent key emits nothing)
=======  ===============  ===============  ==================================================

Each side keeps the latest value per key (a tombstone deletes). An update of a versioned input whose
ts is older than the key's latest on that side is not applied and emits nothing. Every applied update
emits at most one record for its key with ts ``max(ts, other side's value ts)`` when the other side has a
value, else its own ts:

* inner: nothing if the other side is absent; a delete emits a tombstone, else ``joiner(l, r)``.
* left, left update: nothing for the delete of an absent key while the right is absent; a delete emits a
  tombstone, else ``joiner(l, r or None)``. Right update: nothing while the left is absent, else
  ``joiner(l, r or None)``.
* outer: nothing for the delete of an absent key while the other side is absent; a tombstone once both
  sides are absent; else ``joiner(l or None, r or None)``.

Vectorised: one window per key in ``ORDER`` gives every update the last applied value of each side
before it (``F.last(..., ignorenulls)``), starting from the carried tables.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from streamjoin.core.spec import Kind
from streamjoin.spark.events import LONG_MIN, ORDER
from streamjoin.spark.stream_stream import RESULT_COLUMNS


def side_state_schema(value_type: str) -> str:
    """DDL of one side's table: latest value per key; ``deleted`` rows only for versioned inputs (they
    keep the ts a later, older update is compared with)."""
    return f"key string, value {value_type}, ts long, deleted boolean"


@dataclass(frozen=True)
class TableTableStep:
    results: DataFrame
    left_state: DataFrame
    right_state: DataFrame


def _version(value: Column, present: Column) -> Column:
    return F.struct(value.alias("value"), F.col("ts").alias("ts"), present.alias("present"))


def _carried(state: DataFrame, prefix: str) -> DataFrame:
    return state.select(
        "key",
        F.struct("value", "ts", (~F.col("deleted")).alias("present")).alias(f"{prefix}_carried"),
    )


def with_sides(
    events: DataFrame, left_state: DataFrame, right_state: DataFrame, *, versioned: tuple[bool, bool]
) -> DataFrame:
    """Add to each update ``__applied`` and the latest applied version of each side before it
    (``__l_before``, ``__r_before``: structs ``value, ts, present``; null when never seen)."""
    rows = events.join(_carried(left_state, "l"), "key", "left").join(_carried(right_state, "r"), "key", "left")
    by_key = Window.partitionBy("key").orderBy(*ORDER)
    before = by_key.rowsBetween(Window.unboundedPreceding, -1)
    is_left = F.col("side") == "L"
    applied = F.lit(True)
    for side, prefix, flag in (("L", "l", versioned[0]), ("R", "r", versioned[1])):
        if flag:
            latest = F.greatest(
                F.max(F.when(F.col("side") == side, F.col("ts"))).over(before),
                F.coalesce(F.col(f"{prefix}_carried.ts"), F.lit(LONG_MIN)),
            )
            applied = F.when(F.col("side") == side, F.col("ts") >= F.coalesce(latest, F.lit(LONG_MIN))).otherwise(
                applied
            )
    rows = rows.withColumn("__applied", applied)
    left_version = F.when(is_left & F.col("__applied"), _version(F.col("lval"), ~F.col("tomb")))
    right_version = F.when(~is_left & F.col("__applied"), _version(F.col("rval"), ~F.col("tomb")))
    return (
        rows.withColumn("__l_before", F.coalesce(F.last(left_version, True).over(before), F.col("l_carried")))
        .withColumn("__r_before", F.coalesce(F.last(right_version, True).over(before), F.col("r_carried")))
        .drop("l_carried", "r_carried")
    )


def _emission(kind: Kind) -> tuple[Column, Column, Column, Column]:
    """``(emit, tombstone, left, right)`` for an applied update with ``__l_before``/``__r_before``."""
    is_left = F.col("side") == "L"
    delete = F.col("tomb")
    l_had = F.coalesce(F.col("__l_before.present"), F.lit(False))
    r_had = F.coalesce(F.col("__r_before.present"), F.lit(False))
    other_has = F.when(is_left, r_had).otherwise(l_had)
    this_had = F.when(is_left, l_had).otherwise(r_had)
    left_now = F.when(is_left, F.when(~delete, F.col("lval"))).otherwise(F.when(l_had, F.col("__l_before.value")))
    right_now = F.when(~is_left, F.when(~delete, F.col("rval"))).otherwise(F.when(r_had, F.col("__r_before.value")))
    absent_delete = delete & ~this_had & ~other_has
    if kind is Kind.INNER:
        return other_has, delete, left_now, right_now
    if kind is Kind.LEFT:
        emit = F.when(is_left, ~absent_delete).otherwise(l_had)
        return emit, is_left & delete, left_now, right_now
    return ~absent_delete, delete & ~other_has, left_now, right_now


def result_rows(rows: DataFrame, left: Column, right: Column, ts: Column, tomb: Column, sub: Column) -> DataFrame:
    """Join results (``RESULT_COLUMNS``) triggered by event rows."""
    return rows.select(
        "key",
        left.alias("left"),
        right.alias("right"),
        ts.alias("ts"),
        (left.isNotNull() & right.isNotNull() & ~tomb).alias("matched"),
        tomb.alias("tomb_out"),
        sub.cast("int").alias("__sub"),
        F.col("topic").alias("src_topic"),
        F.col("__partition").alias("src_partition"),
        F.col("__offset").alias("src_offset"),
        "__task",
        *ORDER,
    ).select(*RESULT_COLUMNS)


def latest_state(rows: DataFrame, state: DataFrame, side: str, value: str, *, keep_deleted: bool) -> DataFrame:
    """One side's table after the batch's applied updates."""
    updates = rows.filter((F.col("side") == side) & F.col("__applied"))
    last = updates.groupBy("key").agg(
        F.max_by(F.struct(F.col(value).alias("value"), "ts", F.col("tomb").alias("deleted")), F.struct(*ORDER)).alias(
            "u"
        )
    )
    fresh = last.select("key", "u.value", "u.ts", "u.deleted")
    if not keep_deleted:
        fresh = fresh.filter(~F.col("deleted"))
    return state.join(last.select("key"), "key", "left_anti").unionByName(fresh)


def join_table_table(
    events: DataFrame,
    left_state: DataFrame,
    right_state: DataFrame,
    kind: Kind,
    *,
    versioned: tuple[bool, bool] = (False, False),
) -> TableTableStep:
    """Join the batch's left (L) and right (R) table updates with each other and the carried tables.

    :param versioned: whether the left and right inputs are versioned (older updates are ignored).
    """
    rows = with_sides(events, left_state, right_state, versioned=versioned)
    emit, tomb, left, right = _emission(kind)
    # pick the other side's fields, not its struct: the two sides' value types may differ (string/long/json)
    is_left = F.col("side") == "L"
    other_present = F.when(is_left, F.col("__r_before.present")).otherwise(F.col("__l_before.present"))
    other_ts = F.when(is_left, F.col("__r_before.ts")).otherwise(F.col("__l_before.ts"))
    other_has = F.coalesce(other_present, F.lit(False))
    ts = F.when(other_has, F.greatest(F.col("ts"), other_ts)).otherwise(F.col("ts"))
    results = result_rows(rows.filter(F.col("__applied") & emit), left, right, ts, tomb, F.lit(0))
    return TableTableStep(
        results=results,
        left_state=latest_state(rows, left_state, "L", "lval", keep_deleted=versioned[0]),
        right_state=latest_state(rows, right_state, "R", "rval", keep_deleted=versioned[1]),
    )
