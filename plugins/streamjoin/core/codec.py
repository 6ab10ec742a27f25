"""Bytes on Kafka for the spec's formats, in plain Python (producers, tests, replay input)."""

from __future__ import annotations

import json
import struct
from typing import Any

from streamjoin.core.spec import Format


def encode(value: Any, fmt: Format) -> bytes | None:
    """``None`` stays ``None`` (a tombstone). Avro takes a registered schema (``core.avro.encode_wire``)."""
    if value is None:
        return None
    if fmt is Format.AVRO:
        raise ValueError("an Avro value is encoded with its registered schema: streamjoin.core.avro.encode_wire")
    if fmt is Format.PROTOBUF:
        raise ValueError(
            "a Protobuf value is encoded with its registered schema's message: streamjoin.kafka.protobuf.encode_wire"
        )
    if fmt is Format.LONG:
        return struct.pack(">q", int(value))  # Java LongSerializer: 8 bytes, big-endian, signed
    if fmt is Format.JSON:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    return str(value).encode()


def output_value(value: Any, fmt: Format, what: str = "the joiner") -> Any:
    """A join result's value as an output of ``value_format`` ``fmt`` holds it (both engines apply this).

    ``json`` holds anything. ``string`` and ``long`` hold scalars, as Kafka Streams' String and Long serdes
    do: for ``string`` a string stays itself and another scalar becomes its JSON text (``42``, ``true``);
    ``long`` takes an integer. None stays None (a tombstone).

    :raises ValueError: a value the format cannot hold (a mapping or list, or a non-integer for ``long``)
    """
    if value is None or fmt in (Format.JSON, Format.AVRO, Format.JSON_SCHEMA, Format.PROTOBUF):  # a struct's record
        return value
    if isinstance(value, dict | list | tuple):
        raise ValueError(
            f"{what} returned {type(value).__name__} {value!r}: value_format {fmt.value!r} holds a scalar "
            "(use value_format 'json' for a structure)"
        )
    if fmt is Format.STRING:
        return value if isinstance(value, str) else json.dumps(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} returned {type(value).__name__} {value!r}: value_format 'long' holds an integer")
    return value


def decode(data: bytes | None, fmt: Format) -> Any:
    if data is None:
        return None
    if fmt is Format.AVRO:
        raise ValueError("an Avro value is decoded with its writer schema: streamjoin.core.avro.decode_wire")
    if fmt is Format.LONG:
        return struct.unpack(">q", data)[0]
    if fmt is Format.JSON:
        return json.loads(data)
    return data.decode()
