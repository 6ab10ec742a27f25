"""Protobuf values in Confluent's wire format: the registry's ``.proto`` text compiled by ``protoc`` to a
FileDescriptorSet (once per schema and process), a message's Spark type, Confluent's message-indexes prefix,
and the decoder the Spark engine runs per record (:func:`streamjoin.spark.serde.decode`).

A record's bytes are the magic byte 0, the writer schema's id (4 bytes, big-endian), the indexes of the message
in the schema's file (zigzag varints: their count then each index; the first top-level message, ``[0]``, is the
single byte 0), then the message's binary payload (Confluent's ``ProtobufSerializer``).

``protoc`` comes from Maven Central (``com.google.protobuf:protoc``, java/protoc/pom.xml) into
``.local/jars/protoc`` (scripts/fetch-jars.sh); ``STREAMJOIN_PROTOC`` names another one. spark-protobuf's
``from_protobuf`` is not served by the Maven repository this project reaches, so records decode with the
``protobuf`` package in Spark's Python workers (a UDF).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from pyspark.sql import types as T

from streamjoin.core.errors import SpecError

PROTOC_DIR = Path(__file__).resolve().parents[3] / ".local" / "jars" / "protoc"


def protoc() -> str:
    """The ``protoc`` executable: ``STREAMJOIN_PROTOC``, else the one fetch-jars.sh resolved."""
    if os.environ.get("STREAMJOIN_PROTOC"):
        return os.environ["STREAMJOIN_PROTOC"]
    found = sorted(PROTOC_DIR.glob("protoc-*.exe"))
    if not found:
        raise FileNotFoundError(f"no protoc in {PROTOC_DIR}: run scripts/fetch-jars.sh (or set STREAMJOIN_PROTOC)")
    if not os.access(found[-1], os.X_OK):
        found[-1].chmod(0o755)
    return str(found[-1])


@cache
def descriptor_set(proto: str, subject: str) -> bytes:
    """The FileDescriptorSet (serialized) of the ``.proto`` text ``proto``, the schema's own file last.

    :raises SpecError: protoc refuses it (terminal: names the subject and protoc's message)
    """
    serialized = _serialized_file(proto)
    if serialized is not None:
        return serialized
    with tempfile.TemporaryDirectory(prefix="streamjoin-proto-") as tmp:
        source, out = Path(tmp) / "schema.proto", Path(tmp) / "schema.desc"
        source.write_text(proto)
        done = subprocess.run(
            [protoc(), f"--proto_path={tmp}", f"--descriptor_set_out={out}", "--include_imports", source.name],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise SpecError(
                "<schema registry>", f"Protobuf schema of subject {subject!r}", proto[:200],
                f"a .proto file protoc compiles without imports of other subjects ({done.stderr.strip()})",
            )  # fmt: skip
        return out.read_bytes()


def _serialized_file(text: str) -> bytes | None:
    """The FileDescriptorSet of a schema registered as a base64 FileDescriptorProto (Confluent's Python
    serializer registers its message's file so), else None (``.proto`` text). A file that imports others is
    refused: their schemas are the registry's references, not read here."""
    import base64
    import binascii

    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    if not text or any(c.isspace() or c in ";{" for c in text.strip()):
        return None
    try:
        file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text.strip(), validate=True))
    except (binascii.Error, DecodeError, ValueError):
        return None
    if not file.name or not file.message_type:
        return None
    if file.dependency:
        raise SpecError("<schema registry>", f"Protobuf schema {file.name!r}", list(file.dependency),
                        "a schema without imports (references to other subjects are not read)")  # fmt: skip
    return descriptor_pb2.FileDescriptorSet(file=[file]).SerializeToString()


def _files(fds: bytes) -> list[Any]:
    from google.protobuf import descriptor_pb2

    return list(descriptor_pb2.FileDescriptorSet.FromString(fds).file)


@cache
def _pool(fds: bytes) -> Any:
    from google.protobuf import descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    for file in _files(fds):
        pool.Add(file)
    return pool


def main_message(fds: bytes) -> str | None:
    """The full name of the schema file's first message (None: it has none)."""
    main = _files(fds)[-1]
    if not main.message_type:
        return None
    return f"{main.package}.{main.message_type[0].name}" if main.package else main.message_type[0].name


