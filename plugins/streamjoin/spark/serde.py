"""Column expressions that decode Kafka bytes into typed values and encode results back, per spec Serde.

A decoded value comes with an ``error`` column: a non-null reason marks a record for the dead-letter topic.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamjoin.core.join_plan import UNDECODABLE
from streamjoin.core.spec import FieldType, Format, Serde

_SPARK_TYPES: dict[FieldType, T.DataType] = {
    FieldType.STRING: T.StringType(),
    FieldType.LONG: T.LongType(),
    FieldType.DOUBLE: T.DoubleType(),
    FieldType.BOOLEAN: T.BooleanType(),
}
_CORRUPT = "_corrupt_record"


def spark_type(serde: Serde) -> T.DataType:
    """The Spark type a value of this serde decodes to."""
    if serde.format is Format.STRING:
        return T.StringType()
    if serde.format is Format.LONG:
        return T.LongType()
    assert serde.fields is not None
    return T.StructType([T.StructField(name, _SPARK_TYPES[ftype]) for name, ftype in serde.fields.items()])


def decode(raw: Column, serde: Serde) -> tuple[Column, Column]:
    """``(value, error)`` for the bytes column ``raw``; null bytes decode to a null value without error."""
    if serde.format is Format.STRING:
        return raw.cast("string"), F.lit(None).cast("string")
    if serde.format is Format.LONG:
        # big-endian two's complement: conv with a negative base reads the 16 hex digits as a signed long
        signed = F.conv(F.hex(raw), 16, -10).cast("long")
        ok = F.length(raw) == 8
        error = F.when(
            raw.isNotNull() & ~ok,
            F.concat(F.lit(f"{UNDECODABLE}-value: long needs 8 bytes, got "), F.length(raw).cast("string")),
        )
        return F.when(ok, signed), error
    struct_type = spark_type(serde)
    assert isinstance(struct_type, T.StructType)
    with_corrupt = T.StructType([*struct_type.fields, T.StructField(_CORRUPT, T.StringType())])
    parsed = F.from_json(
        raw.cast("string"), with_corrupt, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}
    )
    bad = raw.isNotNull() & (parsed.isNull() | parsed[_CORRUPT].isNotNull())
    value = F.when(~bad & raw.isNotNull(), F.struct(*[parsed[f.name].alias(f.name) for f in struct_type.fields]))
    error = F.when(
        bad,
        F.concat(
            F.lit(f"{UNDECODABLE}-value: not JSON matching the schema: "), F.substring(raw.cast("string"), 1, 200)
        ),
    )
    return value, error


def encode(value: Column, fmt: Format) -> Column:
    """Bytes for a result value; null stays null (a tombstone)."""
    if fmt is Format.STRING:
        return value.cast("string").cast("binary")
    if fmt is Format.LONG:
        return F.when(value.isNotNull(), F.unhex(F.lpad(F.hex(value.cast("long")), 16, "0")))
    # keep null fields: a left join result must say {"right": null}, not drop the field
    return F.when(value.isNotNull(), F.to_json(value, {"ignoreNullFields": "false"}).cast("binary"))


def encode_long_text(value: Column) -> Column:
    """A long as UTF-8 decimal text (used for the ``ts`` header)."""
    return value.cast("string").cast("binary")
