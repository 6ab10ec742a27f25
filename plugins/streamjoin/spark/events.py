"""From Kafka-shaped rows to the engine's event rows, plus dead letters, plus the processing order.

Kafka-shaped rows have the Kafka source's columns: ``key``, ``value`` (binary), ``topic``, ``partition``,
``offset`` and ``ts`` (epoch ms). Event rows have one column set for every input of the join:

=============  =================================================================================
``side``       ``"L"`` or ``"R"``: which side of the join the record belongs to
``key``        the record key as text (a ``long`` key as its decimal digits: see :func:`decode_key`)
``lval``       the decoded value of a left record (type of the left input), else null
``rval``       the decoded value of a right record, else null
``tomb``       the record's value is null (a tombstone on a table)
``ts``         record timestamp, epoch ms
``__task``     the task the record belongs to: its partition for co-partitioned inputs
``__rank``     0 global table, 1 table, 2 stream: at equal time, table updates go first
``__input``    position of the record's input in the spec
``__partition``, ``__offset``: source coordinates, last tie-breakers
=============  =================================================================================

The kernel processes them in the batch ordering rule (see docs/SEMANTICS.md, "Batch ordering rule"): by
effective timestamp (``__eff``: the running max of ``ts`` within the record's topic-partition), then
``__rank``, ``__input``, ``__partition`` and ``__offset``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamjoin.core.join_plan import UNDECODABLE
from streamjoin.core.shapes import ROLE_RANK
from streamjoin.core.spec import Format, Kind, PipelineSpec, Role, Shape
from streamjoin.kafka.schema_registry import AvroSchemas, batch_schemas
from streamjoin.spark.projection import key_selector
from streamjoin.spark.serde import decode, spark_type
from streamjoin.spark.templates import templated

#: the order of the kernel's rows (its results' columns; ``__pos`` is ``__eff * 4 + __rank``)
ORDER = ["__pos", "__input", "__partition", "__offset"]
#: Columns of the decoded batch that only dead letters use: the original bytes (null on good rows).
DEAD_KEY, DEAD_VALUE = "__dead_key", "__dead_value"
#: A self-join's copy of a record: ``L`` or ``R``, the side it is decoded for (a record is on both).
SELF_SIDE = "__self_side"
#: Global-table joins with a key selector: the table key each stream record looks up (computed once).
LOOKUP_KEY = "__lookup"


def decode_batch(
    raw: DataFrame, spec: PipelineSpec, spec_json: str | None = None, *, left_records: bool = True
) -> DataFrame:
    """Decode both sides' records into event columns, in one frame with the records that cannot be
    processed (``reason`` set, original bytes in ``__dead_key``/``__dead_value``): the one frame a caller
    caches per batch; :func:`rejected_records` are its dead letters. Built once per pipeline
    (:func:`~streamjoin.spark.templates.templated`; ``spec_json``: the spec's JSON if the caller has it), and
    for Avro inputs once per set of their subjects' versions (listed from the registry every batch).

    :param left_records: ``raw`` may hold the left input's records; False: a chained stage's left records are
        the previous stage's results (``spark/chain.py``), ``raw`` holds only its right input's
    """
    avro = batch_schemas(spec)
    name = " ".join([f"decode {left_records} {spec_json or spec.model_dump_json()}", *(a.key for a in avro.values())])
    return templated(raw, name, lambda rows: _decode(rows, spec, avro, left_records))


def _decode(raw: DataFrame, spec: PipelineSpec, avro: dict[str, AvroSchemas], left_records: bool = True) -> DataFrame:
    join = spec.join
    left, right = spec.left, spec.right
    lavro, ravro = avro.get(left.topic), avro.get(right.topic)
    no_value = F.lit(None).cast("string")
    lval, lerr = decode(F.col("value"), left.value, lavro) if left_records else (no_value, no_value)
    rval, rerr = decode(F.col("value"), right.value, ravro)
    if left_records and join.left == join.right:  # a self-join (KIP-862): each record on both sides
        # the right copies first: the kernel's order, not the rows' arrival, puts a record's left side first
        raw = raw.withColumn(SELF_SIDE, F.lit("R")).unionByName(raw.withColumn(SELF_SIDE, F.lit("L")))
        is_left = F.col(SELF_SIDE) == F.lit("L")
    else:
        is_left = F.col("topic") == F.lit(left.topic) if left_records else F.lit(False)
    names = list(spec.inputs)
    key, key_err = decode_key(is_left, spec)
    null_join_key = F.col("key").isNull()
    staged = raw
    if join.shape is Shape.STREAM_GLOBALTABLE and join.key_selector is not None and not left_records:
        staged = raw.withColumn(LOOKUP_KEY, no_value)
    elif join.shape is Shape.STREAM_GLOBALTABLE and join.key_selector is not None:
        # the lookup key comes from the stream record's value (a stream record without a key may have one)
        lookup = key_selector(join.key_selector)  # over columns key (string) and lval
        staged = (
            raw.withColumn("__raw_key", F.col("key"))
            .withColumn("key", key)
            .withColumn("lval", F.when(is_left & lerr.isNull(), lval))
            .withColumn(LOOKUP_KEY, F.when(F.col("lval").isNotNull(), lookup))
            .withColumn("key", F.col("__raw_key"))
            .drop("__raw_key", "lval")
        )
        # a stream record's join key is its lookup key (the selector's, when its value gives one)
        has_lookup = is_left & lerr.isNull() & F.col("value").isNotNull()
        null_join_key = F.when(has_lookup, F.col(LOOKUP_KEY).isNull()).otherwise(F.col("key").isNull())
    stream_side = (is_left & F.lit(left.role is Role.STREAM)) | (~is_left & F.lit(right.role is Role.STREAM))
    # KIP-962: a null join key is joined with null on a side the join keeps, else dropped (dead letter)
    outer_sides = null_key_sides(spec)
    keeps_null_key = (is_left & F.lit("L" in outer_sides)) | (~is_left & F.lit("R" in outer_sides))
    reason = (
        F.when(~keeps_null_key & null_join_key, F.lit("null-key"))
        .when(key_err.isNotNull(), key_err)
        .when(is_left & lerr.isNotNull(), lerr)
        .when(~is_left & rerr.isNotNull(), rerr)
        .when(stream_side & F.col("value").isNull(), F.lit("null-value"))
    )
    staged = staged.withColumn("reason", reason)
    lookup_column = [F.col(LOOKUP_KEY)] if LOOKUP_KEY in staged.columns else []
    dead = F.col("reason").isNotNull()
    rank_left, rank_right = ROLE_RANK[left.role], ROLE_RANK[right.role]
    decoded = staged.select(
        F.when(is_left, F.lit("L")).otherwise(F.lit("R")).alias("side"),
        key.alias("key"),
        (F.when(is_left & ~dead, lval).cast(spark_type(left.value, lavro)) if left_records else no_value).alias("lval"),
        F.when(~is_left & ~dead, rval).cast(spark_type(right.value, ravro)).alias("rval"),
        F.col("value").isNull().alias("tomb"),
        F.col("ts").cast("long").alias("ts"),
        F.col("partition").cast("int").alias("__task"),
        F.when(is_left, F.lit(rank_left)).otherwise(F.lit(rank_right)).alias("__rank"),
        F.when(is_left, F.lit(names.index(join.left))).otherwise(F.lit(names.index(join.right))).alias("__input"),
        F.col("partition").cast("int").alias("__partition"),
        F.col("offset").cast("long").alias("__offset"),
        F.col("topic"),
        F.col("reason"),
        F.when(dead, F.col("key")).alias(DEAD_KEY),
        F.when(dead, F.col("value")).alias(DEAD_VALUE),
        *lookup_column,
    )
    if join.foreign_key is not None and not left_records:
        decoded = decoded.withColumn(LOOKUP_KEY, no_value)
    elif join.foreign_key is not None:  # a left value's foreign key (a function is called for live values only)
        live_left = (F.col("side") == "L") & ~F.col("tomb") & F.col("reason").isNull()
        fk = key_selector(join.foreign_key, value="value")
        decoded = decoded.withColumn("value", F.col("lval")).withColumn(LOOKUP_KEY, F.when(live_left, fk))
        decoded = decoded.drop("value")
    return decoded


def decode_key(is_left: Column, spec: PipelineSpec) -> tuple[Column, Column]:
    """``(key, error)`` of the record key per its input's ``key.format``. The key column is text: a
    ``long`` key (Java LongSerializer, 8 bytes big-endian) as its decimal digits, so equal longs are equal
    keys and every state keeps one key type; :func:`output_key` turns it back into a long for the sinks. An
    ``avro``, ``protobuf`` or ``json_schema`` key is its serialized bytes in hex (the wire header included: keys
    match when their bytes do, as in Kafka Streams' stores), :func:`output_key` the bytes again."""
    keys = []
    for serde in (spec.left.key, spec.right.key):
        if serde.format.in_registry:
            raw = F.col("key")
            wire = (F.length(raw) >= 5) & (F.hex(F.substring(raw, 1, 1)) == F.lit("00"))
            error = F.when(
                raw.isNotNull() & ~wire,
                F.concat(F.lit(f"{UNDECODABLE}-key: not the Confluent wire format (magic byte 0, 4-byte schema id): "
                               "starts with 0x"), F.hex(F.substring(raw, 1, 5))),
            )  # fmt: skip
            keys.append((F.when(wire, F.hex(raw)), error))
        elif serde.format is Format.LONG:
            raw = F.col("key")
            ok = F.length(raw) == 8
            error = F.when(
                raw.isNotNull() & ~ok,
                F.concat(F.lit(f"{UNDECODABLE}-key: long needs 8 bytes, got "), F.length(raw).cast("string")),
            )
            keys.append((F.when(ok, F.conv(F.hex(raw), 16, -10)), error))
        else:
            keys.append((F.col("key").cast("string"), F.lit(None).cast("string")))
    (lkey, lerr), (rkey, rerr) = keys
    return F.when(is_left, lkey).otherwise(rkey), F.when(is_left, lerr).otherwise(rerr)


def output_key(key: Column, spec: PipelineSpec) -> Column:
    """A join result's key in its type on the topic: the left input's key format (a long for ``long``, the
    serialized bytes for a registry format)."""
    fmt = spec.left.key.format
    if fmt.in_registry:
        return F.unhex(key)
    return key.cast("long") if fmt is Format.LONG else key


def null_key_sides(spec: PipelineSpec) -> tuple[str, ...]:
    """The sides (``"L"``, ``"R"``) whose stream records are joined with null when their join key is null
    (KIP-962): the left side of a left or outer join with a stream result, the right side of a
    stream-stream outer join."""
    join = spec.join
    if join.shape not in (Shape.STREAM_STREAM, Shape.STREAM_TABLE, Shape.STREAM_GLOBALTABLE):
        return ()
    if join.kind is Kind.OUTER and join.shape is Shape.STREAM_STREAM:
        return ("L", "R")
    return ("L",) if join.kind in (Kind.LEFT, Kind.OUTER) else ()


def rejected_records(batch: DataFrame) -> DataFrame:
    """Kafka-shaped rows (original key and value bytes) of the records that cannot be processed, with ``reason``."""
    return batch.filter(F.col("reason").isNotNull()).select(
        F.col(DEAD_KEY).alias("key"),
        F.col(DEAD_VALUE).alias("value"),
        "topic",
        F.col("__partition").alias("partition"),
        F.col("__offset").alias("offset"),
        "ts",
        "reason",
    )


@dataclass(frozen=True)
class BatchSummary:
    """Counts of a decoded batch and each topic-partition's max timestamp, from one small Spark job."""

    #: ``(topic, partition) -> max ts`` of the records that move partition time (None: the partition had
    #: only undecodable ones)
    max_ts: dict[tuple[str, int], int | None]
    rows: int
    rejected: int
    #: good records per side (``"L"``, ``"R"``)
    good: dict[str, int]


def summarize(batch: DataFrame) -> BatchSummary:
    """Summarise a decoded batch (best cached first: this runs a job over it)."""
    # as in Kafka Streams, a record that deserializes moves partition time even when the join then skips it
    # (null-key, null-value); an undecodable one (dropped inside the RecordQueue) does not
    good_ts = F.when(F.col("reason").isNull() | ~F.col("reason").startswith(UNDECODABLE), F.col("ts"))
    rows = (
        batch.groupBy("topic", "__partition", "side")
        .agg(F.count(F.lit(1)).alias("rows"), F.count("reason").alias("rejected"), F.max(good_ts).alias("max_ts"))
        .collect()
    )
    return _summary((r["topic"], r["__partition"], r["side"], r["rows"], r["rejected"], r["max_ts"]) for r in rows)


def summary_from_text(text: str) -> BatchSummary | None:
    """The summary the kernel gathered as it read the batch (its ``BatchSummary`` accumulator's text: a line
    ``topic, partition, side, rows, rejected, max ts`` per queue, tab-separated); None for no text (the batch
    has not run yet)."""
    if not text:
        return None
    queues = [line.split("\t") for line in text.splitlines()]
    return _summary((t, int(p), side, int(n), int(r), int(ts) if ts else None) for t, p, side, n, r, ts in queues)


def _summary(queues: Iterable[tuple[str, int, str, int, int, int | None]]) -> BatchSummary:
    """A batch's summary from each (topic, partition, side)'s rows, rejected rows and max partition-time ts."""
    max_ts: dict[tuple[str, int], int | None] = {}
    good = {"L": 0, "R": 0}
    total = rejected_total = 0
    for topic, partition, side, rows, rejected, ts in queues:
        known = [t for t in (max_ts.get((topic, partition)), ts) if t is not None]
        max_ts[(topic, partition)] = max(known) if known else None
        good[side] += rows - rejected
        total, rejected_total = total + rows, rejected_total + rejected
    return BatchSummary(max_ts=max_ts, rows=total, rejected=rejected_total, good=good)
