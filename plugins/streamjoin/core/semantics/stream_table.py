"""Stream-table joins (inner, left; plain or versioned table, optional grace) and stream-globaltable joins.

Seed 003, page views (stream) enriched with profiles (table), in processing order:

======  ==================  ==================  ========================================================
Time    Stream (views)      Table (profiles)    Output
======  ==================  ==================  ========================================================
0 s                         bob -> eu-west      (the table only updates)
1 s     alice: /home                            inner: nothing (no profile yet); left: (/home, null)
2 s     bob: /products                          (/products, eu-west) at 2 s
0.5 s                       alice -> us-east    (arrives late: plain table: only later views see it)
5 s     alice: /cart                            (/cart, us-east) at 5 s
======  ==================  ==================  ========================================================

With a versioned profiles table and grace 2 s, alice's /home view waits in the buffer until the views'
stream time reaches 3 s; by then her profile (valid from 0.5 s) is in the table and the view joins as of
1 s: ``(/home, us-east)`` at 1 s.

Rules:

* Only stream records produce output, at the stream record's ts; inner: nothing without a table value,
  left: ``(value, None)``. Table records update the table; a null value deletes (no-op if absent).
* Plain table: a lookup sees the latest value in processing order.
* Versioned table: an update (a tombstone too) older than ``table_time - history_retention`` is refused
  (not stored, counted as late), as Kafka's ``RocksDBVersionedStore.put`` refuses it; every other update
  is a version at its ts; a lookup as of T finds the version with the largest ts <= T (ties: the later
  processed). Table time = max ts of the table records the task's table took. A lookup with
  ``T < table_time - history_retention`` finds only the key's latest version, and only if its ts <= T.
  Versions whose successor's ts <= ``table_time - history_retention`` are forgotten.
* Grace (versioned only): buffer time = max ts of stream records. A stream record with
  ``ts < buffer_time - grace`` is joined at once; otherwise it is buffered; then every buffered record
  with ``ts <= buffer_time - grace`` is released in (ts, key, arrival) order and joined as of its ts
  (Kafka's grace buffer keys records by timestamp, serialized key and a sequence number).
* Global table: a plain table applied when read, not time-synchronised; the lookup key is
  ``key_selector(key, value)`` or the stream key.
* Null keys (KIP-962): a left join joins a stream record whose join key (the lookup key) is null with
  null, at once; the reference engine dead-letters such a record of an inner join.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streamjoin.core.records import Record
from streamjoin.core.semantics.common import Result, Step, hashable, serialized_key_order
from streamjoin.core.spec import Kind


@dataclass
class Version:
    ts: int
    seq: int
    value: Any  # None: a tombstone


@dataclass
class TableState:
    """A table: the latest value per key, or (``history_retention`` set) every version per key."""

    history_retention: int | None = None
    latest: dict[Any, tuple[Any, int]] = field(default_factory=dict)
    versions: dict[Any, list[Version]] = field(default_factory=dict)
    table_time: int | None = None
    seq: int = 0

    @property
    def versioned(self) -> bool:
        return self.history_retention is not None

    def apply(self, key: Any, value: Any, ts: int) -> bool:
        """An update (``value`` None: a delete). Plain: replaces the latest value. Versioned: adds a version,
        unless it is older than the history horizon (refused: returns False)."""
        hkey = hashable(key)
        if self.history_retention is None:
            if value is None:
                self.latest.pop(hkey, None)
            else:
                self.latest[hkey] = (value, ts)
            return True
        if self.table_time is not None and ts < self.table_time - self.history_retention:
            return False
        self.seq += 1
        self.table_time = ts if self.table_time is None else max(self.table_time, ts)
        history = self.versions.setdefault(hkey, [])
        history.append(Version(ts, self.seq, value))
        history.sort(key=lambda v: (v.ts, v.seq))
        self._forget(hkey)
        return True

    def _forget(self, hkey: Any) -> None:
        """Drop versions that no lookup can return any more (superseded at or before the history horizon,
        or by a later-processed version at the same ts)."""
        assert self.history_retention is not None and self.table_time is not None
        horizon = self.table_time - self.history_retention
        history = self.versions[hkey]
        kept = [
            version
            for version, successor in zip(history, [*history[1:], None], strict=True)
            if successor is None or (successor.ts > horizon and successor.ts > version.ts)
        ]
        self.versions[hkey] = kept

    def lookup(self, key: Any, as_of: int | None = None) -> tuple[bool, Any, int]:
        """``(found, value, ts)``: the latest value (plain table, or ``as_of`` None), else the value as of
        ``as_of`` (versioned: see the module docstring for lookups older than the history)."""
        hkey = hashable(key)
        if self.history_retention is None:
            if hkey in self.latest:
                value, ts = self.latest[hkey]
                return True, value, ts
            return False, None, 0
        history = self.versions.get(hkey, [])
        if as_of is None:
            candidates = history
        elif self.table_time is not None and as_of < self.table_time - self.history_retention:
            candidates = [v for v in history[-1:] if v.ts <= as_of]  # only the latest version never expires
        else:
            candidates = [v for v in history if v.ts <= as_of]
        if not candidates or candidates[-1].value is None:
            return False, None, 0
        return True, candidates[-1].value, candidates[-1].ts


@dataclass
class StreamTableState:
    """One task of a stream-table join: the table, and the grace buffer of stream records."""

    kind: Kind
    table: TableState
    grace: int = 0
    buffer: list[tuple[int, int, Record]] = field(default_factory=list)  # (ts, arrival, record)
    buffer_time: int | None = None
    arrivals: int = 0


def step_table(state: StreamTableState, record: Record, stream_time: int) -> Step:
    """A table update: changes the table, emits nothing (late: a versioned table refused it)."""
    return Step(late=not state.table.apply(record.key, record.value, record.ts))


def join_one(kind: Kind, table: TableState, record: Record, lookup_key: Any, as_of: int | None) -> list[Result]:
    """Join one stream record with the table (``as_of`` None: the latest value)."""
    found, value, _ = (False, None, 0) if lookup_key is None else table.lookup(lookup_key, as_of)
    if not found and kind is Kind.INNER:
        return []
    return [Result(record.key, record.value, value if found else None, record.ts)]


def step_stream(state: StreamTableState, record: Record, stream_time: int) -> Step:
    """A stream record: joined now (plain table, or versioned without grace / too late to buffer), or
    buffered; then buffered records that are due are released and joined as of their ts."""
    table = state.table
    as_of = record.ts if table.versioned else None
    if not table.versioned or state.grace == 0:
        return Step(join_one(state.kind, table, record, record.key, as_of))
    state.buffer_time = record.ts if state.buffer_time is None else max(state.buffer_time, record.ts)
    horizon = state.buffer_time - state.grace
    if record.ts < horizon:
        return Step(join_one(state.kind, table, record, record.key, record.ts))
    state.arrivals += 1
    state.buffer.append((record.ts, state.arrivals, record))
    due = sorted(
        (entry for entry in state.buffer if entry[0] <= horizon),
        key=lambda entry: (entry[0], serialized_key_order(entry[2].key), entry[1]),
    )
    state.buffer = [entry for entry in state.buffer if entry[0] > horizon]
    results: list[Result] = []
    for ts, _, buffered in due:
        results.extend(join_one(state.kind, table, buffered, buffered.key, ts))
    return Step(results)


def step_null_key(state: StreamTableState, record: Record) -> Step:
    """A null-key stream record of a left join: ``(value, None)`` at once (KIP-962); it matches no table
    key, so it is neither looked up nor buffered, and it does not move the buffer time."""
    assert state.kind is Kind.LEFT
    return Step([Result(None, record.value, None, record.ts)])


def step_global_stream(kind: Kind, table: TableState, record: Record, lookup_key: Any) -> Step:
    """A stream record joined with the global table's latest value for ``lookup_key`` (None: no match)."""
    return Step(join_one(kind, table, record, lookup_key, None))
