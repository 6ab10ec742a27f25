"""Column expressions that decode Kafka bytes into typed values and encode results back, per spec Serde.

A decoded value comes with an ``error`` column: a non-null reason marks a record for the dead-letter topic.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamjoin.core.avro import wire_header
from streamjoin.core.errors import SpecError
from streamjoin.core.join_plan import UNDECODABLE
from streamjoin.core.spec import FieldType, Format, Serde, Sink
from streamjoin.spark.json_schema import json_schema_spark_type

if TYPE_CHECKING:
    from streamjoin.kafka.schema_registry import AvroSchemas

_SPARK_TYPES: dict[FieldType, T.DataType] = {
    FieldType.STRING: T.StringType(),
    FieldType.LONG: T.LongType(),
    FieldType.DOUBLE: T.DoubleType(),
    FieldType.BOOLEAN: T.BooleanType(),
}
_CORRUPT = "_corrupt_record"
#: the field an Avro reader schema gets to tell decoded records from those PERMISSIVE mode gave up on
_DECODED = "__streamjoin_decoded"


def spark_type(serde: Serde, avro: AvroSchemas | None = None) -> T.DataType:
    """The Spark type a value of this serde decodes to (an Avro value: its reader schema's, from ``avro``)."""
    if serde.format is Format.STRING:
        return T.StringType()
    if serde.format is Format.LONG:
        return T.LongType()
    if serde.format is Format.AVRO:
        assert avro is not None, "an Avro serde decodes with its batch's schemas"
        return reader_type(avro)
    if serde.format is Format.PROTOBUF:
        assert avro is not None, "a Protobuf serde decodes with its batch's schemas"
        from streamjoin.kafka import protobuf

        return protobuf.spark_type(*_protobuf_reader(serde, avro), avro.subject)
    if serde.format is Format.JSON_SCHEMA and not serde.fields:
        assert avro is not None, "a json_schema serde without 'schema' decodes with its subject's latest schema"
        return json_schema_spark_type(json.loads(avro.reader), avro.subject)
    assert serde.fields is not None
    return T.StructType([T.StructField(name, _SPARK_TYPES[ftype]) for name, ftype in serde.fields.items()])


def decode(raw: Column, serde: Serde, avro: AvroSchemas | None = None) -> tuple[Column, Column]:
    """``(value, error)`` for the bytes column ``raw``; null bytes decode to a null value without error.

    :param avro: an Avro serde's schemas in this batch (:func:`~streamjoin.kafka.schema_registry.input_schemas`)
    """
    if serde.format is Format.AVRO:
        assert avro is not None, "an Avro serde decodes with its batch's schemas"
        return _decode_avro(raw, avro)
    if serde.format is Format.PROTOBUF:
        assert avro is not None, "a Protobuf serde decodes with its batch's schemas"
        return _decode_protobuf(raw, serde, avro)
    if serde.format is Format.JSON_SCHEMA:
        assert avro is not None, "a json_schema serde decodes with its batch's schemas"
        return _decode_json_schema(raw, serde, avro)
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
    value, bad = _from_json(raw.cast("string"), spark_type(serde))
    error = F.when(
        bad,
        F.concat(
            F.lit(f"{UNDECODABLE}-value: not JSON matching the schema: "), F.substring(raw.cast("string"), 1, 200)
        ),
    )
    return value, error


def _from_json(text: Column, struct_type: T.DataType) -> tuple[Column, Column]:
    """``(value, bad)``: ``text`` parsed by ``from_json`` into ``struct_type`` (PERMISSIVE); ``bad`` is true for a
    non-null text that is not JSON matching it."""
    assert isinstance(struct_type, T.StructType)
    with_corrupt = T.StructType([*struct_type.fields, T.StructField(_CORRUPT, T.StringType())])
    parsed = F.from_json(text, with_corrupt, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT})
    bad = text.isNotNull() & (parsed.isNull() | parsed[_CORRUPT].isNotNull())
    value = F.when(~bad & text.isNotNull(), F.struct(*[parsed[f.name].alias(f.name) for f in struct_type.fields]))
    return value, bad


