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

A stream record sees the table as it stands after every table record that precedes it in ``ORDER``:
the latest such record of the same key inside the batch, else the table state carried from earlier
batches. Only stream records produce output; its timestamp is the stream record's.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from streamjoin.core.spec import Kind
from streamjoin.spark.events import ORDER

TABLE_STATE_COLUMNS = ["key", "rval", "rts"]


@dataclass(frozen=True)
class JoinStep:
    results: DataFrame
    table_state: DataFrame


def _results(stream: DataFrame, right: Column, found: Column, kind: Kind, out_key: str) -> DataFrame:
    out = stream.select(
        F.col(out_key).alias("key"),
        F.col("lval").alias("left"),
        right.alias("right"),
        F.col("ts"),
        found.alias("matched"),
        F.lit(False).alias("tomb_out"),
        F.lit(0).alias("__sub"),
        F.col("topic").alias("src_topic"),
        F.col("__partition").alias("src_partition"),
        F.col("__offset").alias("src_offset"),
        "__task",
        *ORDER,
    )
    return out if kind is Kind.LEFT else out.filter("matched")


def latest_table_state(updates: DataFrame, table_state: DataFrame) -> DataFrame:
    """The table after applying this batch's updates in ``ORDER`` (tombstones delete)."""
    last = updates.groupBy("key").agg(
        F.max_by(F.struct("rval", F.col("ts").alias("rts"), "tomb"), F.struct(*ORDER)).alias("u")
    )
    kept = table_state.join(last.select("key"), "key", "left_anti")
    applied = last.filter(~F.col("u.tomb")).select("key", "u.rval", "u.rts")
    return kept.unionByName(applied)


def join_stream_table(
    events: DataFrame, table_state: DataFrame, kind: Kind, lookup_key: Column | None = None
) -> JoinStep:
    """Join the batch's stream records (side L) with the table (side R) and carry the table forward.

    :param lookup_key: for global tables, the table key derived from the stream record (default: its key).
    """
    stream = events.filter(F.col("side") == "L").drop("rval")
    updates = events.filter(F.col("side") == "R")
    out_key = "key"
    if lookup_key is not None:
        stream = stream.withColumn("__stream_key", F.col("key")).withColumn("key", lookup_key)
        out_key = "__stream_key"
    touched = updates.select("key").distinct()
    # Keys without a table update in this batch only need the carried state: a hash join, no sort.
    quiet = stream.join(F.broadcast(touched), "key", "left_anti").join(table_state, "key", "left")
    quiet_results = _results(quiet, F.col("rval"), F.col("rts").isNotNull(), kind, out_key)
    # Keys updated in this batch: find the last update before each stream record in ORDER.
    busy = stream.join(F.broadcast(touched), "key", "left_semi")
    marked = updates.withColumn("__upd", F.struct("rval", F.col("ts").alias("uts"), "tomb"))
    merged = busy.unionByName(marked, allowMissingColumns=True)
    before = Window.partitionBy("key").orderBy(*ORDER).rowsBetween(Window.unboundedPreceding, Window.currentRow)
    seen = (
        merged.withColumn("__last", F.last("__upd", ignorenulls=True).over(before))
        .filter(F.col("side") == "L")
        .drop("rval", "__upd")
        .join(table_state, "key", "left")
    )
    in_batch = F.col("__last").isNotNull()
    right = F.when(in_batch, F.when(~F.col("__last.tomb"), F.col("__last.rval"))).otherwise(F.col("rval"))
    busy_results = _results(seen, right, right.isNotNull(), kind, out_key)
    results = quiet_results.unionByName(busy_results)
    return JoinStep(results=results, table_state=latest_table_state(updates, table_state))
