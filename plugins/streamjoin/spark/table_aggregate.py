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
t5       o1: {product: ink}       ink: 1 (o1 stays in ink: one update, old subtracted, new added)
=======  =======================  ==============================================================

Each result key's previous value is kept. A result first subtracts the previous value from its old
group (emitting that group's new total), then adds the new value to its new group (emitting again);
when both groups are the same it emits once (KIP-904, as Kafka Streams 3.5+). ``count`` counts rows,
``sum`` adds ``value``. An output's ts is the largest ts the group has seen. A result whose group (or,
for ``sum``, amount) is null is a dead letter (``null-group``/``null-amount``) and, like a tombstone,
only subtracts.

Here the results are staged for the kernel (``Kernel.tableAggregate``): the join task that owns a result's
key keeps its previous contribution; the group's task keeps the totals.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamjoin.core.spec import Aggregate, Reduce
from streamjoin.spark.events import ORDER
from streamjoin.spark.projection import is_json_text, selector


def staged_table_results(results: DataFrame, agg: Aggregate) -> DataFrame:
    """Every join result with its ``group`` and ``amount`` (null for a tombstone) and ``reason`` (a live
    result's null group or amount: it is dead-lettered), besides ``key, value, tomb_out, ts, __sub``, its
    coordinates, ``ORDER`` and ``__task`` (the join task that owns the result's key)."""
    json_value = is_json_text(results)
    amount = (F.lit(1).cast("long") if agg.reduce is Reduce.COUNT
              else selector(agg.value, T.LongType(), json_value=json_value))  # type: ignore[arg-type]  # fmt: skip
    live = ~F.col("tomb_out")
    coordinates = [c for c in ("__partition", "__offset") if c not in ORDER]
    kept = ["key", "value", "tomb_out", "ts", "__sub", *coordinates, *ORDER, "__task"]
    # function selectors are Python UDFs, which run for every row they are given: only give them values
    values = results.filter(live).select(
        *kept, selector(agg.group_by, T.StringType(), json_value=json_value).alias("group"), amount.alias("amount")
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
    staged = staged_table_results(results, agg)
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