def _wire_header(
    raw: Column, schemas: AvroSchemas, *, after_id: str = "", length: int = 5
) -> tuple[Column, Column, Column, Column]:
    """Confluent's wire header of ``raw`` (magic byte 0, a 4-byte big-endian schema id, then ``after_id``, at least
    ``length`` bytes): ``(schema id, has the header, the id is one of the subject's, error)``. The error names what
    is wrong with a value without the header or of another subject's id, null for a null value (a tombstone); the
    caller adds its payload's errors to it (``error.when(...)``)."""
    schema_id = F.conv(F.hex(F.substring(raw, 2, 4)), 16, 10).cast("long")
    wire = (F.length(raw) >= length) & (F.hex(F.substring(raw, 1, 1)) == F.lit("00"))
    known = schema_id.isin(schemas.ids) if schemas.ids else F.lit(False)
    prefix = f"{UNDECODABLE}-value: "
    error = (
        F.when(raw.isNull(), F.lit(None).cast("string"))
        .when(~wire, F.concat(F.lit(f"{prefix}not the Confluent wire format (magic byte 0, 4-byte schema "
                                    f"id{after_id}): starts with 0x"), F.hex(F.substring(raw, 1, length))))
        .when(~known, F.concat(F.lit(f"{prefix}schema id "), schema_id.cast("string"),
                               F.lit(f" is not a version of subject {schemas.subject!r} (its ids: {schemas.ids})")))
    )  # fmt: skip
    return schema_id, wire, known, error


def _decode_json_schema(raw: Column, serde: Serde, schemas: AvroSchemas) -> tuple[Column, Column]:
    """Confluent's JSON Schema wire format (magic byte 0, 4-byte schema id, the JSON text): a record of one of the
    subject's ids is parsed by ``from_json`` into :func:`spark_type` (the path ``json`` values take). Anything
    else has an error naming the id (see :func:`_decode_avro`)."""
    schema_id, wire, known, error = _wire_header(raw, schemas)
    text = F.substring(raw, 6, 1 << 30).cast("string")
    parsed, bad = _from_json(text, spark_type(serde, schemas))
    prefix, of = f"{UNDECODABLE}-value: ", f" of subject {schemas.subject!r}"
    error = (
        error.when(bad, F.concat(F.lit(f"{prefix}the JSON text of schema id "), schema_id.cast("string"),
                            F.lit(f"{of} is not JSON matching its fields: "), F.substring(text, 1, 200)))
    )  # fmt: skip
    return F.when(raw.isNotNull() & wire & known, parsed), error


def _decode_avro(raw: Column, avro: AvroSchemas) -> tuple[Column, Column]:
    """Confluent's wire format: each record's payload read by spark-avro's ``from_avro`` with the writer schema
    of its id (one branch per version of the subject), resolved to the reader schema. A record that is not the
    wire format, whose id is not one of the subject's, or whose payload does not decode (``from_avro``'s
    PERMISSIVE mode gives null) has an error naming the id."""
    from pyspark.sql.avro.functions import from_avro

    schema_id, wire, known, error = _wire_header(raw, avro)
    payload = F.substring(raw, 6, 1 << 30)
    reader_type(avro)  # a reader schema spark-avro cannot map fails here, naming the subject
    reader = json.loads(avro.reader)
    record = isinstance(reader, dict) and reader.get("type") == "record"
    if record:
        # PERMISSIVE gives a struct of nulls for bytes that do not decode: a field only the reader has, with a
        # default, is true on every record that decoded (Avro's resolution fills it in) and null on the others
        reader = {**reader, "fields": [*reader["fields"], {"name": _DECODED, "type": "boolean", "default": True}]}
    options = {"avroSchema": json.dumps(reader), "mode": "PERMISSIVE"}
    decoded: Any = None
    for known_id, writer in avro.writers:
        branch = from_avro(payload, writer, options)
        decoded = (F if decoded is None else decoded).when(schema_id == F.lit(known_id), branch)
    if decoded is None:
        decoded = F.lit(None).cast(avro_spark_type(reader))
    value = F.when(wire & known & (decoded[_DECODED].isNotNull() if record else decoded.isNotNull()), decoded)
    if record:
        value = value.dropFields(_DECODED)
    prefix = f"{UNDECODABLE}-value: "
    error = (
        error.when(value.isNull(), F.concat(F.lit(f"{prefix}the bytes do not decode as Avro with schema id "),
                                       schema_id.cast("string"),
                                       F.lit(f" of subject {avro.subject!r} (malformed or truncated payload)")))
    )  # fmt: skip
    return value, error


