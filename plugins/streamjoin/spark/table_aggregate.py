"""Re-key the results of a table-producing join (table-table, foreign key) and reduce them with
subtraction: a table aggregation, as Kafka Streams' ``KTable.groupBy(...).aggregate(adder, subtractor)``.

Count of orders per product (``group_by: value.product``):

=======  =======================  ==============================================================
Time     Join result              Output (group: total)
=======  =======================  ==============================================================
t1       o1: {product: pen}       pen: 1
t2       o2: {product: pen}       pen: 2
t3       o1: {product: ink}       pen: 1 (o1's old value subtracted), then ink: 1 (new added)
t4       o2: tombstone            pen: 0 (a tombstone only subtracts)
=======  =======================  ==============================================================

Each result key's previous value is kept. A result first subtracts the previous value from its old
group (emitting that group's new total), then adds the new value to its new group (emitting again),
even when both groups are the same. ``count`` counts rows, ``sum`` adds ``value``. An output's ts is
the largest ts the group has seen. A result whose group (or, for ``sum``, amount) is null is a dead
letter (``null-group``/``null-amount``) and, like a tombstone, only subtracts.

Vectorised: a window per result key gives each result the previous value (or the carried one); the
subtractions and additions become signed rows whose running sum per group, continued from the carried
totals, is the changelog.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamjoin.core.spec import Aggregate, Reduce
from streamjoin.spark.events import ORDER
from streamjoin.spark.projection import selector

#: each result key's last value as it was aggregated: its group and amount
PREVIOUS_SCHEMA = "key string, `group` string, amount long"


@dataclass(frozen=True)
class TableAggregateStep:
    rows: DataFrame  # key (group), value (total), ts, ORDER, __sub
    #: dead-lettered join results: key, value, ts, reason, __partition, __offset
    null_groups: DataFrame
    state: DataFrame
    previous: DataFrame


def staged_table_results(results: DataFrame, agg: Aggregate, *extra: str) -> DataFrame:
    """Every join result with its ``group`` and ``amount`` (null for a tombstone) and ``reason`` (a live
    result's null group or amount: it is dead-lettered), besides ``key, value, tomb_out, ts, __sub``, its
    coordinates, ``ORDER`` and the ``extra`` columns."""
    amount = F.lit(1).cast("long") if agg.reduce is Reduce.COUNT else selector(agg.value, T.LongType())  # type: ignore[arg-type]
    live = ~F.col("tomb_out")
    coordinates = [c for c in ("__partition", "__offset") if c not in ORDER]
    kept = ["key", "value", "tomb_out", "ts", "__sub", *coordinates, *ORDER, *extra]
    # function selectors are Python UDFs, which run for every row they are given: only give them values
    values = results.filter(live).select(
        *kept, selector(agg.group_by, T.StringType()).alias("group"), amount.alias("amount")
    )
    tombstones = results.filter(~live).select(
        *kept, F.lit(None).cast("string").alias("group"), F.lit(None).cast("long").alias("amount")
    )
    reason = F.when(F.col("group").isNull(), F.lit("null-group")).when(F.col("amount").isNull(), F.lit("null-amount"))
    return values.unionByName(tombstones).withColumn("reason", F.when(live, reason))


def kernel_staged_table_results(results: DataFrame, agg: Aggregate) -> DataFrame:
    """:func:`staged_table_results` as the kernel's table aggregate reads them (``Kernel.tableAggregate``): a
    rejected result's ``group`` null (it only subtracts, as a tombstone does) and its dead letter in
    ``__letter`` (``key, value, reason``), the join task that owns its key in ``__task``."""
    staged = staged_table_results(results, agg, "__task")
    letter = F.struct(F.col("key").alias("key"), F.col("value").alias("value"), F.col("reason").alias("reason"))
    return staged.select(
        "key",
        F.when(F.col("reason").isNull(), F.col("group")).alias("group"),
        "amount",
        "ts",
        "__sub",
        *ORDER,
        "__task",
        F.when(F.col("reason").isNotNull(), letter).alias("__letter"),
    )


def aggregate_table(results: DataFrame, state: DataFrame, previous: DataFrame, agg: Aggregate) -> TableAggregateStep:
    """Totals per group over the batch's join results in (``ORDER``, ``__sub``) with subtraction.

    :param state: carried totals (``group, total, max_ts``), as for stream aggregation.
    :param previous: carried last value per result key (:data:`PREVIOUS_SCHEMA`).
    """
    live = ~F.col("tomb_out")
    staged = staged_table_results(results, agg)
    # a dead-lettered result removes the key's previous contribution, like a tombstone
    null_groups = staged.filter(F.col("reason").isNotNull()).select(
        "key", "value", "ts", "reason", "__partition", "__offset"
    )
    per_key = Window.partitionBy("key").orderBy(*ORDER, "__sub")
    counted = F.struct("group", "amount")
    carried = previous.select("key", F.struct("group", "amount").alias("__carried"))
    with_old = (
        staged.withColumn("__now", F.when(live & F.col("reason").isNull(), counted))
        .join(carried, "key", "left")
        .withColumn("__first", F.row_number().over(per_key) == 1)
        .withColumn("__old", F.when(F.col("__first"), F.col("__carried")).otherwise(F.lag("__now").over(per_key)))
    )
    at = ["ts", *ORDER]
    subtract = with_old.filter(F.col("__old").isNotNull()).select(
        F.col("__old.group").alias("group"),
        (-F.col("__old.amount")).alias("delta"),
        *at,
        (F.col("__sub") * 2).alias("__s"),
    )
    add = with_old.filter(F.col("__now").isNotNull()).select(
        F.col("__now.group").alias("group"),
        F.col("__now.amount").alias("delta"),
        *at,
        (F.col("__sub") * 2 + 1).alias("__s"),
    )
    running = (
        Window.partitionBy("group").orderBy(*ORDER, "__s").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    rows = (
        subtract.unionByName(add)
        .join(F.broadcast(state), "group", "left")
        .select(
            F.col("group").alias("key"),
            (F.sum("delta").over(running) + F.coalesce(F.col("total"), F.lit(0))).alias("value"),
            F.greatest(F.max("ts").over(running), F.coalesce(F.col("max_ts"), F.col("ts"))).alias("ts"),
            F.col("__s").cast("int").alias("__sub"),
            *ORDER,
        )
    )
    last = rows.groupBy("key").agg(F.max_by(F.struct("value", "ts"), F.struct(*ORDER, "__sub")).alias("u"))
    new_state = state.join(last.withColumnRenamed("key", "group"), "group", "left_anti").unionByName(
        last.select(F.col("key").alias("group"), F.col("u.value").alias("total"), F.col("u.ts").alias("max_ts"))
    )
    last_value = with_old.groupBy("key").agg(F.max_by("__now", F.struct(*ORDER, "__sub")).alias("u"))
    new_previous = previous.join(last_value, "key", "left_anti").unionByName(
        last_value.filter(F.col("u").isNotNull()).select("key", "u.group", "u.amount")
    )
    return TableAggregateStep(rows=rows, null_groups=null_groups, state=new_state, previous=new_previous)
