"""Decoded records in and emitted records out, as plain values, plus their JSONL form.

The reference engine (:mod:`streamjoin.core.reference`) and the scenario files speak these types; the
Spark side converts its rows to and from them in tests. One JSON object per line::

    {"topic": "views", "key": "A", "value": "view A", "ts": 1000}
    {"topic": "clicks", "key": null, "value": null, "ts": 2000, "partition": 1, "offset": 7}

``key`` and ``value`` may be null (a null value on a table is a tombstone); ``partition`` and ``offset``
are optional (default 0).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Record:
    """One decoded input record. ``value is None`` is a tombstone for a table input."""

    topic: str
    key: Any
    value: Any
    ts: int
    partition: int = 0
    offset: int = 0


@dataclass(frozen=True)
class Emitted:
    """One output record: a join result, an aggregate update or a dead letter (with headers)."""

    topic: str
    key: Any
    value: Any
    ts: int
    headers: tuple[tuple[str, str], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """``{topic, key, value, ts}`` plus ``headers`` (as a mapping) when there are any."""
        row: dict[str, Any] = {"topic": self.topic, "key": self.key, "value": self.value, "ts": self.ts}
        if self.headers:
            row["headers"] = dict(self.headers)
        return row


def record_from_dict(row: dict[str, Any]) -> Record:
    """A :class:`Record` from ``{topic, key, value, ts[, partition, offset]}``; other fields are ignored."""
    missing = [name for name in ("topic", "ts") if name not in row]
    if missing:
        raise ValueError(f"a record needs {missing}: {row!r}")
    return Record(
        topic=str(row["topic"]),
        key=row.get("key"),
        value=row.get("value"),
        ts=int(row["ts"]),
        partition=int(row.get("partition", 0)),
        offset=int(row.get("offset", 0)),
    )


def emitted_from_dict(row: dict[str, Any]) -> Emitted:
    """An :class:`Emitted` from ``{topic, key, value, ts[, headers]}`` (headers: a mapping or pairs)."""
    headers = row.get("headers") or ()
    pairs = headers.items() if isinstance(headers, dict) else headers
    return Emitted(
        topic=str(row["topic"]),
        key=row.get("key"),
        value=row.get("value"),
        ts=int(row["ts"]),
        headers=tuple((str(name), str(value)) for name, value in pairs),
    )


def read_records(path: str | Path) -> list[Record]:
    """Read a JSONL file of records; blank lines are skipped. Errors name the file and line."""
    records: list[Record] = []
    with Path(path).open() as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                records.append(record_from_dict(json.loads(line)))
            except (ValueError, TypeError, AttributeError) as exc:
                raise ValueError(f"{path}:{number}: not a record line ({exc})") from None
    return records


def write_emitted(path: str | Path, rows: Iterable[Emitted]) -> None:
    """Write emitted records as JSONL (``{topic, key, value, ts}`` plus ``headers`` when present)."""
    with Path(path).open("w") as out:
        for row in rows:
            out.write(json.dumps(row.as_dict(), sort_keys=False) + "\n")


def final_tables(rows: Iterable[Emitted], exclude: Iterable[str] = ()) -> dict[str, dict[Any, Any]]:
    """The last value per key of each output topic, a tombstone removing the key.

    Keys must be hashable (strings, numbers); topics in ``exclude`` (e.g. the dead-letter topic) are skipped,
    and so are topics whose every key ended deleted.
    """
    skip = set(exclude)
    tables: dict[str, dict[Any, Any]] = {}
    for row in rows:
        if row.topic in skip:
            continue
        table = tables.setdefault(row.topic, {})
        if row.value is None:
            table.pop(row.key, None)
        else:
            table[row.key] = row.value
    return {topic: table for topic, table in tables.items() if table}