def _protobuf_reader(serde: Serde, schemas: AvroSchemas) -> tuple[bytes, str]:
    """The reader's FileDescriptorSet (the subject's latest schema) and message (``record_name``, else the
    schema's first message)."""
    from streamjoin.kafka import protobuf

    fds = protobuf.descriptor_set(schemas.reader, schemas.subject)
    name = serde.full_record_name or protobuf.main_message(fds)
    if name is None:
        raise SpecError("<schema registry>", f"Protobuf schema of subject {schemas.subject!r}", schemas.reader[:200],
                        "a schema with a message")  # fmt: skip
    return fds, name


def _decode_protobuf(raw: Column, serde: Serde, schemas: AvroSchemas) -> tuple[Column, Column]:
    """Confluent's Protobuf wire format: a record of a known schema id whose message indexes name the reader's
    message (in that id's schema, compiled once per process) is parsed with the reader's schema (Protobuf's
    own evolution: fields by number) by the ``protobuf`` package in a UDF. Anything else has an error naming
    the id (see :func:`_decode_avro`)."""
    from streamjoin.kafka import protobuf

    fds, name = _protobuf_reader(serde, schemas)
    value_type = protobuf.spark_type(fds, name, schemas.subject)
    schema_id, wire, _, error = _wire_header(raw, schemas, after_id=", message indexes", length=6)
    start: Any = None  # where the payload starts, for a record whose indexes name the reader's message
    for known_id, writer in schemas.writers:
        indexes = protobuf.message_indexes(protobuf.descriptor_set(writer, schemas.subject), name)
        if indexes is not None:
            named = F.substring(raw, 6, len(indexes)) == F.lit(bytearray(indexes))
            start = (F if start is None else start).when(wire & (schema_id == known_id) & named, 6 + len(indexes))
    start = F.lit(None).cast("int") if start is None else start
    parse = F.udf(lambda payload: protobuf.decode_message(fds, name, payload), value_type)
    value = parse(raw.substr(start, F.lit(1 << 30)))
    prefix, of = f"{UNDECODABLE}-value: ", f" of subject {schemas.subject!r}"
    error = (
        error.when(start.isNull(), F.concat(F.lit(f"{prefix}the message indexes of schema id "),
                                            schema_id.cast("string"), F.lit(f"{of} (0x"),
                                            F.hex(F.substring(raw, 6, 4)), F.lit(f"...) do not name message {name!r}")))
        .when(value.isNull(), F.concat(F.lit(f"{prefix}the bytes do not decode as Protobuf message {name!r} with "
                                             "schema id "), schema_id.cast("string"), F.lit(f"{of}")))
    )  # fmt: skip
    return F.when(start.isNotNull(), value), error


def reader_type(avro: AvroSchemas) -> T.DataType:
    """The Spark type of ``avro``'s reader schema.

    :raises SpecError: a schema this engine cannot map (terminal: names the subject and the type)
    """
    try:
        return avro_spark_type(json.loads(avro.reader))
    except ValueError as exc:
        raise SpecError(
            "<schema registry>", f"reader schema of subject {avro.subject!r}", avro.reader,
            f"an Avro record whose types map to Spark's ({exc}); give the input a reader_schema that does",
        ) from None  # fmt: skip


@dataclass(frozen=True)
class OutputSchema:
    """An output's value schema as the job registers it: the text, its registry type (``AVRO``, ``JSON``,
    ``PROTOBUF``), a Protobuf one's message (its full name); ``scalar``: a value that is no struct (an aggregate's
    sum or count), which Protobuf holds in a message's one field :data:`SCALAR_FIELD`."""

    schema: str
    kind: str
    message: str | None = None
    scalar: bool = False


@dataclass(frozen=True)
class AvroOutput:
    """An Avro, JSON Schema or Protobuf output's registered value schema and its id (the 5-byte header before each
    value); a Protobuf one's message too (its full name; ``schema`` is the ``.proto`` text)."""

    schema_id: int
    schema: str
    message: str | None = None
    scalar: bool = False


