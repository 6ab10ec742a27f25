"""Types shared by the shape modules: join results, step outcomes, key hashing and key ordering."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Side(StrEnum):
    LEFT = "left"
    RIGHT = "right"

    @property
    def other(self) -> Side:
        return Side.RIGHT if self is Side.LEFT else Side.LEFT


@dataclass(frozen=True)
class Result:
    """One join output before the joiner runs: ``joiner(key, left, right)``, or a tombstone (value None)."""

    key: Any
    left: Any
    right: Any
    ts: int
    tombstone: bool = False


@dataclass
class Step:
    """What one step produced: results in emission order, and whether the record was dropped as late."""

    results: list[Result] = field(default_factory=list)
    late: bool = False


def hashable(value: Any) -> Any:
    """A dict key for a record key or a group: the value itself, or canonical JSON for dicts and lists."""
    if isinstance(value, dict | list):
        return ("\x00json", json.dumps(value, sort_keys=True, separators=(",", ":"), default=str))
    return value


def key_order(value: Any) -> tuple[int, Any]:
    """A total order over keys of mixed types: null, then numbers, then strings, then the rest (as JSON)."""
    if value is None:
        return (0, 0)
    if isinstance(value, bool):
        return (1, int(value))
    if isinstance(value, int | float):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    return (3, json.dumps(value, sort_keys=True, separators=(",", ":"), default=str))


def serialized_key_order(key: Any) -> tuple[int, Any]:
    """Kafka's order of serialized keys (where a store orders records by their key bytes): a long key as 8
    bytes big-endian two's complement, so non-negative longs ascending, then negative ones; other keys as
    :func:`key_order` (text: code points, as its UTF-8 bytes)."""
    if isinstance(key, int) and not isinstance(key, bool):
        return (1, key % 2**64)
    return key_order(key)
