"""Windowed stream-stream joins (inner, left, outer), vectorised over one micro-batch, as Kafka Streams.

Window ``before=10, after=10, grace=0``; stream time = max ts seen by the task (both inputs):

=======  ===============  ===============  ===================================================
Time     Left stream      Right stream     Output
=======  ===============  ===============  ===================================================
t=0      A: view                           (stored; left/outer: pending, close 0+10+0 = 10)
t=1                       A: click         A: (view, click), ts 1; A is no longer pending
t=5      B: view                           (stored; pending, close 15)
t=16                      C: click         left/outer: B: (view, null), ts 5 (close 15 < 16),
                                           then C is stored (outer: pending, close 26)
t=3      D: view                           out of order, window end 13 < 16, no click D:
                                           left/outer: D: (view, null), ts 3, at once
=======  ===============  ===============  ===================================================

Rules, per task, records in ``ORDER`` (stream time is advanced before a record is processed; ``end`` =
``ts + after`` (left) or ``ts + before`` (right), ``close = end + grace``, ``retention = before + after +
grace``; a side's time = max ts of the keyed records of that side so far):

1. a keyed record with ``ts == stream time`` first emits every pending record whose close is below
   stream time, ordered (ts, right before left, key), as ``joiner(l, None)`` / ``joiner(None, r)`` at the
   pending record's own ts;
2. then joins every record of the other side with ``l.ts - before <= r.ts <= l.ts + after`` that is still
   in that side's store (``ts + retention > that side's time``), in (ts, arrival) order, at
   ``max(l.ts, r.ts)``; a joined record stops being pending; nothing is dropped as late;
3. without a match, on a side the kind keeps: ``end < stream time``: ``(r, null)`` at once, else pending;
4. it is stored if ``ts + retention > its side's time``. A null-key record (on a kept side: the others
   are dead letters) is joined with null at once and not stored (KIP-962).

Vectorised: a per-task running max gives each row its stream time and both sides' times; matches are a
key-equi join of the batch with itself and the carried window store, emitted at the later row; a
pending record is emitted at the first keyed row at stream time whose stream time exceeds its close
(:func:`first_reaching`) unless it matched earlier.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from streamjoin.core.spec import Join, Kind
from streamjoin.spark.events import LONG_MIN, ORDER, serialized_key

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
CLOCK_SCHEMA = "__task int, stream_time long, seq long, left_time long, right_time long"
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
        cols += [F.col("__ot").alias(f"{p}_ot")]
        cols += [F.col(c).alias(f"{p}_{c}") for c in ORDER]
        cols += [F.col("topic").alias(f"{p}_src_topic"), F.col("__partition").alias(f"{p}_src_partition")]
        cols += [F.col("__offset").alias(f"{p}_src_offset")]
    else:
        cols += [F.lit(None).cast("long").alias(f"{p}_ot")]
        cols += [F.lit(None).alias(f"{p}_{c}") for c in [*ORDER, *SRC]]
    return rows.filter(F.col("side") == side).select(*cols)


def _matches(batch: DataFrame, store: DataFrame, before: int, after: int, retention: int) -> DataFrame:
    """Every joining pair with at least one batch row, emitted at the later-processed row, whose earlier
    row is still in its side's store when the later one is processed (``ts + retention > side time``)."""
    window = (F.col("r_ts") >= F.col("l_ts") - before) & (F.col("r_ts") <= F.col("l_ts") + after)
    left_emits = F.col("l_seq") > F.col("r_seq")
    visible = F.when(left_emits, F.col("r_ts") + retention > F.col("l_ot")).otherwise(
        F.col("l_ts") + retention > F.col("r_ot")
    )
    joins = window & visible
    bl, br = _side(batch, "L", True), _side(batch, "R", True)
    sl, sr = _side(store, "L", False), _side(store, "R", False)
    pairs = bl.join(br.unionByName(sr), ["key", "__task"]).filter(joins)
    pairs = pairs.unionByName(sl.join(br, ["key", "__task"]).filter(joins))

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
    events: DataFrame,
    store: DataFrame,
    clock: DataFrame,
    join: Join,
    *,
    keeps: tuple[str, ...] | None = None,
    long_keys: bool = False,
) -> StreamStreamStep:
    """Join the batch's left (L) and right (R) stream records with each other and the carried store.

    :param store: the window store (:func:`store_schema`) carried from earlier batches.
    :param clock: per task stream time, row count and each side's time (``CLOCK_SCHEMA``).
    :param long_keys: the keys are longs (their text is decimal digits): held results in Kafka's key order.
    """
    assert join.window is not None
    before, after, grace = join.window.before, join.window.after, join.grace
    retention = before + after + grace
    if keeps is None:
        keeps = {Kind.INNER: (), Kind.LEFT: ("L",), Kind.OUTER: ("L", "R")}[join.kind]
    keyed = F.col("key").isNotNull()
    is_left = F.col("side") == "L"
    running = Window.partitionBy("__task").orderBy(*ORDER).rowsBetween(Window.unboundedPreceding, 0)

    def side_time(side: str, carried: str) -> Column:
        """The side's time after each row: max ts of the side's keyed rows so far (LONG_MIN: none)."""
        own = F.max(F.when(keyed & (F.col("side") == side), F.col("ts"))).over(running)
        return F.greatest(F.coalesce(own, F.lit(LONG_MIN)), F.coalesce(F.col(carried), F.lit(LONG_MIN)))

    # cached: the clock's sort over the batch feeds the matches, the pending records, the store and the clock
    rows = (
        with_task_clock(events, clock, F.col("ts"))
        .withColumn("__lt", side_time("L", "left_time"))
        .withColumn("__rt", side_time("R", "right_time"))
        .drop("left_time", "right_time")
        .withColumn("__ot", F.when(is_left, F.col("__rt")).otherwise(F.col("__lt")))
        .withColumn("__own", F.when(is_left, F.col("__lt")).otherwise(F.col("__rt")))
        .persist()
    )
    end_offset = F.when(is_left, F.lit(after)).otherwise(F.lit(before))
    batch = rows.withColumn("__end", F.col("ts") + end_offset).withColumn("__close", F.col("__end") + grace)
    carried = store.withColumn("__seq", F.col("seq")).withColumn("__close", F.col("ts") + end_offset + grace)
    matches = _matches(batch.filter(keyed), carried, before, after, retention).persist()  # results and store

    # pending candidates: carried pending records and the batch's unmatched keyed records of a kept side
    first_l = matches.groupBy("__task", F.col("l_seq").alias("__cand")).agg(F.min("__emit").alias("__m"))
    first_r = matches.groupBy("__task", F.col("r_seq").alias("__cand")).agg(F.min("__emit").alias("__m"))
    first_match = first_l.withColumn("side", F.lit("L")).unionByName(first_r.withColumn("side", F.lit("R")))
    kept = F.col("side").isin(*keeps) if keeps else F.lit(False)
    fresh = batch.filter(kept & keyed).select(
        "key",
        "side",
        "lval",
        "rval",
        "ts",
        "__task",
        F.col("__seq").alias("__cand"),
        F.col("__close").alias("__probe"),
        # window end already behind stream time: emitted with null at once when unmatched
        (F.col("__end") < F.col("__st")).alias("__now"),
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
        F.lit(False).alias("__now"),
        *SRC,
    )
    candidates = fresh.unionByName(old).join(first_match, ["__task", "side", "__cand"], "left")
    # a batch record matched when it was processed never becomes pending
    candidates = candidates.filter(F.col("__m").isNull() | (F.col("__m") > F.col("__cand")))
    positions = batch.select("__task", F.col("__seq").alias("__hit"), *ORDER)

    def non_joined(frame: DataFrame, emit: str, group: int) -> DataFrame:
        """``(l, null)`` / ``(null, r)`` at the record's own ts, emitted at row ``emit`` (``__hit``)."""
        return frame.join(positions, ["__task", "__hit"]).select(
            "key",
            F.when(F.col("side") == "L", F.col("lval")).alias("left"),
            F.when(F.col("side") == "R", F.col("rval")).alias("right"),
            "ts",
            F.lit(False).alias("matched"),
            "__task",
            *ORDER,
            *SRC,
            F.col(emit).alias("__emit"),
            F.lit(group).alias("__g"),
            F.col("ts").alias("__t"),
            # Kafka's outer-join store order: ts, then the right side (0) before the left (1), then the key bytes
            F.when(F.col("side") == "R", F.lit("0")).otherwise(F.lit("1")).alias("__sd"),
            serialized_key(F.col("key"), long_keys).alias("__k"),
            F.col("__cand").alias("__a"),
        )

    at_once = candidates.filter("__now").withColumn("__hit", F.col("__cand"))
    waiting = candidates.filter(~F.col("__now"))
    points = batch.filter(keyed & (F.col("ts") == F.col("__st")))
    probed = first_reaching(points, waiting, strict=True)
    expires = F.col("__hit").isNotNull() & (F.col("__m").isNull() | (F.col("__m") > F.col("__hit")))
    probed = probed.withColumn("__expires", expires)
    null_keys = batch.filter(kept & ~keyed).select(
        "key",
        "side",
        "lval",
        "rval",
        "ts",
        "__task",
        F.col("__seq").alias("__cand"),
        F.col("__seq").alias("__hit"),
        F.col("topic").alias("src_topic"),
        F.col("__partition").alias("src_partition"),
        F.col("__offset").alias("src_offset"),
    )
    emitted = (
        non_joined(probed.filter("__expires"), "__hit", 0)
        .unionByName(non_joined(at_once, "__hit", 2))
        .unionByName(non_joined(null_keys, "__hit", 2))
        .unionByName(matches.drop("l_seq", "r_seq"))
    )
    within_row = Window.partitionBy("__task", "__emit").orderBy("__g", "__t", "__sd", "__k", "__a")
    results = emitted.select(
        *[c for c in RESULT_COLUMNS if c not in ("tomb_out", "__sub")],
        F.lit(False).alias("tomb_out"),
        (F.row_number().over(within_row) - 1).alias("__sub"),
    ).select(*RESULT_COLUMNS)

    still_pending = probed.filter(~F.col("__expires") & F.col("__m").isNull()).select(
        "__task", "side", F.col("__cand").alias("seq"), F.lit(True).alias("__pending")
    )
    store_row: list[Column | str] = [
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
    ]
    # a keyed record is put into its side's store unless it is already behind that side's retention
    stored = batch.filter(keyed & (F.col("ts") + retention > F.col("__own"))).select(*store_row)
    # a pending record that is not stored any more is kept (as pending only: it cannot be joined)
    pending_unstored = batch.filter(keyed & (F.col("ts") + retention <= F.col("__own"))).select(*store_row)
    stored = stored.unionByName(
        pending_unstored.join(still_pending.select("__task", "side", "seq"), ["__task", "side", "seq"])
    ).unionByName(store.drop("pending"))
    side_max = (
        rows.filter(keyed)
        .groupBy("__task")
        .agg(
            F.max(F.when(is_left, F.col("ts"))).alias("left_time"),
            F.max(F.when(~is_left, F.col("ts"))).alias("right_time"),
        )
    )
    new_clock = (
        rows.groupBy("__task")
        .agg(F.max("__st").alias("stream_time"), F.max("__seq").alias("seq"))
        .join(side_max, "__task", "left")
        .unionByName(clock)
        .groupBy("__task")
        .agg(*[F.max(c).alias(c) for c in ("stream_time", "seq", "left_time", "right_time")])
    )
    side_now = F.when(F.col("side") == "L", F.col("left_time")).otherwise(F.col("right_time"))
    new_store = (
        stored.join(still_pending, ["__task", "side", "seq"], "left")
        .withColumn("pending", F.coalesce(F.col("__pending"), F.lit(False)))
        .join(F.broadcast(new_clock.select("__task", "left_time", "right_time")), "__task")
        .filter(F.col("pending") | side_now.isNull() | (F.col("ts") + retention > side_now))
        .select(*STORE_COLUMNS)
    )
    return StreamStreamStep(results=results, store=new_store, clock=new_clock, cached=(rows, matches))
