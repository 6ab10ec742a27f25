"""Windowed stream-stream joins (inner, left, outer), vectorised over one micro-batch.

Window ``before=10, after=10, grace=0``; stream time = max ts seen by the task (both inputs):

=======  ===============  ===============  ===================================================
Time     Left stream      Right stream     Output
=======  ===============  ===============  ===================================================
t=0      A: view                           (stored; left/outer: pending, close 0+10+0 = 10)
t=1                       A: click         A: (view, click), ts 1; A is no longer pending
t=5      B: view                           (stored; pending, close 15)
t=16                      C: click         left/outer: B: (view, null), ts 5 (close 15 < 16),
                                           then C is stored (outer: pending, close 26)
t=3                       B: click         late: close 3+10 = 13 < 16, dropped and counted
=======  ===============  ===============  ===================================================

Rules, per task, records in ``ORDER`` (stream time is advanced before a record is processed):

1. close = ``ts + after + grace`` (left) or ``ts + before + grace`` (right); ``close < stream time``: late.
2. a record with ``ts == stream time`` first emits every pending record whose close is below stream
   time, ordered (ts, left before right, key), as ``joiner(l, None)`` / ``joiner(None, r)`` at the pending
   record's own ts;
3. then joins every stored record of the other side with ``l.ts - before <= r.ts <= l.ts + after`` in
   (ts, arrival) order, ts ``max(l.ts, r.ts)``; a joined record stops being pending;
4. then is stored; without a match it becomes pending if the kind keeps its side.

Vectorised: a per-task running max gives each row its stream time; matches are a key-equi join of the
batch with itself and the carried window store, emitted at the later row; a pending record is emitted at
the first row whose stream time exceeds its close (:func:`first_reaching`) unless it matched earlier.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from streamjoin.core.spec import Join, Kind
from streamjoin.spark.events import LONG_MIN, ORDER

#: The columns every join shape returns (the engine adds ``value`` from the joiner).
RESULT_COLUMNS = [
    "key",
    "left",
    "right",
    "ts",
    "matched",
    "tomb_out",
    "__sub",
    "src_topic",
    "src_partition",
    "src_offset",
    "__task",
    *ORDER,
]
CLOCK_SCHEMA = "__task int, stream_time long, seq long"
SRC = ["src_topic", "src_partition", "src_offset"]
STORE_COLUMNS = ["key", "side", "lval", "rval", "ts", "seq", "pending", *SRC, "__task"]


def store_schema(ltype: str, rtype: str) -> str:
    """DDL of the window store: every non-expired record of both sides with its pending flag."""
    return (
        f"key string, side string, lval {ltype}, rval {rtype}, ts long, seq long, pending boolean, "
        "src_topic string, src_partition int, src_offset long, __task int"
    )


@dataclass(frozen=True)
class StreamStreamStep:
    results: DataFrame
    #: late records (dropped): event rows with their stream time
    late: DataFrame
    store: DataFrame
    clock: DataFrame
    #: frames this step cached, for the caller to unpersist after the batch
    cached: tuple[DataFrame, ...] = ()


def with_task_clock(events: DataFrame, clock: DataFrame, time_of: Column) -> DataFrame:
    """Number the task's rows in ``ORDER`` after the carried count (``__seq``) and add the running max
    of ``time_of`` after the carried stream time (``__st``) and whether the row raised it (``__adv``)."""
    running = Window.partitionBy("__task").orderBy(*ORDER).rowsBetween(Window.unboundedPreceding, 0)
    before = Window.partitionBy("__task").orderBy(*ORDER).rowsBetween(Window.unboundedPreceding, -1)
    carried = F.coalesce(F.col("stream_time"), F.lit(LONG_MIN))
    return (
        events.join(F.broadcast(clock), "__task", "left")
        .withColumn("__seq", F.row_number().over(running) + F.coalesce(F.col("seq"), F.lit(0)))
        .withColumn("__st", F.greatest(F.max(time_of).over(running), carried))
        .withColumn("__adv", F.col("__st") > F.greatest(F.max(time_of).over(before), carried))
        .drop("stream_time", "seq")
    )


def first_reaching(points: DataFrame, probes: DataFrame, *, strict: bool) -> DataFrame:
    """For each probe (``__task``, ``__probe`` value) the ``__seq`` of the first point whose ``__st`` is
    ``> __probe`` (strict) or ``>= __probe``, as ``__hit`` (null if none). Points must have a monotone
    ``__st`` in ``__seq`` order per task; one descending sort replaces a per-probe search."""
    point_tag, probe_tag = (0, 1) if strict else (1, 0)
    marked = points.select(
        "__task", F.col("__st").alias("__v"), F.lit(point_tag).alias("__tag"), F.col("__seq").alias("__pt")
    ).unionByName(
        probes.withColumn("__v", F.col("__probe")).withColumn("__tag", F.lit(probe_tag)),
        allowMissingColumns=True,
    )
    desc = (
        Window.partitionBy("__task")
        .orderBy(F.col("__v").desc(), F.col("__tag").desc(), F.col("__pt").desc_nulls_last())
        .rowsBetween(Window.unboundedPreceding, 0)
    )
    hits = marked.withColumn("__hit", F.last("__pt", ignorenulls=True).over(desc))
    return hits.filter(F.col("__pt").isNull()).drop("__v", "__tag", "__pt")


def _side(rows: DataFrame, side: str, in_batch: bool) -> DataFrame:
    """One side's rows for the match join, named by side (``l_*`` / ``r_*``)."""
    p = side.lower()
    value = "lval" if side == "L" else "rval"
    cols: list[Column | str] = [
        "key",
        "__task",
        F.col(value).alias(f"{p}_val"),
        F.col("ts").alias(f"{p}_ts"),
        F.col("__seq").alias(f"{p}_seq"),
    ]
    if in_batch:
        cols += [F.col(c).alias(f"{p}_{c}") for c in ORDER]
        cols += [F.col("topic").alias(f"{p}_src_topic"), F.col("__partition").alias(f"{p}_src_partition")]
        cols += [F.col("__offset").alias(f"{p}_src_offset")]
    else:
        cols += [F.lit(None).alias(f"{p}_{c}") for c in [*ORDER, *SRC]]
    return rows.filter(F.col("side") == side).select(*cols)


