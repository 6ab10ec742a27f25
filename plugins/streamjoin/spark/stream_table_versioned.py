"""Stream-table joins against a versioned table, with an optional grace period, vectorised per batch.

Versioned table (``history_retention=100``), ``grace=5``:

=======  ===============  ===============  ===================================================
Time     Stream           Table            Output
=======  ===============  ===============  ===================================================
t=10                      A -> red         (a version of A valid from 10)
t=20                      A -> blue        (a version of A valid from 20)
t=15     A: x                              (buffered: 15 >= 15 - 5 ...)
t=22     A: y                              A: (x, red), ts 15 (released: 15 <= 22 - 5,
                                           joined as of 15 -> red); y stays buffered
t=12     A: z                              A: (z, red), ts 12 (12 < 22 - 5: joined at once)
=======  ===============  ===============  ===================================================

* Every table update is a version at its ts. A lookup as of ``t`` finds the version with the largest
  ts ``<= t`` (equal ts: the later processed). The table's stream time is the max ts of its updates; a
  lookup older than ``table stream time - history_retention`` only sees the key's latest version (when
  it is not newer than ``t``), as Kafka Streams' versioned stores do. Unlike Kafka Streams, an update
  older than the history is still stored (docs/SEMANTICS.md, section 4).
* Grace: the buffer's stream time is the max ts of stream records only. A stream record older than
  ``buffer time - grace`` is joined at once; else it is buffered, and after each stream record every
  buffered record with ``ts <= buffer time - grace`` is released in (ts, arrival) order and joined as of
  its own ts against the table as it stands at the release. Output ts is the stream record's.

Vectorised: per task running maxima give each row both stream times; a buffered record's release row
comes from :func:`~streamjoin.spark.stream_stream.first_reaching`; the lookup is a key-equi join of the
released records with the versions processed before their release row, reduced per record.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from streamjoin.core.spec import Kind
from streamjoin.spark.events import LONG_MIN, ORDER, serialized_key
from streamjoin.spark.stream_stream import RESULT_COLUMNS, SRC, first_reaching

CLOCK_SCHEMA = "__task int, table_time long, stream_time long, seq long"
HISTORY_COLUMNS = ["key", "rval", "vts", "deleted", "seq", "__task"]
BUFFER_COLUMNS = ["key", "lval", "ts", "seq", *SRC, "__task"]


def history_schema(value_type: str) -> str:
    """DDL of the table's versions still within history retention."""
    return f"key string, rval {value_type}, vts long, deleted boolean, seq long, __task int"


def buffer_schema(value_type: str) -> str:
    """DDL of the stream records waiting for the grace period."""
    return (
        f"key string, lval {value_type}, ts long, seq long, src_topic string, src_partition int, "
        "src_offset long, __task int"
    )


@dataclass(frozen=True)
class VersionedStep:
    results: DataFrame
    history: DataFrame
    buffer: DataFrame
    clock: DataFrame


def with_clocks(events: DataFrame, clock: DataFrame) -> DataFrame:
    """``__seq`` (per task row number after the carried count), ``__tst`` (table stream time) and
    ``__bst`` (buffer stream time: stream records only) after each row, ``__adv``: the row raised
    ``__bst``."""
    running = Window.partitionBy("__task").orderBy(*ORDER).rowsBetween(Window.unboundedPreceding, 0)
    before = Window.partitionBy("__task").orderBy(*ORDER).rowsBetween(Window.unboundedPreceding, -1)
    stream_ts = F.when(F.col("side") == "L", F.col("ts"))
    table_ts = F.when(F.col("side") == "R", F.col("ts"))
    carried_bst = F.coalesce(F.col("stream_time"), F.lit(LONG_MIN))
    previous_bst = F.greatest(F.coalesce(F.max(stream_ts).over(before), F.lit(LONG_MIN)), carried_bst)
    return (
        events.join(F.broadcast(clock), "__task", "left")
        .withColumn("__seq", F.row_number().over(running) + F.coalesce(F.col("seq"), F.lit(0)))
        # null until the task saw a table record (greatest skips nulls)
        .withColumn("__tst", F.greatest(F.max(table_ts).over(running), F.col("table_time")))
        .withColumn("__bst", F.greatest(F.coalesce(F.max(stream_ts).over(running), F.lit(LONG_MIN)), carried_bst))
        .withColumn("__adv", F.col("__bst") > previous_bst)
        .drop("stream_time", "table_time", "seq")
    )