#: the field of the Protobuf message that holds a scalar output value (an aggregate's): ``int64 value = 1;``
SCALAR_FIELD = "value"
_KINDS = {Format.AVRO: "AVRO", Format.JSON_SCHEMA: "JSON", Format.PROTOBUF: "PROTOBUF"}


def output_schema(sink: Sink, value_type: T.DataType) -> OutputSchema:
    """The schema of the values ``sink`` gets, derived from their Spark type as the job registers it (the one
    place: the job's first batch and ``streamjoin validate --registry`` both call this). Avro: :func:`avro_schema`,
    a record named after the topic (a scalar: its primitive, ``"long"`` or ``"double"``); JSON Schema:
    :func:`json_schema`, titled after the topic (a scalar: ``{"type": "integer"}`` or ``"number"``); Protobuf:
    :func:`~streamjoin.kafka.protobuf.proto_schema`, message ``streamjoin.<topic>`` numbered as the subject's latest
    version (asks the registry; a scalar: the message's one field ``value = 1``).

    :raises SpecError: a type the format cannot hold (terminal)
    """
    kind = _KINDS[sink.value_format]
    scalar = not isinstance(value_type, T.StructType | T.MapType | T.ArrayType)
    try:
        if sink.value_format is Format.PROTOBUF:
            return OutputSchema(_proto_text(sink, value_type, scalar), kind, sink.record_name, scalar)
        derive = avro_schema if sink.value_format is Format.AVRO else json_schema
        schema = json.dumps(derive(value_type, sink.record_name), separators=(",", ":"))
    except ValueError as exc:
        path = "aggregate" if scalar else "join.joiner.select"
        what = f"a value {sink.value_format.label} can hold for output {sink.topic!r} ({exc})"
        raise SpecError("<spec>", path, value_type.simpleString(), what) from None
    return OutputSchema(schema, kind, None, scalar)


def _proto_text(sink: Sink, value_type: T.DataType, scalar: bool) -> str:
    from streamjoin.kafka import protobuf
    from streamjoin.kafka.schema_registry import latest_schema, registry_config

    if scalar:  # never null: a null aggregate is a tombstone, not a message
        value_type = T.StructType([T.StructField(SCALAR_FIELD, value_type, False)])
    if not isinstance(value_type, T.StructType):
        raise ValueError(f"a struct, not {value_type.simpleString()}")
    previous = latest_schema(registry_config(sink.registry_conn_id), sink.subject)
    return protobuf.proto_schema(value_type, sink.record_name, previous)


def registered_output(sink: Sink, value_type: T.DataType) -> AvroOutput:
    """:func:`output_schema` of the values ``sink`` gets, registered under the sink's subject (once per process and
    schema; the registry's compatibility check first).

    :raises SchemaRegistrationError: the registry refuses it (terminal)
    """
    from streamjoin.kafka.schema_registry import register_output

    derived = output_schema(sink, value_type)
    schema_id = register_output(sink, derived.schema, derived.kind, derived.message)
    return AvroOutput(schema_id, derived.schema, derived.message, derived.scalar)


