"""Re-key join results and reduce them into a changelog table (seed 000's clicks per region).

After a stream-producing join every result adds to its group (no subtraction: a later region change
does not move earlier clicks). Each result emits the group's new total; its timestamp is the largest
seen in the group so far.

A result whose group (or, for ``sum``, amount) is null adds nothing and emits nothing: it is dead-lettered
(``null-group``/``null-amount``) carrying the join result's key and value.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamjoin.core.spec import Aggregate, Emit, Reduce
from streamjoin.spark.events import ORDER
from streamjoin.spark.projection import selector

AGG_STATE_COLUMNS = ["group", "total", "max_ts"]
AGG_STATE_SCHEMA = "`group` string, total long, max_ts long"


@dataclass(frozen=True)
class AggregateStep:
    #: key (group), value (total), ts, ORDER, __sub
    rows: DataFrame
    #: dead-lettered join results: key, value, ts, reason, __partition, __offset
    null_groups: DataFrame
    state: DataFrame
    #: frames this step cached (``rows`` derives from them), for the caller to unpersist after the batch
    cached: tuple[DataFrame, ...] = ()
    #: every group's rows sit in one partition in emission order: no sort needed before a sink
    in_order: bool = False


def staged_results(results: DataFrame, agg: Aggregate) -> DataFrame:
    """The join results an aggregate reads: ``group`` (null for a rejected result), ``amount``, ``ts``, ``__sub``,
    ``ORDER`` and ``__letter`` (a rejected result's key, value and reason; null for an accepted one). A
    tombstone adds nothing."""
    amount = F.lit(1).cast("long") if agg.reduce is Reduce.COUNT else selector(agg.value, T.LongType())  # type: ignore[arg-type]
    projected = results.filter(~F.col("tomb_out")).select(
        "key",
        "value",
        selector(agg.group_by, T.StringType()).alias("group"),
        amount.alias("amount"),
        "ts",
        "__sub",
        *ORDER,
    )
    reason = F.when(F.col("group").isNull(), F.lit("null-group")).when(F.col("amount").isNull(), F.lit("null-amount"))
    # a rejected result joins no group (its ``group`` is null, so sums never see its null amount) and carries
    # the join result for its dead letter; accepted rows carry nothing more than before
    letter = F.struct(F.col("key").alias("key"), F.col("value").alias("value"), reason.alias("reason"))
    return projected.select(
        F.when(reason.isNull(), F.col("group")).alias("group"),
        "amount",
        "ts",
        "__sub",
        *ORDER,
        F.when(reason.isNotNull(), letter).alias("__letter"),
    )


def rejected_results(staged: DataFrame) -> DataFrame:
    """The dead-lettered rows of :func:`staged_results`: ``key, value, ts, reason, __partition, __offset``."""
    return _letters(staged.filter(F.col("group").isNull()), F.col("ts"))


def aggregate_stream(results: DataFrame, state: DataFrame, agg: Aggregate) -> AggregateStep:
    """Running totals per group over the batch's join results in ``ORDER``, continuing from ``state``."""
    staged = staged_results(results, agg)
    if agg.emit is Emit.PER_BATCH:
        return _aggregate_per_batch(staged, state)
    ordered = Window.partitionBy("group").orderBy(*ORDER, "__sub")
    running = ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    # one pass over the join results, cached: the null groups' rows (dead letters) ride along in the window
    # rather than computing the join again for them
    windowed = (
        staged.join(F.broadcast(state), "group", "left")
        .select(
            F.col("group").alias("key"),
            (F.sum("amount").over(running) + F.coalesce(F.col("total"), F.lit(0))).alias("value"),
            F.greatest(F.max("ts").over(running), F.coalesce(F.col("max_ts"), F.col("ts"))).alias("ts"),
            F.col("ts").alias("__result_ts"),
            F.lead(F.lit(True)).over(ordered).isNull().alias("__last"),  # the group's last row this batch
            "__sub",
            *ORDER,
            "__letter",
        )
        .persist()
    )
    # the window leaves each group's rows in one partition in emission order: no sort before the sink
    by_group = windowed.filter(F.col("key").isNotNull())
    rows = by_group.drop("__result_ts", "__last", "__letter")
    null_groups = _letters(windowed.filter(F.col("key").isNull()), F.col("__result_ts"))
    last = by_group.filter("__last").select(
        F.col("key").alias("group"), F.col("value").alias("total"), F.col("ts").alias("max_ts")
    )
    new_state = state.join(last.select("group"), "group", "left_anti").unionByName(last)
    return AggregateStep(rows=rows, null_groups=null_groups, state=new_state, cached=(windowed,), in_order=True)


def _aggregate_per_batch(staged: DataFrame, state: DataFrame) -> AggregateStep:
    """One update per group per micro-batch: a hash aggregation, no sort (Kafka Streams' cache does the
    same with its commit interval). The few totals are cached, and computed at once: only a batch with
    null groups reads the join results again, for their dead letters."""
    # a max over a struct needs a sort-based aggregation: take it over one row per source partition, in
    # which ORDER grows with the offset (the last record holds the largest position and offset)
    per_source = staged.groupBy("group", "__input", "__partition").agg(
        F.sum("amount").alias("added"),
        F.max("ts").alias("batch_ts"),
        F.max("__pos").alias("__pos"),
        F.max("__offset").alias("__offset"),
    )
    sums = per_source.groupBy("group").agg(
        F.sum("added").alias("added"), F.max("batch_ts").alias("batch_ts"), F.max(F.struct(*ORDER)).alias("o")
    )
    totals = (
        sums.join(F.broadcast(state), "group", "left")
        .select(
            "group",
            (F.col("added") + F.coalesce(F.col("total"), F.lit(0))).alias("total"),
            F.greatest(F.col("batch_ts"), F.coalesce(F.col("max_ts"), F.col("batch_ts"))).alias("max_ts"),
            "o",
        )
        .persist()
    )
    has_null_group = totals.filter(F.col("group").isNull()).count() > 0
    null_groups = _letters(staged.filter(F.col("group").isNull()) if has_null_group else staged.limit(0), F.col("ts"))
    totals_by_group = totals.filter(F.col("group").isNotNull())
    rows = totals_by_group.select(
        F.col("group").alias("key"), F.col("total").alias("value"), F.col("max_ts").alias("ts"),
        F.lit(0).alias("__sub"), *[F.col(f"o.{c}").alias(c) for c in ORDER],
    )  # fmt: skip
    new_state = state.join(totals_by_group.select("group"), "group", "left_anti").unionByName(totals_by_group.drop("o"))
    return AggregateStep(rows=rows, null_groups=null_groups, state=new_state, cached=(totals,))


def _letters(rejected: DataFrame, ts: Column) -> DataFrame:
    """The dead-lettered join results (``__letter`` set) as ``key, value, ts, reason, __partition, __offset``."""
    return rejected.select(
        F.col("__letter.key").alias("key"),
        F.col("__letter.value").alias("value"),
        ts.alias("ts"),
        F.col("__letter.reason").alias("reason"),
        "__partition",
        "__offset",
    )
