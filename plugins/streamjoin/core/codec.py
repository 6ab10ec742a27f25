"""Bytes on Kafka for the spec's formats, in plain Python (producers, tests, replay input)."""

from __future__ import annotations

import json
import struct
from typing import Any

from streamjoin.core.spec import Format


def encode(value: Any, fmt: Format) -> bytes | None:
    """``None`` stays ``None`` (a tombstone)."""
    if value is None:
        return None
    if fmt is Format.LONG:
        return struct.pack(">q", int(value))  # Java LongSerializer: 8 bytes, big-endian, signed
    if fmt is Format.JSON:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    return str(value).encode()


def decode(data: bytes | None, fmt: Format) -> Any:
    if data is None:
        return None
    if fmt is Format.LONG:
        return struct.unpack(">q", data)[0]
    if fmt is Format.JSON:
        return json.loads(data)
    return data.decode()
