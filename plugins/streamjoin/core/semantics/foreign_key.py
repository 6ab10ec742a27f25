"""Foreign-key table-table joins (inner, left): left rows point at a right row through ``foreign_key(k, v)``.

Orders (left, ``o -> {product, qty}``) joined with products (right, ``p -> name``) on the order's product:

======  ====================  ==============  =================================================
Time    Left (orders)         Right (products) Output (keyed by order)
======  ====================  ==============  =================================================
1 s                           p1 -> pen       (no order points at p1 yet)
2 s     o1 -> {p1, 2}                         o1: ({p1, 2}, pen) at 2 s
3 s     o2 -> {p2, 1}                         inner: nothing (new key, no p2); left: o2: ({p2, 1}, null)
4 s                           p2 -> paper     o2: ({p2, 1}, paper) at 4 s
7 s     o1 -> {p3, 2}                         inner: o1: tombstone (fk changed, no p3); left: (.., null)
9 s                           p2 -> null      inner: o2: tombstone; left: o2: ({p2, 1}, null)
======  ====================  ==============  =================================================

Rules, as Kafka Streams 4.1 without a record cache (``SubscriptionSendProcessorSupplier``,
``SubscriptionJoinProcessorSupplier``, ``ForeignTableJoinProcessorSupplier``,
``ResponseJoinProcessorSupplier``). Output keyed by the left key. ``old``/``new`` are the left key's value
before/after the update, ``old_fk``/``new_fk`` their foreign keys (None: no value, or points nowhere).

* **inner**, left update (new value): ``new_fk`` None: a tombstone if ``old_fk`` is not None, else
  nothing. Else, when the right row of ``new_fk`` exists: ``(v, rv)``; when it does not: a tombstone if
  ``old_fk`` is not None and differs from ``new_fk``, else nothing (a new key, a key whose old value
  pointed nowhere, or the same fk: its old value did not join either). Kafka cannot know whether the
  old value joined: the tombstone may be redundant.
* **inner**, left delete: a tombstone if ``old_fk`` is not None (even if it never joined), else nothing.
* **left**, left update: ``(v, rv|None)``; left delete: a tombstone if the key had a value, else nothing.
* right update or delete of fk (a delete of an fk the right table does not hold too): every left key
  pointing at fk, in key order: ``(v, rv)``; for a delete, inner: a tombstone, left: ``(v, None)``.
* ts: a left-triggered result is at ``max(left ts, ts of the right row it looked up)`` (the right row of
  ``new_fk``, or of ``old_fk`` for the tombstone of a delete or of an fk becoming None), or the left ts
  when there is no right row; a right-triggered result at the right record's ts.
* changing a left row's fk moves it: the old fk's updates no longer reach it.
* a versioned side refuses an update older than its store's observed time (the max ts it took in that
  side's task: the record's partition) - history retention, as Kafka's ``RocksDBVersionedStore``: no
  output, no state change, counted as late; it ignores updates older than that key's latest version (no
  output).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from streamjoin.core.records import Record
from streamjoin.core.semantics.common import Result, Step, hashable, serialized_key_order
from streamjoin.core.semantics.table_table import SideTable
from streamjoin.core.spec import Kind


@dataclass
class LeftRow:
    key: Any
    value: Any
    fk: Any
    #: the left record's partition: the task a result for this key belongs to (a chain's next stage)
    partition: int = 0


@dataclass
class ForeignKeyState:
    kind: Kind
    left_versions: SideTable = field(default_factory=SideTable)
    right_versions: SideTable = field(default_factory=SideTable)
    left: dict[Any, LeftRow] = field(default_factory=dict)
    right: dict[Any, tuple[Any, int]] = field(default_factory=dict)  # fk -> (value, ts)
    pointing: dict[Any, dict[Any, Any]] = field(default_factory=dict)  # fk -> {left hkey: left key}

    def _unlink(self, hkey: Any) -> None:
        row = self.left.get(hkey)
        if row is None or row.fk is None:
            return
        hfk = hashable(row.fk)
        keys = self.pointing.get(hfk, {})
        keys.pop(hkey, None)
        if not keys:
            self.pointing.pop(hfk, None)

    def _right_row(self, fk: Any) -> tuple[Any, int] | None:
        return None if fk is None else self.right.get(hashable(fk))


def _ts(ts: int, right: tuple[Any, int] | None) -> int:
    """A left-triggered result's ts: the left record's, or the right row's it looked up if later."""
    return ts if right is None else max(ts, right[1])


def step_left(state: ForeignKeyState, record: Record, stream_time: int, fk: Any) -> Step:
    """A left-table update (``fk``: the foreign key of ``record.value``; ignored for a delete)."""
    hkey = hashable(record.key)
    if state.left_versions.refuses(record.ts, record.partition):
        return Step(late=True)
    if not state.left_versions.accepts(hkey, record.ts):
        return Step()
    old = state.left.get(hkey)
    old_fk = None if old is None else old.fk
    state._unlink(hkey)
    if record.value is None:
        state.left.pop(hkey, None)
        new_fk = None
    else:
        new_fk = fk
        state.left[hkey] = LeftRow(record.key, record.value, fk, record.partition)
        if fk is not None:
            state.pointing.setdefault(hashable(fk), {})[hkey] = record.key
    tombstone = Result(record.key, None, None, record.ts, tombstone=True)
    if state.kind is Kind.LEFT:
        if record.value is None:
            return Step([tombstone] if old is not None else [])
        right = state._right_row(new_fk)
        return Step([Result(record.key, record.value, None if right is None else right[0], _ts(record.ts, right))])
    # inner
    if record.value is None or new_fk is None:
        if old_fk is None:
            return Step()
        return Step([dataclasses.replace(tombstone, ts=_ts(record.ts, state._right_row(old_fk)))])
    right = state._right_row(new_fk)
    if right is not None:
        return Step([Result(record.key, record.value, right[0], _ts(record.ts, right))])
    fk_changed = old_fk is not None and hashable(old_fk) != hashable(new_fk)
    return Step([tombstone] if fk_changed else [])


def step_right(state: ForeignKeyState, record: Record, stream_time: int) -> Step:
    """A right-table update or delete: re-joins every left row pointing at ``record.key``, in key order."""
    hfk = hashable(record.key)
    if state.right_versions.refuses(record.ts, record.partition):
        return Step(late=True)
    if not state.right_versions.accepts(hfk, record.ts):
        return Step()
    if record.value is None:
        state.right.pop(hfk, None)
    else:
        state.right[hfk] = (record.value, record.ts)
    results: list[Result] = []
    keys = state.pointing.get(hfk, {})
    for hkey in sorted(keys, key=lambda h: serialized_key_order(keys[h])):
        row = state.left[hkey]
        if record.value is None and state.kind is Kind.INNER:
            results.append(Result(row.key, None, None, record.ts, tombstone=True))
        else:
            results.append(Result(row.key, row.value, record.value, record.ts))
    return Step(results)
