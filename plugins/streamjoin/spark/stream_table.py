"""Stream-table and stream-globaltable joins, vectorised over one micro-batch.

=======  ===============  ===============  ==========================================
Time     Stream           Table            Output
=======  ===============  ===============  ==========================================
t1                        alice -> europe  (table updates only update state)
t2       alice: 13                         alice: (13, europe)
t3       bob: 4                            inner: nothing; left: (4, null)
t4                        alice -> null    (tombstone: alice deleted)
t5       alice: 2                          inner: nothing; left: (2, null)
=======  ===============  ===============  ==========================================

A stream record sees the table as it stands after every table record that precedes it in ``ORDER``.
Every table value is valid over an interval of positions: the carried value from ``-inf`` to the key's
first update in the batch, each update until the next one. A stream record joins the one interval of
its key that contains its position: an equi-join on the key plus a range condition, with the intervals
(the carried values of the batch's stream keys + this batch's updates) broadcast, so the stream rows are
neither shuffled nor sorted. Only stream records produce output; its timestamp is the stream record's.

The table is a :class:`~streamjoin.spark.layers.KeyedLayers`: a batch looks up the carried values of
its own keys only and adds one layer with the latest update of each key it changed, so neither the
lookup nor the new state costs a pass over the whole table's rows in the driver, a sort or a rewrite.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from streamjoin.core.spec import Kind
from streamjoin.spark.events import LONG_MIN, ORDER
from streamjoin.spark.layers import KeyedLayers


def table_state_schema(rtype: str) -> str:
    """The table's rows: the latest value per key, its timestamp, and ``tomb`` for a deleted key."""
    return f"key string, rval {rtype}, rts long, tomb boolean"


@dataclass(frozen=True)
class JoinStep:
    results: DataFrame
    table_state: KeyedLayers
    #: frames this step cached, for the caller to unpersist after the batch
    cached: tuple[DataFrame, ...] = ()


def table_intervals(updates: DataFrame, table_state: DataFrame) -> DataFrame:
    """``key, rval, rts, tomb, __start, __end``: which table value holds between which positions."""
    carried = table_state.select(
        "key", "rval", "rts", F.lit(False).alias("tomb"), F.lit(LONG_MIN).alias("__start"),
        F.lit(-1).cast("int").alias("__partition"), F.lit(-1).cast("long").alias("__offset"),
    )  # fmt: skip
    applied = updates.select(
        "key", "rval", F.col("ts").alias("rts"), "tomb", F.col("__pos").alias("__start"), "__partition", "__offset"
    )
    versions = Window.partitionBy("key").orderBy("__start", "__partition", "__offset")
    return carried.unionByName(applied).withColumn("__end", F.lead("__start").over(versions))


def join_stream_table(
    events: DataFrame,
    table: KeyedLayers,
    kind: Kind,
    lookup_key: Column | None = None,
    *,
    has_updates: bool = True,
) -> JoinStep:
    """Join the batch's stream records (side L) with the table (side R) and carry the table forward.

    :param lookup_key: for global tables, the table key derived from the stream record (default: its key).
    :param has_updates: False when the batch holds no table records: the table is looked up as it is and
        carried on unchanged (the same layers, which the state store then does not write again).
    """
    stream = events.filter(F.col("side") == "L").drop("rval", "tomb")
    stream = stream.withColumn("__stream_key", F.col("key"))
    if lookup_key is not None:
        stream = stream.withColumn("key", lookup_key)
    carried = table.lookup(stream.select("key").distinct())
    updates = events.filter(F.col("side") == "R")
    if has_updates:
        intervals = table_intervals(updates, carried).drop("__partition", "__offset")
    else:
        intervals = carried.select(
            "key", "rval", F.lit(False).alias("tomb"), F.lit(LONG_MIN).alias("__start"),
            F.lit(None).cast("long").alias("__end"),
        )  # fmt: skip
    # cached: each use of the results broadcasts it (the lookup in the table runs once), and the table's
    # new layer is its last interval per key
    intervals = intervals.persist()
    s, i = stream.alias("s"), F.broadcast(intervals).alias("i")
    inside = (
        (F.col("s.key") == F.col("i.key"))
        & (F.col("s.__pos") >= F.col("i.__start"))
        & (F.col("i.__end").isNull() | (F.col("s.__pos") < F.col("i.__end")))
    )
    joined = s.join(i, inside, "left")
    right = F.when(~F.col("i.tomb"), F.col("i.rval"))
    results = joined.select(
        F.col("s.__stream_key").alias("key"),
        F.col("s.lval").alias("left"),
        right.alias("right"),
        F.col("s.ts").alias("ts"),
        right.isNotNull().alias("matched"),
        F.lit(False).alias("tomb_out"),
        F.lit(0).alias("__sub"),
        F.col("s.topic").alias("src_topic"),
        F.col("s.__partition").alias("src_partition"),
        F.col("s.__offset").alias("src_offset"),
        F.col("s.__task").alias("__task"),
        *[F.col(f"s.{c}").alias(c) for c in ORDER],
    )
    if kind is Kind.INNER:
        results = results.filter("matched")
    new_table = table.with_layer(latest_updates(intervals)) if has_updates else table
    return JoinStep(results=results, table_state=new_table, cached=(intervals,))


def latest_updates(intervals: DataFrame) -> DataFrame:
    """The table's new layer: the last update of each key the batch changed (a tombstone deletes it)."""
    changed = F.col("__end").isNull() & (F.col("__start") > F.lit(LONG_MIN))
    return intervals.filter(changed).select("key", "rval", "rts", "tomb")


def null_key_results(events: DataFrame) -> DataFrame:
    """``(v, null)`` for the batch's null-key stream records (side L) of a left join, each at its own row
    and ts (KIP-962): they match no table key, so they are neither looked up nor buffered by a grace
    period. The decoder dead-letters such records of an inner join, so none reach here."""
    return events.filter((F.col("side") == "L") & F.col("key").isNull()).select(
        F.col("key"),
        F.col("lval").alias("left"),
        F.lit(None).alias("right"),
        F.col("ts"),
        F.lit(False).alias("matched"),
        F.lit(False).alias("tomb_out"),
        F.lit(0).alias("__sub"),
        F.col("topic").alias("src_topic"),
        F.col("__partition").alias("src_partition"),
        F.col("__offset").alias("src_offset"),
        "__task",
        *ORDER,
    )
