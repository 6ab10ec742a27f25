"""Windowed stream-stream joins (inner, left, outer), one record at a time.

Window ``before = after = 10 s``, grace 0, left join (views left, clicks right); stream time is the max
``ts`` seen by the task over both inputs, advanced before the record is processed:

======  ============  ============  ===========================================================
Time    Left (view)   Right (click) Output
======  ============  ============  ===========================================================
1 s     A                           (stored; pending: closes at 1 + 10 + 0 = 11 s)
2 s                   A             A: (view A, click A) at 2 s; view A is no longer pending
3 s     B                           (stored; pending, closes at 13 s)
14 s                  B             B: (view B, null) at 3 s: its window closed (13 < 14), emitted
                                    first; click B at 14 s is 11 s after view B: no match
9 s     X                           out of order but on time (closes at 19 s >= 14 s): stored, pending
2 s     Y                           late: closes at 12 s < 14 s: dropped and counted, no output
======  ============  ============  ===========================================================

Rules for a record r (side s, ``close = ts + after + grace`` for left, ``ts + before + grace`` for right):

1. ``close < stream_time``: late, dropped (no output, not stored).
2. if ``r.ts == stream_time``: emit every pending record whose ``close < stream_time``, ordered by
   (ts, left before right, key, arrival), as ``(l, None)`` / ``(None, r)`` at the pending record's ts;
   then forget stored records with ``ts < stream_time - (before + after + grace)``.
3. join every stored record of the other side with the same key and
   ``l.ts - before <= r.ts <= l.ts + after``, in (ts, arrival) order, at ``max(l.ts, r.ts)``; a stored
   record that joins stops being pending.
4. store r; without a match it is pending if the kind keeps its side (left/outer: left; outer: right).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streamjoin.core.records import Record
from streamjoin.core.semantics.common import Result, Side, Step, hashable, key_order
from streamjoin.core.spec import Kind


@dataclass
class Stored:
    """A record in the window store."""

    side: Side
    key: Any
    value: Any
    ts: int
    seq: int
    pending: bool = False


@dataclass
class StreamStreamState:
    """The window store of one task: stored records per (key, side) and the pending (non-joined) ones."""

    before: int
    after: int
    grace: int
    kind: Kind
    by_key: dict[Any, dict[Side, list[Stored]]] = field(default_factory=dict)
    pending: dict[int, Stored] = field(default_factory=dict)
    seq: int = 0

    @property
    def retention(self) -> int:
        """How long a stored record can still match a non-late record of the other side."""
        return self.before + self.after + self.grace

    def close(self, side: Side, ts: int) -> int:
        """When a record's window closes: after this stream time it is late / its pending result is due."""
        return ts + (self.after if side is Side.LEFT else self.before) + self.grace

    def keeps(self, side: Side) -> bool:
        """Whether a non-joined record of this side is emitted (at window close)."""
        if side is Side.LEFT:
            return self.kind in (Kind.LEFT, Kind.OUTER)
        return self.kind is Kind.OUTER

    def stored(self) -> int:
        return sum(len(rows) for sides in self.by_key.values() for rows in sides.values())


def in_window(state: StreamStreamState, left_ts: int, right_ts: int) -> bool:
    return left_ts - state.before <= right_ts <= left_ts + state.after


def non_joined(stored: Stored) -> Result:
    if stored.side is Side.LEFT:
        return Result(stored.key, stored.value, None, stored.ts)
    return Result(stored.key, None, stored.value, stored.ts)


def flush_closed(state: StreamStreamState, stream_time: int) -> list[Result]:
    """Emit (and forget as pending) every pending record whose window closed before ``stream_time``."""
    due = [row for row in state.pending.values() if state.close(row.side, row.ts) < stream_time]
    due.sort(key=lambda row: (row.ts, 0 if row.side is Side.LEFT else 1, key_order(row.key), row.seq))
    for row in due:
        row.pending = False
        del state.pending[row.seq]
    return [non_joined(row) for row in due]


def expire(state: StreamStreamState, stream_time: int) -> None:
    """Forget stored records that can no longer match a non-late record (never a pending one)."""
    horizon = stream_time - state.retention
    for hkey in list(state.by_key):
        sides = state.by_key[hkey]
        for side in list(sides):
            sides[side] = [row for row in sides[side] if row.pending or row.ts >= horizon]
            if not sides[side]:
                del sides[side]
        if not sides:
            del state.by_key[hkey]


def step(state: StreamStreamState, record: Record, stream_time: int, side: Side) -> Step:
    """Process one record of ``side``; ``stream_time`` already includes the record's ts.

    :param state: the task's window store (mutated).
    :param record: a record with a non-null key and value.
    :param stream_time: the task's stream time, max ts over both inputs, advanced with this record.
    :param side: which input of the join the record belongs to.
    """
    if state.close(side, record.ts) < stream_time:
        return Step(late=True)
    results: list[Result] = []
    if record.ts == stream_time:
        results.extend(flush_closed(state, stream_time))
        expire(state, stream_time)
    hkey = hashable(record.key)
    sides = state.by_key.setdefault(hkey, {})
    matched = False
    for other in sorted(sides.get(side.other, []), key=lambda row: (row.ts, row.seq)):
        left_ts, right_ts = (record.ts, other.ts) if side is Side.LEFT else (other.ts, record.ts)
        if not in_window(state, left_ts, right_ts):
            continue
        matched = True
        left, right = (record.value, other.value) if side is Side.LEFT else (other.value, record.value)
        results.append(Result(record.key, left, right, max(left_ts, right_ts)))
        if other.pending:
            other.pending = False
            del state.pending[other.seq]
    state.seq += 1
    row = Stored(side, record.key, record.value, record.ts, state.seq, pending=not matched and state.keeps(side))
    sides.setdefault(side, []).append(row)
    if row.pending:
        state.pending[row.seq] = row
    return Step(results)
