"""Avro values in the Confluent wire format, in plain Python (fastavro): producers, tests and the reference
engine's inputs. The Spark engine decodes and encodes in the JVM (:mod:`streamjoin.spark.serde`).

A record's bytes are the magic byte 0, the writer schema's registry id (4 bytes, big-endian), then the Avro
binary payload.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable
from functools import cache
from typing import Any

import fastavro

MAGIC = 0
HEADER_BYTES = 5


def wire_header(schema_id: int) -> bytes:
    """The 5 bytes before a payload written with schema ``schema_id``."""
    return struct.pack(">bI", MAGIC, schema_id)


def split_wire(data: bytes) -> tuple[int, bytes]:
    """``(schema id, payload)`` of a record's bytes.

    :raises ValueError: not the wire format (too short, or a magic byte other than 0)
    """
    if len(data) < HEADER_BYTES or data[0] != MAGIC:
        raise ValueError(f"not the Confluent wire format (magic byte 0, 4-byte schema id): {data[:5].hex()}")
    return struct.unpack(">I", data[1:HEADER_BYTES])[0], data[HEADER_BYTES:]


@cache
def parsed_schema(text: str) -> Any:
    """fastavro's parsed form of an Avro schema's JSON text (once per text)."""
    return fastavro.parse_schema(json.loads(text))


def encode_wire(value: Any, schema_id: int, schema: str) -> bytes | None:
    """``value`` as Avro with ``schema`` behind the header of ``schema_id``; None stays None (a tombstone)."""
    if value is None:
        return None
    out = io.BytesIO()
    out.write(wire_header(schema_id))
    fastavro.schemaless_writer(out, parsed_schema(schema), value)
    return out.getvalue()


def decode_wire(data: bytes | None, writer_schema: Callable[[int], str], reader_schema: str | None = None) -> Any:
    """A record's value: its payload read with the writer schema of its id (``writer_schema(id)``: the
    registry's), resolved to ``reader_schema`` when given. None stays None."""
    if data is None:
        return None
    schema_id, payload = split_wire(data)
    writer = parsed_schema(writer_schema(schema_id))
    reader = parsed_schema(reader_schema) if reader_schema is not None else None
    return fastavro.schemaless_reader(io.BytesIO(payload), writer, reader)