def message_indexes(fds: bytes, full_name: str) -> bytes | None:
    """Confluent's message-indexes prefix of message ``full_name`` in the schema's own file (None: not there)."""
    main = _files(fds)[-1]
    prefix = f"{main.package}." if main.package else ""
    if not full_name.startswith(prefix):
        return None
    path = full_name[len(prefix) :].split(".")
    indexes: list[int] = []
    messages = main.message_type
    for name in path:
        position = next((i for i, m in enumerate(messages) if m.name == name), None)
        if position is None:
            return None
        indexes.append(position)
        messages = messages[position].nested_type
    if indexes == [0]:
        return b"\x00"
    return b"".join(_zigzag(i) for i in [len(indexes), *indexes])


def _zigzag(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def spark_type(fds: bytes, full_name: str, subject: str) -> T.StructType:
    """The Spark struct a message decodes to: a field per message field (repeated: an array; a map field: a
    map; an enum: its value's name; a nested message: a struct; a 64-bit or unsigned 32-bit integer: a long).

    :raises SpecError: the message is not in the schema, or nests itself (terminal)
    """
    try:
        descriptor = _pool(fds).FindMessageTypeByName(full_name)
    except KeyError:
        raise SpecError("<schema registry>", f"Protobuf schema of subject {subject!r}", full_name,
                        "a message of the schema: set the input's record_name to one") from None  # fmt: skip
    return _struct(descriptor, (), subject)


def _struct(descriptor: Any, seen: tuple[str, ...], subject: str) -> T.StructType:
    if descriptor.full_name in seen:
        raise SpecError("<schema registry>", f"Protobuf schema of subject {subject!r}", descriptor.full_name,
                        "a message that does not contain itself (recursive messages have no Spark type)")  # fmt: skip
    return T.StructType(
        [T.StructField(f.name, _field_type(f, (*seen, descriptor.full_name), subject)) for f in descriptor.fields]
    )


def _field_type(field: Any, seen: tuple[str, ...], subject: str) -> T.DataType:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
        return T.MapType(_single_type(key, seen, subject), _single_type(value, seen, subject))
    single = _single_type(field, seen, subject)
    return T.ArrayType(single) if field.is_repeated else single


def _single_type(field: Any, seen: tuple[str, ...], subject: str) -> T.DataType:
    from google.protobuf.descriptor import FieldDescriptor as FD

    cpp = field.cpp_type
    if cpp == FD.CPPTYPE_MESSAGE:
        return _struct(field.message_type, seen, subject)
    if cpp == FD.CPPTYPE_STRING:
        return T.BinaryType() if field.type == FD.TYPE_BYTES else T.StringType()
    simple: dict[int, T.DataType] = {
        FD.CPPTYPE_INT32: T.IntegerType(), FD.CPPTYPE_INT64: T.LongType(), FD.CPPTYPE_UINT32: T.LongType(),
        FD.CPPTYPE_UINT64: T.LongType(), FD.CPPTYPE_DOUBLE: T.DoubleType(), FD.CPPTYPE_FLOAT: T.FloatType(),
        FD.CPPTYPE_BOOL: T.BooleanType(), FD.CPPTYPE_ENUM: T.StringType(),
    }  # fmt: skip
    return simple[cpp]


@cache
def _message_class(fds: bytes, full_name: str) -> Any:
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(_pool(fds).FindMessageTypeByName(full_name))


def decode_message(fds: bytes, full_name: str, payload: bytes | None) -> dict[str, Any] | None:
    """The message ``payload`` holds as a dict of :func:`spark_type`'s shape; None when it does not parse."""
    from google.protobuf.message import DecodeError

    if payload is None:
        return None
    message = _message_class(fds, full_name)()
    try:
        message.ParseFromString(bytes(payload))
    except DecodeError:
        return None
    return _values(message)


def _values(message: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        entry = field.message_type
        if entry is not None and entry.GetOptions().map_entry:
            convert = _converter(entry.fields_by_name["value"])
            out[field.name] = {k: convert(v) for k, v in value.items()}
        elif field.is_repeated:
            out[field.name] = [_converter(field)(v) for v in value]
        elif field.has_presence and not message.HasField(field.name):
            out[field.name] = None  # a message field or an optional scalar that was not set
        else:
            out[field.name] = _converter(field)(value)
    return out


def _converter(field: Any) -> Any:
    from google.protobuf.descriptor import FieldDescriptor as FD

    if field.cpp_type == FD.CPPTYPE_MESSAGE:
        return _values
    if field.cpp_type == FD.CPPTYPE_ENUM:
        names = {v.number: v.name for v in field.enum_type.values}
        return lambda number: names.get(number, str(number))
    return lambda value: value


def encode_message(fds: bytes, full_name: str, value: Any) -> bytes:
    """The binary payload of message ``full_name`` holding ``value``: a mapping of its fields, in the shape
    :func:`decode_message` gives or Protobuf's JSON mapping (an enum by name or number, a 64-bit integer as a
    number or a string, a null field unset).

    :raises ValueError: a value the message cannot hold (names the field, as Protobuf's JSON parser does)
    """
    from google.protobuf import json_format

    if not isinstance(value, dict):
        raise ValueError(f"{type(value).__name__} {value!r} is not a mapping of message {full_name!r}'s fields")
    message = _message_class(fds, full_name)()
    try:
        json_format.ParseDict(value, message)
    except json_format.ParseError as exc:
        raise ValueError(" ".join(str(exc).split())) from None
    return bytes(message.SerializeToString())


def encode_wire(value: Any, schema_id: int, fds: bytes, full_name: str, indexes: bytes) -> bytes | None:
    """``value`` in Confluent's Protobuf wire format (what its ``ProtobufSerializer`` writes): the header of
    ``schema_id``, message ``full_name``'s ``indexes`` (:func:`message_indexes`), the payload; None stays None.

    :raises ValueError: a value the message cannot hold (:func:`encode_message`)
    """
    from streamjoin.core.avro import wire_header

    if value is None:
        return None
    return wire_header(schema_id) + indexes + encode_message(fds, full_name, value)


def decode_wire(data: bytes, schema: Any, record_name: str | None, subject: str) -> dict[str, Any]:
    """The message in Confluent's Protobuf wire format ``data``, read with the schema of its id
    (``schema(id)``: the ``.proto`` text): message ``record_name``, else the schema's first.

    :raises ValueError: not the wire format, indexes naming another message, or a payload that does not parse
    """
    if len(data) < 6 or data[0] != 0:
        raise ValueError(f"not the Confluent wire format: starts with 0x{data[:6].hex()}")
    fds = descriptor_set(schema(int.from_bytes(data[1:5], "big")), subject)
    name = record_name or main_message(fds)
    indexes = message_indexes(fds, name) if name else None
    if name is None or indexes is None or not data[5:].startswith(indexes):
        raise ValueError(f"the message indexes 0x{data[5:9].hex()} do not name message {name!r}")
    value = decode_message(fds, name, data[5 + len(indexes) :])
    if value is None:
        raise ValueError(f"the bytes do not decode as Protobuf message {name!r}")
    return value


def message_fields(fds: bytes, full_name: str) -> list[tuple[str, str]]:
    """Message ``full_name``'s fields as ``(name, Protobuf type)``: a scalar's type name (``int64``), a message's or
    enum's full name, ``repeated <type>``, ``map<key,value>`` (lineage's schema facet).

    :raises KeyError: no such message in the schema
    """
    return [(f.name, _proto_type(f)) for f in _pool(fds).FindMessageTypeByName(full_name).fields]


def _proto_type(field: Any) -> str:
    from google.protobuf import descriptor_pb2

    entry = field.message_type
    if entry is not None and entry.GetOptions().map_entry:
        return f"map<{_proto_type(entry.fields_by_name['key'])},{_proto_type(entry.fields_by_name['value'])}>"
    if entry is not None:
        single = entry.full_name
    elif field.enum_type is not None:
        single = field.enum_type.full_name
    else:
        single = descriptor_pb2.FieldDescriptorProto.Type.Name(field.type).removeprefix("TYPE_").lower()
    return f"repeated {single}" if field.is_repeated else single


def proto_schema(data_type: T.StructType, full_name: str, previous: str | None = None) -> str:
    """The ``.proto`` (proto3) of the values ``to_protobuf`` would write for a Spark struct: message ``full_name``
    (``package.Name``) with a field per struct field; a nullable scalar is ``optional`` (null stays
    distinguishable from the default), a struct a nested message, an array ``repeated``, a map a ``map``.

    Fields are numbered in order, or, given the ``previous`` version's ``.proto`` (the subject's latest), as
    there: a field keeps its number, a new one takes the next free one, a dropped one's number is ``reserved``
    (Protobuf reads fields by number, so the versions stay compatible whatever the select's order).

    :raises ValueError: a type Protobuf cannot hold here (a decimal, a timestamp, an array of arrays or maps, a
        map of those, a map key that is not a string, integer or boolean)
    """
    package, _, name = full_name.rpartition(".")
    before = None
    if previous is not None:
        try:
            before = _pool(descriptor_set(previous, full_name)).FindMessageTypeByName(full_name)
        except KeyError:  # the latest version holds another message: number afresh
            before = None
    body = _message(data_type, name, "", before)
    return "\n".join(['syntax = "proto3";', *([f"package {package};"] if package else []), "", *body]) + "\n"


def _message(data_type: T.StructType, name: str, indent: str, before: Any = None) -> list[str]:
    """Message ``name``'s lines; ``before``: its descriptor in the previous version (numbers to keep)."""
    from google.protobuf import descriptor_pb2

    numbers = {f.name: f.number for f in before.fields} if before is not None else {}
    reserved: set[int] = set()
    if before is not None:
        old = descriptor_pb2.DescriptorProto()
        before.CopyToProto(old)
        reserved = {n for r in old.reserved_range for n in range(r.start, r.end)}
    reserved |= {n for f, n in numbers.items() if f not in data_type.names}
    free = max([*numbers.values(), *reserved], default=0) + 1
    nested: list[str] = []
    fields: list[str] = []
    for field in data_type.fields:
        if field.name in numbers:
            number = numbers[field.name]
        else:
            number, free = free, free + 1
        inner = before.fields_by_name[field.name].message_type if field.name in numbers else None
        kind, label = field.dataType, ""
        if isinstance(kind, T.ArrayType):
            if isinstance(kind.elementType, T.ArrayType | T.MapType):
                raise ValueError(f"field {field.name!r}: an array of {kind.elementType.simpleString()}")
            label, kind = "repeated ", kind.elementType
        elif field.nullable and not isinstance(kind, T.StructType | T.MapType):
            label = "optional "
        if isinstance(kind, T.MapType):
            if isinstance(kind.valueType, T.ArrayType | T.MapType):
                raise ValueError(f"field {field.name!r}: a map of {kind.valueType.simpleString()}")
            key = _scalar(kind.keyType, field.name)
            if key in ("double", "float", "bytes"):
                raise ValueError(f"field {field.name!r}: a map key of {kind.keyType.simpleString()}")
            entry = inner.fields_by_name["value"].message_type if inner is not None else None
            value = _proto_field(kind.valueType, field.name, nested, indent, entry)
            fields.append(f"{indent}  map<{key}, {value}> {field.name} = {number};")
            continue
        fields.append(f"{indent}  {label}{_proto_field(kind, field.name, nested, indent, inner)} {field.name} = "
                      f"{number};")  # fmt: skip
    if reserved:
        fields.append(f"{indent}  reserved {', '.join(map(str, sorted(reserved)))};")
    return [f"{indent}message {name} {{", *nested, *fields, f"{indent}}}"]


def _proto_field(kind: T.DataType, field: str, nested: list[str], indent: str, before: Any = None) -> str:
    if isinstance(kind, T.StructType):
        name = f"{field[:1].upper()}{field[1:]}Message"  # a nested type and a field share the message's scope
        nested += _message(kind, name, indent + "  ", before)
        return name
    return _scalar(kind, field)


def _scalar(kind: T.DataType, field: str) -> str:
    simple: dict[type, str] = {
        T.StringType: "string", T.LongType: "int64", T.IntegerType: "int32", T.ShortType: "int32",
        T.ByteType: "int32", T.DoubleType: "double", T.FloatType: "float", T.BooleanType: "bool",
        T.BinaryType: "bytes",
    }  # fmt: skip
    if type(kind) not in simple:
        raise ValueError(f"field {field!r}: Spark type {kind.simpleString()} has no Protobuf type here")
    return simple[type(kind)]


def encode_row(row: Any, fds: bytes, full_name: str, prefix: bytes) -> bytes | None:
    """A Spark row (a struct value) as ``prefix`` (the wire header and message indexes) and the payload of message
    ``full_name``; None stays None. Runs in Spark's Python workers (:func:`streamjoin.spark.serde.encode`).

    :raises ValueError: a value the message cannot hold (a null in an array; names the field)
    """
    if row is None:
        return None
    return prefix + encode_message(fds, full_name, _json_mapping(row.asDict(recursive=True)))


def _json_mapping(value: Any) -> Any:
    """A row's values as Protobuf's JSON mapping takes them: bytes as base64 text."""
    import base64

    if isinstance(value, dict):
        return {k: _json_mapping(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_mapping(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode()
    return value
