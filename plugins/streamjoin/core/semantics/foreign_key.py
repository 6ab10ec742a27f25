"""Foreign-key table-table joins (inner, left): left rows point at a right row through ``foreign_key(k, v)``.

Orders (left, ``o -> {product, qty}``) joined with products (right, ``p -> name``) on the order's product:

======  ====================  ==============  =================================================
Time    Left (orders)         Right (products) Output (keyed by order)
======  ====================  ==============  =================================================
1 s                           p1 -> pen       (no order points at p1 yet)
2 s     o1 -> {p1, 2}                         o1: ({p1, 2}, pen) at 2 s
3 s     o2 -> {p2, 1}                         inner: nothing (no p2); left: o2: ({p2, 1}, null)
4 s                           p2 -> paper     o2: ({p2, 1}, paper) at 4 s
7 s     o1 -> {p3, 2}                         inner: o1: tombstone (had a result); left: (.., null)
9 s                           p2 -> null      inner: o2: tombstone; left: o2: ({p2, 1}, null)
======  ====================  ==============  =================================================

Rules (output keyed by the left key, at the triggering record's ts):

* left update k -> v, fk = foreign_key(k, v) (None points nowhere): inner: the right row exists ->
  ``(v, rv)``, else a tombstone only if k has a result; left: ``(v, rv|None)``.
* left delete: a tombstone if k has a result.
* right update of fk: for every left key pointing at fk, in key order, ``(v, rv)``. Right delete of a
  present fk: inner: a tombstone for each of them that has a result; left: ``(v, None)`` for each.
  A right delete of an absent fk is a no-op.
* changing a left row's fk moves it: the old fk's updates no longer reach it.
* a versioned side ignores updates older than that key's latest version (no output).

"k has a result" means the last record emitted for k is not a tombstone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streamjoin.core.records import Record
from streamjoin.core.semantics.common import Result, Step, hashable, key_order
from streamjoin.core.semantics.table_table import SideTable
from streamjoin.core.spec import Kind


@dataclass
class LeftRow:
    key: Any
    value: Any
    fk: Any


@dataclass
class ForeignKeyState:
    kind: Kind
    left_versions: SideTable = field(default_factory=SideTable)
    right_versions: SideTable = field(default_factory=SideTable)
    left: dict[Any, LeftRow] = field(default_factory=dict)
    right: dict[Any, Any] = field(default_factory=dict)
    pointing: dict[Any, dict[Any, Any]] = field(default_factory=dict)  # fk -> {left hkey: left key}
    has_result: set[Any] = field(default_factory=set)

    def _unlink(self, hkey: Any) -> None:
        row = self.left.get(hkey)
        if row is None or row.fk is None:
            return
        hfk = hashable(row.fk)
        keys = self.pointing.get(hfk, {})
        keys.pop(hkey, None)
        if not keys:
            self.pointing.pop(hfk, None)

    def _emit(self, key: Any, left: Any, right: Any, ts: int) -> Result:
        self.has_result.add(hashable(key))
        return Result(key, left, right, ts)

    def _retract(self, key: Any, ts: int) -> list[Result]:
        hkey = hashable(key)
        if hkey not in self.has_result:
            return []
        self.has_result.discard(hkey)
        return [Result(key, None, None, ts, tombstone=True)]


def step_left(state: ForeignKeyState, record: Record, stream_time: int, fk: Any) -> Step:
    """A left-table update (``fk``: the foreign key of ``record.value``; ignored for a delete)."""
    hkey = hashable(record.key)
    if not state.left_versions.accepts(hkey, record.ts):
        return Step()
    state._unlink(hkey)
    if record.value is None:
        state.left.pop(hkey, None)
        return Step(state._retract(record.key, record.ts))
    state.left[hkey] = LeftRow(record.key, record.value, fk)
    right_value = None
    if fk is not None:
        hfk = hashable(fk)
        state.pointing.setdefault(hfk, {})[hkey] = record.key
        right_value = state.right.get(hfk)
    if right_value is None and state.kind is Kind.INNER:
        return Step(state._retract(record.key, record.ts))
    return Step([state._emit(record.key, record.value, right_value, record.ts)])


def step_right(state: ForeignKeyState, record: Record, stream_time: int) -> Step:
    """A right-table update: re-joins every left row pointing at ``record.key``, in key order."""
    hfk = hashable(record.key)
    if not state.right_versions.accepts(hfk, record.ts):
        return Step()
    if record.value is None:
        if hfk not in state.right:
            return Step()
        del state.right[hfk]
    else:
        state.right[hfk] = record.value
    results: list[Result] = []
    keys = state.pointing.get(hfk, {})
    for hkey in sorted(keys, key=lambda h: key_order(keys[h])):
        row = state.left[hkey]
        if record.value is not None:
            results.append(state._emit(row.key, row.value, record.value, record.ts))
        elif state.kind is Kind.INNER:
            results.extend(state._retract(row.key, record.ts))
        else:
            results.append(state._emit(row.key, row.value, None, record.ts))
    return Step(results)
