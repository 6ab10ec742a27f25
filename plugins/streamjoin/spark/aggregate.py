"""Re-key join results and reduce them into a changelog table (seed 000's clicks per region).

After a stream-producing join every result adds to its group (no subtraction: a later region change
does not move earlier clicks). Each result emits the group's new total; its timestamp is the largest
seen in the group so far.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamjoin.core.spec import Aggregate, Emit, Reduce
from streamjoin.spark.events import ORDER
from streamjoin.spark.projection import selector

AGG_STATE_COLUMNS = ["group", "total", "max_ts"]
AGG_STATE_SCHEMA = "`group` string, total long, max_ts long"


@dataclass(frozen=True)
class AggregateStep:
    rows: DataFrame  # key (group), value (total), ts, ORDER, __sub
    null_groups: DataFrame
    state: DataFrame


def aggregate_stream(results: DataFrame, state: DataFrame, agg: Aggregate) -> AggregateStep:
    """Running totals per group over the batch's join results in ``ORDER``, continuing from ``state``."""
    amount = F.lit(1).cast("long") if agg.reduce is Reduce.COUNT else selector(agg.value, T.LongType())  # type: ignore[arg-type]
    staged = results.filter(~F.col("tomb_out")).select(
        selector(agg.group_by, T.StringType()).alias("group"), amount.alias("amount"), "ts", "__sub", *ORDER
    )
    null_groups = staged.filter(F.col("group").isNull())
    if agg.emit is Emit.PER_BATCH:
        return _aggregate_per_batch(staged.filter(F.col("group").isNotNull()), state, null_groups)
    running = (
        Window.partitionBy("group").orderBy(*ORDER, "__sub").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    rows = (
        staged.filter(F.col("group").isNotNull())
        .join(F.broadcast(state), "group", "left")
        .select(
            F.col("group").alias("key"),
            (F.sum("amount").over(running) + F.coalesce(F.col("total"), F.lit(0))).alias("value"),
            F.greatest(F.max("ts").over(running), F.coalesce(F.col("max_ts"), F.col("ts"))).alias("ts"),
            "__sub",
            *ORDER,
        )
    )
    last = rows.groupBy("key").agg(
        F.max_by(F.struct("value", "ts", "__sub", *ORDER), F.struct(*ORDER, "__sub")).alias("u")
    )
    new_state = state.join(last.withColumnRenamed("key", "group"), "group", "left_anti").unionByName(
        last.select(F.col("key").alias("group"), F.col("u.value").alias("total"), F.col("u.ts").alias("max_ts"))
    )
    return AggregateStep(rows=rows, null_groups=null_groups, state=new_state)


def _aggregate_per_batch(staged: DataFrame, state: DataFrame, null_groups: DataFrame) -> AggregateStep:
    """One update per group per micro-batch: a hash aggregation, no sort (Kafka Streams' cache does the
    same with its commit interval)."""
    sums = staged.groupBy("group").agg(
        F.sum("amount").alias("added"), F.max("ts").alias("batch_ts"), F.max(F.struct(*ORDER)).alias("o")
    )
    totals = sums.join(F.broadcast(state), "group", "left").select(
        "group",
        (F.col("added") + F.coalesce(F.col("total"), F.lit(0))).alias("total"),
        F.greatest(F.col("batch_ts"), F.coalesce(F.col("max_ts"), F.col("batch_ts"))).alias("max_ts"),
        "o",
    )
    rows = totals.select(
        F.col("group").alias("key"), F.col("total").alias("value"), F.col("max_ts").alias("ts"),
        F.lit(0).alias("__sub"), *[F.col(f"o.{c}").alias(c) for c in ORDER],
    )  # fmt: skip
    new_state = state.join(totals.select("group"), "group", "left_anti").unionByName(totals.drop("o"))
    return AggregateStep(rows=rows, null_groups=null_groups, state=new_state)
