"""Windowed stream-stream joins (inner, left, outer), one record at a time, as Kafka Streams 4.1, except
that held non-joined results are emitted as soon as their window closes (Kafka's scan skips and stops
early, delaying some: ``held-non-joined``) and a dead-lettered record moves no clock (Kafka advances its
time first: ``dropped-record-time``); both are listed in ``docs/SEMANTICS.md``.

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
9 s     X                           out of order, window end 9 + 10 = 19 >= 14: stored, pending
2 s     Y                           out of order, window end 12 < 14: no match -> (view Y, null) at once
======  ============  ============  ===========================================================

Rules for a record r of side s (``end = ts + after`` for left, ``ts + before`` for right; ``close = end +
grace``; ``retention = before + after + grace``; *side time* = max ts of the records stored on a side):

1. if ``r.ts == stream_time``: emit every pending record whose ``close < stream_time``, ordered by
   (ts, right before left, key, arrival), as ``(l, None)`` / ``(None, r)`` at the pending record's ts.
2. join every stored record o of the other side with the same key,
   ``l.ts - before <= r.ts <= l.ts + after`` and ``o.ts > side_time(other) - retention`` (still in its
   own side's window store), in (ts, arrival) order, at ``max(l.ts, r.ts)``; a joined record stops being
   pending. Nothing is dropped as late.
3. without a match, if the kind keeps side s (left/outer: left; outer: right): ``end < stream_time``:
   ``(r, None)`` at once; else r is pending.
4. side_time(s) = max(side_time(s), r.ts); r is stored if ``r.ts > side_time(s) - retention``; stored
   records of side s with ``ts <= side_time(s) - retention`` are forgotten.

A null-key record of a kept side (``step_null_key``) is joined with null and emitted at once (KIP-962).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streamjoin.core.records import Record
from streamjoin.core.semantics.common import Result, Side, Step, hashable, serialized_key_order
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
    """The window stores of one task: stored records per (key, side), each side's time, the pending ones."""

    before: int
    after: int
    grace: int
    kind: Kind
    by_key: dict[Any, dict[Side, list[Stored]]] = field(default_factory=dict)
    pending: dict[int, Stored] = field(default_factory=dict)
    #: per side, the max ts of the records stored on it (Kafka: the window store's observed stream time)
    side_time: dict[Side, int] = field(default_factory=dict)
    seq: int = 0

    @property
    def retention(self) -> int:
        """How long a side's window store keeps a record, measured on that side's time."""
        return self.before + self.after + self.grace

    def end(self, side: Side, ts: int) -> int:
        """The end of a record's join window (Kafka's ``timeTo``)."""
        return ts + (self.after if side is Side.LEFT else self.before)

    def close(self, side: Side, ts: int) -> int:
        """When a record's window closes: after this stream time its pending result is due."""
        return self.end(side, ts) + self.grace

    def keeps(self, side: Side) -> bool:
        """Whether a non-joined record of this side is emitted."""
        if side is Side.LEFT:
            return self.kind in (Kind.LEFT, Kind.OUTER)
        return self.kind is Kind.OUTER

    def visible(self, side: Side, ts: int) -> bool:
        """Whether a record of ``side`` at ``ts`` is still in its side's window store."""
        return side not in self.side_time or ts > self.side_time[side] - self.retention

    def stored(self) -> int:
        return sum(len(rows) for sides in self.by_key.values() for rows in sides.values())


def in_window(state: StreamStreamState, left_ts: int, right_ts: int) -> bool:
    return left_ts - state.before <= right_ts <= left_ts + state.after


def non_joined(side: Side, key: Any, value: Any, ts: int) -> Result:
    if side is Side.LEFT:
        return Result(key, value, None, ts)
    return Result(key, None, value, ts)


def flush_closed(state: StreamStreamState, stream_time: int) -> list[Result]:
    """Emit (and forget as pending) every pending record whose window closed before ``stream_time``, in
    Kafka's outer-join store order: ts, then the right side before the left, then the serialized key (long
    keys: non-negative ascending, then negative)."""
    due = [row for row in state.pending.values() if state.close(row.side, row.ts) < stream_time]
    due.sort(key=lambda row: (row.ts, 0 if row.side is Side.RIGHT else 1, serialized_key_order(row.key), row.seq))
    for row in due:
        row.pending = False
        del state.pending[row.seq]
    return [non_joined(row.side, row.key, row.value, row.ts) for row in due]


def expire(state: StreamStreamState, side: Side) -> None:
    """Forget the records of ``side`` that left its window store (a pending one stays pending)."""
    for hkey in list(state.by_key):
        sides = state.by_key[hkey]
        if side in sides:
            sides[side] = [row for row in sides[side] if state.visible(side, row.ts)]
            if not sides[side]:
                del sides[side]
        if not sides:
            del state.by_key[hkey]


def step_null_key(state: StreamStreamState, record: Record, side: Side) -> Step:
    """A null-key record of a side the kind keeps: joined with null and emitted at once (KIP-962); it
    moves stream time (the caller's) but is not stored and flushes nothing."""
    assert state.keeps(side)
    return Step([non_joined(side, None, record.value, record.ts)])


def step(state: StreamStreamState, record: Record, stream_time: int, side: Side) -> Step:
    """Process one record of ``side``; ``stream_time`` already includes the record's ts.

    :param state: the task's window stores (mutated).
    :param record: a record with a non-null key and value.
    :param stream_time: the task's stream time, max ts over both inputs, advanced with this record.
    :param side: which input of the join the record belongs to.
    """
    results: list[Result] = []
    if record.ts == stream_time:
        results.extend(flush_closed(state, stream_time))
    hkey = hashable(record.key)
    sides = state.by_key.setdefault(hkey, {})
    matched = False
    for other in sorted(sides.get(side.other, []), key=lambda row: (row.ts, row.seq)):
        left_ts, right_ts = (record.ts, other.ts) if side is Side.LEFT else (other.ts, record.ts)
        if not in_window(state, left_ts, right_ts) or not state.visible(side.other, other.ts):
            continue
        matched = True
        left, right = (record.value, other.value) if side is Side.LEFT else (other.value, record.value)
        results.append(Result(record.key, left, right, max(left_ts, right_ts)))
        if other.pending:
            other.pending = False
            del state.pending[other.seq]
    emit_now = not matched and state.keeps(side) and state.end(side, record.ts) < stream_time
    if emit_now:
        results.append(non_joined(side, record.key, record.value, record.ts))
    state.side_time[side] = max(state.side_time.get(side, record.ts), record.ts)
    state.seq += 1
    row = Stored(side, record.key, record.value, record.ts, state.seq)
    row.pending = not matched and not emit_now and state.keeps(side)
    if state.visible(side, record.ts):
        sides.setdefault(side, []).append(row)
    if row.pending:
        state.pending[row.seq] = row
    expire(state, side)
    return Step(results)
