"""Table-table joins (inner, left, outer): an ever-updating join of two tables keyed alike.

Seed 002's views (left table) and clicks (right table), in timestamp order:

======  ============  ============  =========================================================
Time    Left (view)   Right (click) Output
======  ============  ============  =========================================================
1 s     A                           inner: nothing; left/outer: A: (view A, null) at 1 s
2 s                   A             A: (view A, click A) at 2 s
4 s                   C             inner/left: nothing; outer: C: (null, click C) at 4 s
5 s     C                           C: (view C, click C) at 5 s
20 s    A -> null                   inner/left: A: tombstone at 20 s; outer: A: (null, click A)
21 s                  E -> null     inner/left: nothing (no view E); outer: E: tombstone at 21 s
======  ============  ============  =========================================================

Each applied update of key k emits at most one record for k, at ``max(ts, other side's value ts)`` when
the other side has a value, else at the update's ts:

* inner: other side absent -> nothing; else ``(l, r)``, or a tombstone if this update is a delete.
* left, left update: other side absent and a delete of an absent key -> nothing; else ``(l, r|None)``,
  or a tombstone if l is deleted. Left, right update: left absent -> nothing; else ``(l, r|None)``.
* outer: other side absent and a delete of an absent key -> nothing; both sides now absent ->
  tombstone; else ``(l|None, r|None)``.
* versioned side: an update older than ``observed - history_retention`` is refused (not stored, no
  output, counted as late), ``observed`` being the max ts of the updates that side's store took in this
  task (Kafka's ``RocksDBVersionedStore``: one store per side and task); an update older than that key's
  latest version on that side (tombstones count) is history only: not applied, no output.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streamjoin.core.records import Record
from streamjoin.core.semantics.common import Result, Side, Step, hashable
from streamjoin.core.spec import Kind


@dataclass
class SideTable:
    """One side: the current value (and its ts) per key; versioned (``history_retention`` set), the latest
    version's ts per key and the observed time of the side's store in each task (by partition)."""

    history_retention: int | None = None
    values: dict[Any, tuple[Any, int]] = field(default_factory=dict)
    latest_ts: dict[Any, int] = field(default_factory=dict)
    observed: dict[int, int] = field(default_factory=dict)

    @property
    def versioned(self) -> bool:
        return self.history_retention is not None

    def refuses(self, ts: int, partition: int) -> bool:
        """Whether the side's versioned store in task ``partition`` refuses an update at ``ts`` (older than
        its observed time - history retention); else the update advances the observed time."""
        if self.history_retention is None:
            return False
        observed = self.observed.get(partition)
        if observed is not None and ts < observed - self.history_retention:
            return True
        self.observed[partition] = ts if observed is None else max(observed, ts)
        return False

    def accepts(self, hkey: Any, ts: int) -> bool:
        """Whether an update at ``ts`` becomes the key's current value (always, unless versioned and older)."""
        if not self.versioned:
            return True
        latest = self.latest_ts.get(hkey)
        if latest is not None and ts < latest:
            return False
        self.latest_ts[hkey] = ts
        return True


@dataclass
class TableTableState:
    kind: Kind
    left: SideTable = field(default_factory=SideTable)
    right: SideTable = field(default_factory=SideTable)

    def side(self, side: Side) -> SideTable:
        return self.left if side is Side.LEFT else self.right


@dataclass(frozen=True)
class Applied:
    """What a table update did to its side: ``applied`` (else refused as ``late``, or older than the key's latest
    version), and whether the key had a value before (Kafka's ``Change.oldValue``)."""

    applied: bool
    existed: bool = False
    late: bool = False


def apply(this: SideTable, record: Record) -> Applied:
    """Apply one table update to its side's table (a delete for a null value)."""
    hkey = hashable(record.key)
    if this.refuses(record.ts, record.partition):
        return Applied(False, late=True)
    if not this.accepts(hkey, record.ts):
        return Applied(False)
    existed = hkey in this.values
    if record.value is None:
        this.values.pop(hkey, None)
    else:
        this.values[hkey] = (record.value, record.ts)
    return Applied(True, existed)


def step(state: TableTableState, record: Record, stream_time: int, side: Side) -> Step:
    """Apply one table update of ``side`` and emit the join result for its key, if any.

    :param stream_time: unused (table-table joins are not windowed); kept for a uniform step signature.
    """
    applied = apply(state.side(side), record)
    if not applied.applied:
        return Step(late=applied.late)
    return joined(state, record, side, applied.existed)


def joined(state: TableTableState, record: Record, side: Side, existed: bool) -> Step:
    """The join result of an update already applied to ``side``'s table (``existed``: its key had a value before).
    A table read by several stages of a chain is one table, updated once before any stage joins (Kafka's source
    store, updated before the source forwards the change to each join)."""
    hkey = hashable(record.key)
    other = state.side(side.other)
    deleted = record.value is None
    other_row = other.values.get(hkey)
    ts = max(record.ts, other_row[1]) if other_row is not None else record.ts
    left_row, right_row = state.left.values.get(hkey), state.right.values.get(hkey)
    left = left_row[0] if left_row is not None else None
    right = right_row[0] if right_row is not None else None
    noop_delete = other_row is None and deleted and not existed
    tombstone = Result(record.key, None, None, ts, tombstone=True)
    kind = state.kind
    if kind is Kind.INNER:
        if other_row is None:
            return Step()
        return Step([tombstone if deleted else Result(record.key, left, right, ts)])
    if kind is Kind.LEFT:
        if side is Side.LEFT:
            if noop_delete:
                return Step()
            if deleted:
                return Step([tombstone])
            return Step([Result(record.key, left, right, ts)])
        if left_row is None:
            return Step()
        return Step([Result(record.key, left, right, ts)])
    if noop_delete:
        return Step()
    if left_row is None and right_row is None:
        return Step([tombstone])
    return Step([Result(record.key, left, right, ts)])