def _matches(batch: DataFrame, store: DataFrame, before: int, after: int) -> DataFrame:
    """Every joining pair with at least one batch row, emitted at the later-processed row."""
    window = (F.col("r_ts") >= F.col("l_ts") - before) & (F.col("r_ts") <= F.col("l_ts") + after)
    bl, br = _side(batch, "L", True), _side(batch, "R", True)
    sl, sr = _side(store, "L", False), _side(store, "R", False)
    pairs = bl.join(br.unionByName(sr), ["key", "__task"]).filter(window)
    pairs = pairs.unionByName(sl.join(br, ["key", "__task"]).filter(window))
    left_emits = F.col("l_seq") > F.col("r_seq")

    def at_emitter(name: str) -> Column:
        return F.when(left_emits, F.col(f"l_{name}")).otherwise(F.col(f"r_{name}")).alias(name)

    return pairs.select(
        "key",
        F.col("l_val").alias("left"),
        F.col("r_val").alias("right"),
        F.greatest("l_ts", "r_ts").alias("ts"),
        F.lit(True).alias("matched"),
        "__task",
        *[at_emitter(c) for c in [*ORDER, *SRC]],
        F.greatest("l_seq", "r_seq").alias("__emit"),
        "l_seq",
        "r_seq",
        # order among a row's outputs: after expiries, by the stored record's (ts, arrival)
        F.lit(1).alias("__g"),
        F.when(left_emits, F.col("r_ts")).otherwise(F.col("l_ts")).alias("__t"),
        F.lit("").alias("__sd"),
        F.lit("").alias("__k"),
        F.least("l_seq", "r_seq").alias("__a"),
    )