def json_schema(data_type: T.DataType, title: str | None = None, nullable: bool = False) -> dict[str, Any]:
    """The JSON Schema (draft-07) of the JSON text ``to_json`` writes for a Spark type: a struct is an object of
    its fields (closed: ``additionalProperties`` false, so that a field added later stays BACKWARD compatible; none
    required), a nullable one also admits null; a string-keyed map an object of its values, an array its items.
    ``title`` names the outermost object (a json_schema input reads such a schema back into the same fields).

    :raises ValueError: a type with no JSON Schema here (a map whose keys are not strings, an interval)
    """
    schema: dict[str, Any]
    if isinstance(data_type, T.StructType):
        properties = {f.name: json_schema(f.dataType, None, f.nullable) for f in data_type.fields}
        schema = {"type": "object", "properties": properties, "additionalProperties": False}
    elif isinstance(data_type, T.ArrayType):
        schema = {"type": "array", "items": json_schema(data_type.elementType, None, data_type.containsNull)}
    elif isinstance(data_type, T.MapType) and isinstance(data_type.keyType, T.StringType):
        schema = {"type": "object", "additionalProperties": json_schema(data_type.valueType, None,
                                                                         data_type.valueContainsNull)}  # fmt: skip
    elif isinstance(data_type, T.IntegralType):
        schema = {"type": "integer"}
    elif isinstance(data_type, T.FractionalType):
        schema = {"type": "number"}
    elif isinstance(data_type, T.BooleanType):
        schema = {"type": "boolean"}
    elif isinstance(data_type, T.StringType):
        schema = {"type": "string"}
    elif isinstance(data_type, T.BinaryType):
        schema = {"type": "string", "contentEncoding": "base64"}
    elif isinstance(data_type, T.DateType):
        schema = {"type": "string", "format": "date"}
    elif isinstance(data_type, T.TimestampType | T.TimestampNTZType):
        schema = {"type": "string", "format": "date-time"}
    elif isinstance(data_type, T.NullType):
        return {"type": "null"}
    else:
        raise ValueError(f"Spark type {data_type.simpleString()} has no JSON Schema here")
    if nullable:
        schema["type"] = [schema["type"], "null"]
    if title is not None:
        schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": title, **schema}
    return schema


def encode(value: Column, fmt: Format, avro: AvroOutput | None = None) -> Column:
    """Bytes for a result value; null stays null (a tombstone). ``avro``: an Avro, JSON Schema or Protobuf output's
    registered schema (JSON Schema: its header, then the JSON text, as Confluent's JSON serializer writes;
    Protobuf: its header, the message indexes, the payload, as its Protobuf serializer writes, encoded by the
    ``protobuf`` package in Spark's Python workers)."""
    if fmt is Format.PROTOBUF:
        from streamjoin.kafka import protobuf

        assert avro is not None and avro.message is not None, "a protobuf output encodes with its registered schema"
        fds = protobuf.descriptor_set(avro.schema, avro.message)
        indexes = protobuf.message_indexes(fds, avro.message)
        assert indexes is not None, "proto_schema's message is its file's first"
        prefix, name = wire_header(avro.schema_id) + indexes, avro.message
        if avro.scalar:
            value = F.when(value.isNotNull(), F.struct(value.alias(SCALAR_FIELD)))
        return F.udf(lambda row: protobuf.encode_row(row, fds, name, prefix), T.BinaryType())(value)
    if fmt is Format.JSON_SCHEMA:
        assert avro is not None, "a json_schema output encodes with its registered schema's id"
        header = F.lit(bytearray(wire_header(avro.schema_id)))
        # a scalar (an aggregate's number) is its JSON text, as Confluent's JSONSerializer writes a number
        json_text = value.cast("string") if avro.scalar else F.to_json(value, {"ignoreNullFields": "false"})
        text = json_text.cast("binary")
        return F.when(value.isNotNull(), F.concat(header, text))
    if fmt is Format.AVRO:
        from pyspark.sql.avro.functions import to_avro

        assert avro is not None, "an Avro output encodes with its registered schema"
        header = F.lit(bytearray(wire_header(avro.schema_id)))
        return F.when(value.isNotNull(), F.concat(header, to_avro(value, avro.schema)))
    if fmt is Format.STRING:
        return value.cast("string").cast("binary")
    if fmt is Format.LONG:
        return F.when(value.isNotNull(), F.unhex(F.lpad(F.hex(value.cast("long")), 16, "0")))
    # keep null fields: a left join result must say {"right": null}, not drop the field
    return F.when(value.isNotNull(), F.to_json(value, {"ignoreNullFields": "false"}).cast("binary"))


def encode_long_text(value: Column) -> Column:
    """A long as UTF-8 decimal text (used for the ``ts`` header)."""
    return value.cast("string").cast("binary")


_AVRO_PRIMITIVES: dict[str, T.DataType] = {
    "string": T.StringType(), "long": T.LongType(), "int": T.IntegerType(), "double": T.DoubleType(),
    "float": T.FloatType(), "boolean": T.BooleanType(), "bytes": T.BinaryType(), "null": T.NullType(),
}  # fmt: skip


