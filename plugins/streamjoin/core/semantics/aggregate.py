"""Aggregation after the join: re-key each result by ``group_by(key, value)`` and keep a running sum or count.

Seed 000, clicks (stream) left-joined with regions (table), summed per region:

======  ==============  ==============  ===========================  ==================
Time    Stream (clicks) Table (regions) Join result                  Output (per region)
======  ==============  ==============  ===========================  ==================
0 s                     alice -> asia
1 s     alice: 13                       alice: (asia, 13)            asia: 13 at 1 s
4 s                     alice -> europe
7 s     alice: 40                       alice: (europe, 40)          europe: 40 at 7 s
8 s     eve: 78                         eve: (UNKNOWN, 78)           UNKNOWN: 78 at 8 s
======  ==============  ==============  ===========================  ==================

Asia keeps alice's 13 clicks: after a stream-producing join a result is counted once, where it was
when it happened (no subtraction). After a table-producing join (table-table, foreign key) the
aggregate follows the join table: a changed result first leaves its old group (emit the old group's new
total), then joins its new group (emit); a tombstone only leaves. A result that stays in its group emits
one update, its old amount subtracted and the new one added in one step (KIP-904, as Kafka Streams 3.5+:
``KTableRepartitionMap`` forwards old and new value in one record when the group is unchanged). Each
emission is ``(group, total)`` at the max ts seen in that group. ``count`` counts results (rows).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streamjoin.core.semantics.common import hashable


@dataclass(frozen=True)
class Update:
    """One aggregate changelog record: the group's new total."""

    group: Any
    total: Any
    ts: int


@dataclass
class Totals:
    """Running total and max ts per group."""

    totals: dict[Any, tuple[Any, Any, int]] = field(default_factory=dict)  # hgroup -> (group, total, max ts)

    def add(self, group: Any, amount: Any, ts: int) -> Update:
        hgroup = hashable(group)
        _, total, max_ts = self.totals.get(hgroup, (group, 0, ts))
        total, max_ts = total + amount, max(max_ts, ts)
        self.totals[hgroup] = (group, total, max_ts)
        return Update(group, total, max_ts)


@dataclass
class StreamAggregateState:
    """Aggregate of a stream of join results: every result adds, nothing is subtracted."""

    totals: Totals = field(default_factory=Totals)


def step_stream(state: StreamAggregateState, group: Any, amount: Any, ts: int) -> list[Update]:
    """Add one (non-tombstone, non-null-group) join result's ``amount`` to ``group``."""
    return [state.totals.add(group, amount, ts)]


@dataclass
class TableAggregateState:
    """Aggregate of a join table: remembers each result key's current group and amount."""

    totals: Totals = field(default_factory=Totals)
    previous: dict[Any, tuple[Any, Any]] = field(default_factory=dict)  # result hkey -> (group, amount)


def step_table(state: TableAggregateState, key: Any, group: Any, amount: Any, ts: int) -> list[Update]:
    """A join-table change for ``key``: subtract its previous contribution, then add the new one; one
    update when both are in the same group (KIP-904), else one per group touched.

    :param group: the new group, or None for a tombstone (or a result whose group is null: dead-lettered
        by the caller, and leaving its old group like a tombstone).
    """
    hkey = hashable(key)
    updates: list[Update] = []
    old = state.previous.pop(hkey, None)
    if old is not None:
        old_group, old_amount = old
        updates.append(state.totals.add(old_group, -old_amount, ts))
        if group is not None and hashable(old_group) == hashable(group):
            updates.clear()  # the same group: Kafka subtracts then adds (in this order) and emits once
    if group is not None:
        state.previous[hkey] = (group, amount)
        updates.append(state.totals.add(group, amount, ts))
    return updates