def join_stream_stream(
    events: DataFrame, store: DataFrame, clock: DataFrame, join: Join, *, keeps: tuple[str, ...] | None = None
) -> StreamStreamStep:
    """Join the batch's left (L) and right (R) stream records with each other and the carried store.

    :param store: the window store (:func:`store_schema`) carried from earlier batches.
    :param clock: per task stream time and row count (``CLOCK_SCHEMA``).
    """
    assert join.window is not None
    before, after, grace = join.window.before, join.window.after, join.grace
    if keeps is None:
        keeps = {Kind.INNER: (), Kind.LEFT: ("L",), Kind.OUTER: ("L", "R")}[join.kind]
    # cached: the clock's sort over the batch feeds the matches, the pending records, the store and the clock
    rows = with_task_clock(events, clock, F.col("ts")).persist()
    close = F.col("ts") + F.when(F.col("side") == "L", F.lit(after)).otherwise(F.lit(before)) + grace
    rows = rows.withColumn("__close", close).withColumn("__late", F.col("__close") < F.col("__st"))
    late = rows.filter("__late").drop("__late", "__close", "__adv")
    batch = rows.filter(~F.col("__late"))
    carried = store.withColumn("__seq", F.col("seq")).withColumn(
        "__close", F.col("ts") + F.when(F.col("side") == "L", F.lit(after)).otherwise(F.lit(before)) + grace
    )
    matches = _matches(batch, carried, before, after).persist()  # feeds the results and the store

    # pending candidates: carried pending records and the batch's unmatched records of a kept side
    first_l = matches.groupBy("__task", F.col("l_seq").alias("__cand")).agg(F.min("__emit").alias("__m"))
    first_r = matches.groupBy("__task", F.col("r_seq").alias("__cand")).agg(F.min("__emit").alias("__m"))
    first_match = first_l.withColumn("side", F.lit("L")).unionByName(first_r.withColumn("side", F.lit("R")))
    kept = F.col("side").isin(*keeps) if keeps else F.lit(False)
    fresh = batch.filter(kept).select(
        "key",
        "side",
        "lval",
        "rval",
        "ts",
        "__task",
        F.col("__seq").alias("__cand"),
        F.col("__close").alias("__probe"),
        F.col("topic").alias("src_topic"),
        F.col("__partition").alias("src_partition"),
        F.col("__offset").alias("src_offset"),
    )
    old = carried.filter("pending").select(
        "key",
        "side",
        "lval",
        "rval",
        "ts",
        "__task",
        F.col("seq").alias("__cand"),
        F.col("__close").alias("__probe"),
        *SRC,
    )
    candidates = fresh.unionByName(old).join(first_match, ["__task", "side", "__cand"], "left")
    # a batch record matched when it was stored never becomes pending
    candidates = candidates.filter(F.col("__m").isNull() | (F.col("__m") > F.col("__cand")))
    probed = first_reaching(batch.filter("__adv"), candidates, strict=True)
    expires = F.col("__hit").isNotNull() & (F.col("__m").isNull() | (F.col("__m") > F.col("__hit")))
    probed = probed.withColumn("__expires", expires)
    positions = batch.select("__task", F.col("__seq").alias("__hit"), *ORDER)
    expiries = (
        probed.filter("__expires")
        .join(positions, ["__task", "__hit"])
        .select(
            "key",
            F.when(F.col("side") == "L", F.col("lval")).alias("left"),
            F.when(F.col("side") == "R", F.col("rval")).alias("right"),
            "ts",
            F.lit(False).alias("matched"),
            "__task",
            *ORDER,
            *SRC,
            F.col("__hit").alias("__emit"),
            F.lit(0).alias("__g"),
            F.col("ts").alias("__t"),
            F.col("side").alias("__sd"),
            F.col("key").alias("__k"),
            F.col("__cand").alias("__a"),
        )
    )
    emitted = expiries.unionByName(matches.drop("l_seq", "r_seq"))
    within_row = Window.partitionBy("__task", "__emit").orderBy("__g", "__t", "__sd", "__k", "__a")
    results = emitted.select(
        *[c for c in RESULT_COLUMNS if c not in ("tomb_out", "__sub")],
        F.lit(False).alias("tomb_out"),
        (F.row_number().over(within_row) - 1).alias("__sub"),
    ).select(*RESULT_COLUMNS)

    still_pending = probed.filter(~F.col("__expires") & F.col("__m").isNull()).select(
        "__task", "side", F.col("__cand").alias("seq"), F.lit(True).alias("__pending")
    )
    stored = batch.select(
        "key",
        "side",
        "lval",
        "rval",
        "ts",
        F.col("__seq").alias("seq"),
        F.col("topic").alias("src_topic"),
        F.col("__partition").alias("src_partition"),
        F.col("__offset").alias("src_offset"),
        "__task",
    ).unionByName(store.drop("pending"))
    new_clock = (
        rows.groupBy("__task")
        .agg(F.max("__st").alias("stream_time"), F.max("__seq").alias("seq"))
        .unionByName(clock)
        .groupBy("__task")
        .agg(F.max("stream_time").alias("stream_time"), F.max("seq").alias("seq"))
    )
    horizon = F.col("stream_time") - (before + after + grace)
    new_store = (
        stored.join(still_pending, ["__task", "side", "seq"], "left")
        .withColumn("pending", F.coalesce(F.col("__pending"), F.lit(False)))
        .join(F.broadcast(new_clock.select("__task", "stream_time")), "__task")
        .filter(F.col("ts") >= horizon)
        .select(*STORE_COLUMNS)
    )
    return StreamStreamStep(results=results, late=late, store=new_store, clock=new_clock, cached=(rows, matches))