def _lookup(released: DataFrame, versions: DataFrame, retention: int) -> DataFrame:
    """The table value as of each released record's ts at its release row (``right``; null if none)."""
    r, v = released.alias("r"), versions.alias("v")
    earlier = (F.col("r.key") == F.col("v.key")) & (F.col("r.__task") == F.col("v.__task"))
    earlier &= F.col("v.seq") < F.col("r.__rel")
    pairs = r.join(v, earlier, "left")
    as_of = F.col("v.vts") <= F.col("r.ts")
    found = pairs.groupBy("r.__task", "r.seq").agg(
        F.max(F.when(as_of, F.struct("v.vts", "v.seq", "v.deleted", "v.rval"))).alias("__best"),
        F.max("v.vts").alias("__newest"),
    )
    with_found = released.join(found, ["__task", "seq"], "left")
    # older than the history retention: only the latest version counts (if it is not newer than ts)
    within = F.col("__tst").isNull() | (F.col("ts") >= F.col("__tst") - retention) | (F.col("__newest") <= F.col("ts"))
    right = F.when(within & ~F.col("__best.deleted"), F.col("__best.rval"))
    return with_found.withColumn("right", right)


def join_stream_table_versioned(
    events: DataFrame,
    history: DataFrame,
    buffer: DataFrame,
    clock: DataFrame,
    kind: Kind,
    *,
    grace: int,
    retention: int,
    long_keys: bool = False,
) -> VersionedStep:
    """Join the batch's stream records (side L) with the versioned table (side R).

    :param history: the table's versions (:func:`history_schema`) carried from earlier batches.
    :param buffer: stream records still within the grace period (:func:`buffer_schema`).
    :param clock: per task table time, buffer time and row count (``CLOCK_SCHEMA``).
    :param long_keys: the keys are longs: records released together go in Kafka's (ts, key bytes, arrival) order.
    """
    rows = with_clocks(events, clock)
    table = rows.filter(F.col("side") == "R")
    fresh_versions = table.select(
        "key", "rval", F.col("ts").alias("vts"), F.col("tomb").alias("deleted"), F.col("__seq").alias("seq"), "__task"
    )
    versions = history.unionByName(fresh_versions)
    stream = rows.filter(F.col("side") == "L")
    records = stream.select(
        "key",
        "lval",
        "ts",
        F.col("__seq").alias("seq"),
        F.col("topic").alias("src_topic"),
        F.col("__partition").alias("src_partition"),
        F.col("__offset").alias("src_offset"),
        "__task",
        (F.col("ts") < F.col("__bst") - grace).alias("__now"),
        (F.col("ts") + grace).alias("__probe"),
    )
    waiting = records.filter(~F.col("__now")).unionByName(
        buffer.withColumn("__now", F.lit(False)).withColumn("__probe", F.col("ts") + grace)
    )
    points = stream.filter("__adv").select("__task", F.col("__bst").alias("__st"), "__seq")
    probed = first_reaching(points, waiting, strict=False)
    released = probed.filter(F.col("__hit").isNotNull()).withColumn("__rel", F.greatest("__hit", "seq"))
    immediate = records.filter("__now").withColumn("__rel", F.col("seq"))
    at_release = rows.select("__task", F.col("__seq").alias("__rel"), "__tst", *ORDER)
    joined = _lookup(
        immediate.unionByName(released.drop("__hit")).join(at_release, ["__task", "__rel"]), versions, retention
    )
    within_row = Window.partitionBy("__task", "__rel").orderBy(
        F.col("__now").desc(), "ts", serialized_key(F.col("key"), long_keys), "seq"
    )
    results = joined.select(
        "key",
        F.col("lval").alias("left"),
        "right",
        "ts",
        F.col("right").isNotNull().alias("matched"),
        F.lit(False).alias("tomb_out"),
        (F.row_number().over(within_row) - 1).alias("__sub"),
        *SRC,
        "__task",
        *ORDER,
    ).select(*RESULT_COLUMNS)
    if kind is Kind.INNER:
        results = results.filter("matched")

    new_clock = (
        rows.groupBy("__task")
        .agg(
            F.max("__tst").alias("table_time"),
            F.max("__bst").alias("stream_time"),
            F.max("__seq").alias("seq"),
        )
        .unionByName(clock)
        .groupBy("__task")
        .agg(
            F.max("table_time").alias("table_time"),
            F.max("stream_time").alias("stream_time"),
            F.max("seq").alias("seq"),
        )
    )
    new_buffer = probed.filter(F.col("__hit").isNull()).select(*BUFFER_COLUMNS)
    return VersionedStep(
        results=results,
        history=prune_history(versions, new_clock, retention),
        buffer=new_buffer,
        clock=new_clock,
    )


def prune_history(versions: DataFrame, clock: DataFrame, retention: int) -> DataFrame:
    """Keep one version per (key, ts) (the later processed) and drop versions whose successor is at or
    before ``table time - history_retention``: no lookup can find them any more. The latest version of a
    key is always kept."""
    newest_first = Window.partitionBy("key", "vts").orderBy(F.col("seq").desc())
    by_ts = Window.partitionBy("key").orderBy("vts")
    return (
        versions.withColumn("__n", F.row_number().over(newest_first))
        .filter(F.col("__n") == 1)
        .withColumn("__valid_to", F.lead("vts").over(by_ts))
        .join(F.broadcast(clock.select("__task", "table_time")), "__task", "left")
        .filter(F.col("__valid_to").isNull() | (F.col("__valid_to") > F.col("table_time") - retention))
        .select(*HISTORY_COLUMNS)
    )