def avro_spark_type(schema: Any) -> T.DataType:
    """The Spark type spark-avro decodes an Avro schema (parsed JSON) to, as its ``SchemaConverters`` map it:
    a record is a struct, an enum a string, fixed bytes binary; every field nullable (``from_avro``'s
    PERMISSIVE mode makes them so).

    :raises ValueError: a union of several non-null types (spark-avro makes a struct of members; not supported)
    """
    if isinstance(schema, str):
        return _AVRO_PRIMITIVES.get(schema) or _unsupported(schema)
    if isinstance(schema, list):
        types = [t for t in schema if t != "null"]
        if len(types) != 1:
            raise ValueError(f"an Avro union of one type and null is supported, not {schema}")
        return avro_spark_type(types[0])
    kind, logical = schema.get("type"), schema.get("logicalType")
    if logical == "date":
        return T.DateType()
    if logical in ("timestamp-millis", "timestamp-micros"):
        return T.TimestampType()
    if logical in ("local-timestamp-millis", "local-timestamp-micros"):
        return T.TimestampNTZType()
    if logical == "decimal":
        return T.DecimalType(schema["precision"], schema.get("scale", 0))
    if kind == "record":
        return T.StructType([T.StructField(f["name"], avro_spark_type(f["type"])) for f in schema["fields"]])
    if kind == "array":
        return T.ArrayType(avro_spark_type(schema["items"]))
    if kind == "map":
        return T.MapType(T.StringType(), avro_spark_type(schema["values"]))
    if kind == "enum":
        return T.StringType()
    if kind == "fixed":
        return T.BinaryType()
    return avro_spark_type(kind)


def _unsupported(schema: Any) -> T.DataType:
    raise ValueError(f"Avro type {schema!r} is not supported")


def avro_schema(data_type: T.DataType, name: str, nullable: bool = False) -> Any:
    """The Avro schema (parsed JSON) of a Spark type, as ``to_avro`` writes it: a struct is a record (``name``
    the full name of the outermost one; a nested struct's record is named after its field), a nullable field a
    union with null defaulting to null (a field added later stays BACKWARD compatible).

    :raises ValueError: a type Avro cannot hold here (a map whose keys are not strings, an interval)
    """
    if nullable:
        return ["null", avro_schema(data_type, name)]
    if isinstance(data_type, T.StructType):
        namespace, _, short = name.rpartition(".")
        fields = []
        for f in data_type.fields:
            field: dict[str, Any] = {"name": f.name, "type": avro_schema(f.dataType, f"{short}_{f.name}", f.nullable)}
            if f.nullable:
                field["default"] = None
            fields.append(field)
        record: dict[str, Any] = {"type": "record", "name": short, "fields": fields}
        return {**record, "namespace": namespace} if namespace else record
    if isinstance(data_type, T.ArrayType):
        return {"type": "array", "items": avro_schema(data_type.elementType, name, data_type.containsNull)}
    if isinstance(data_type, T.MapType) and isinstance(data_type.keyType, T.StringType):
        return {"type": "map", "values": avro_schema(data_type.valueType, name, data_type.valueContainsNull)}
    if isinstance(data_type, T.DecimalType):
        return {"type": "fixed", "name": name.rpartition(".")[2], "size": _decimal_bytes(data_type.precision),
                "logicalType": "decimal", "precision": data_type.precision, "scale": data_type.scale}  # fmt: skip
    simple: dict[type, Any] = {
        T.StringType: "string", T.LongType: "long", T.IntegerType: "int", T.ShortType: "int", T.ByteType: "int",
        T.DoubleType: "double", T.FloatType: "float", T.BooleanType: "boolean", T.BinaryType: "bytes",
        T.DateType: {"type": "int", "logicalType": "date"},
        T.TimestampType: {"type": "long", "logicalType": "timestamp-micros"},
        T.TimestampNTZType: {"type": "long", "logicalType": "local-timestamp-micros"},
        T.NullType: "null",
    }  # fmt: skip
    if type(data_type) in simple:
        return simple[type(data_type)]
    raise ValueError(f"Spark type {data_type.simpleString()} has no Avro schema here (field {name!r})")


def _decimal_bytes(precision: int) -> int:
    """The fixed size spark-avro gives a decimal of ``precision`` digits."""
    size = 1
    while 10**precision >= 2 ** (8 * size - 1):
        size += 1
    return size
