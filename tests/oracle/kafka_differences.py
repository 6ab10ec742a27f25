"""The documented differences between the reference engine and Kafka Streams 4.1.1, each recognised by its
rule on one generated case of the differential matrix (``tests/matrix_cases.py``).

:func:`classify` says whether Kafka Streams' output for a case equals the reference engine's, and if not,
which documented differences explain it. A difference explains a case only by its rule: its trigger occurs
in the case, and the reference's output, transformed as the rule says (the stream-stream clocks that a
record Kafka drops still advances; Kafka's versioned-store state after a tombstone it loses; the
reference's own held stream-stream results released on Kafka's schedule), equals Kafka's exactly.
Differences combine by applying their transformations in sequence; the smallest set that explains the case
is named. Anything else is unexplained. The rules, their Kafka sources and the cases each explains are in
``docs/SEMANTICS.md`` ("Differences from Kafka Streams").
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from kafka_streams_oracle import OracleRun, without_dead_letters
from matrix_cases import Case
from streamjoin.core.codec import output_value
from streamjoin.core.records import Emitted, Record
from streamjoin.core.reference import ReferenceEngine
from streamjoin.core.semantics import stream_stream
from streamjoin.core.semantics.common import Result, Side, hashable, serialized_key_order
from streamjoin.core.shapes import Kind, Shape


@dataclass(frozen=True)
class Difference:
    """A documented difference: its name (as ``docs/SEMANTICS.md`` lists it, in backquotes) and what it is."""

    name: str
    what: str

    def __str__(self) -> str:
        return self.name


#: applied in this order when combined (the join's clocks, the versioned store's state, then the outputs)
DROPPED_TIME = Difference(
    "dropped-record-time",
    "stream-stream: a record Kafka drops (a null value; a null key on a side the join does not keep) still "
    "advances the join's stream time, and one with a key its side's window-store time",
)
LOST_TOMBSTONE = Difference(
    "versioned-same-ts-tombstone",
    "a tombstone at the timestamp of a key's latest value deletes that value without leaving a trace when the "
    "key's history ends before it: a later put older than the tombstone becomes the key's latest value",
)
HELD = Difference(
    "held-non-joined",
    "stream-stream left/outer: Kafka's scan of its held results skips and stops early, so a due held result "
    "comes out later than here, or never (joined first by an out-of-order record, or the input ends)",
)
NPE = Difference(
    "grace-null-key-npe",
    "stream-table left join with grace: a null-key stream record fails the task (NullPointerException)",
)
DIFFERENCES = (DROPPED_TIME, LOST_TOMBSTONE, HELD, NPE)


@dataclass(frozen=True)
class Verdict:
    """A case's outcome: equal, explained by ``explained_by`` (non-empty), or unexplained (``detail``)."""

    case: Case
    equal: bool
    explained_by: tuple[Difference, ...] = ()
    detail: str = ""

    @property
    def unexplained(self) -> bool:
        return not self.equal and not self.explained_by


# --- showing outputs -----------------------------------------------------------------------------------
def per_topic(rows: Sequence[Emitted]) -> dict[str, list[str]]:
    topics: dict[str, list[str]] = {}
    for row in rows:
        topics.setdefault(row.topic, []).append(f"{row.key}={json.dumps(row.value)}@{row.ts}")
    return topics


def show(topics: dict[str, list[str]]) -> str:
    shown = (f"  {topic}:\n" + "\n".join(f"    {row}" for row in rows) for topic, rows in topics.items())
    return "\n".join(shown) or "  (nothing)"


def describe(case: Case, run: OracleRun) -> str:
    """The case and both outputs (what a failing test prints)."""
    spec, _ = case.spec()
    reference = per_topic(without_dead_letters(spec, case.engine().replay(case.records)))
    if run.error is not None:
        return f"{case}\nKafka Streams failed:\n{run.error.strip()[:1500]}\nreference:\n{show(reference)}"
    return f"{case}\nreference:\n{show(reference)}\nKafka Streams 4.1.1:\n{show(per_topic(run.emitted))}"


# --- Kafka's versioned store, as far as the rules need it ----------------------------------------------
#: the smallest default segment interval of a versioned store (``RocksDbVersionedKeyValueBytesStoreSupplier.
#: defaultSegmentInterval``: max(history / 3, 2 s) for a history up to 60 s); the model knows one segment
SEGMENT_INTERVAL_MIN_MS = 2_000


@dataclass
class _Segment:
    """A key's history in RocksDBVersionedStore's segments (all matrix timestamps are in segment 0: the
    default segment interval of a 6 ms history is 2,000 ms): versions ``(valid_from, value)``, each valid to
    the next one's ``valid_from``, the last to ``next_ts``; a gap is a ``None`` version."""

    versions: list[tuple[int, Any]]
    next_ts: int

    def insert_as_latest(self, valid_from: int, valid_to: int, value: Any) -> None:
        if self.next_ts < valid_from:
            self.versions.append((self.next_ts, None))  # the gap before it
        self.versions.append((valid_from, value))
        self.next_ts = valid_to

    def put_within(self, ts: int, value: Any) -> None:
        """``putToSegment``: ``versions[0].valid_from <= ts < next_ts``."""
        index = max(i for i, (start, _) in enumerate(self.versions) if start <= ts)
        if self.versions[index][0] == ts:
            self.versions[index] = (ts, value)
        else:
            self.versions.insert(index + 1, (ts, value))


@dataclass
class KafkaVersionedStore:
    """``RocksDBVersionedStore.put`` of Kafka Streams 4.1.1 (streams/.../state/internals/), one segment:
    :meth:`put` says whether a put is refused (``timestamp < observedStreamTime - historyRetention``, the
    store's grace period being its history retention) and whether a tombstone is lost (it replaces the
    latest value at the same timestamp, ``maybePutToLatestValueStore`` deletes that value, and the key's
    segment history ends before the tombstone, so nothing records it). ``history_end`` is then the key's
    new effective latest timestamp (its segment's ``nextTs``, or None when it has no history)."""

    history_retention: int
    observed: int | None = None
    latest: dict[Any, tuple[Any, int]] = field(default_factory=dict)
    segments: dict[Any, _Segment] = field(default_factory=dict)

    def put(self, key: Any, value: Any, ts: int) -> tuple[str, int | None]:
        """``("refused" | "lost" | "stored", history_end)``."""
        assert 0 <= ts < SEGMENT_INTERVAL_MIN_MS, f"ts {ts} is beyond the first segment this model knows"
        if self.observed is not None and ts < self.observed - self.history_retention:
            return "refused", None
        self.observed = ts if self.observed is None else max(self.observed, ts)
        hkey = hashable(key)
        latest, segment = self.latest.get(hkey), self.segments.get(hkey)
        if latest is not None and ts >= latest[1]:
            lost = False
            if ts > latest[1]:  # the latest value moves into the segment, valid to ts
                if segment is None:
                    self.segments[hkey] = _Segment([(latest[1], latest[0])], ts)
                else:
                    segment.insert_as_latest(latest[1], ts, latest[0])
            elif value is None:
                lost = segment is None or segment.next_ts < ts
            if value is None:
                del self.latest[hkey]
            else:
                self.latest[hkey] = (value, ts)
            if lost:
                return "lost", None if segment is None else segment.next_ts
            return "stored", None
        found = None if latest is None else latest[1]
        if segment is not None and segment.next_ts > ts:
            if segment.versions[0][0] <= ts:
                segment.put_within(ts, value)
                return "stored", None
            found = segment.versions[0][0]
        if found is None:  # finishPut, nothing later: the new latest
            if value is not None:
                self.latest[hkey] = (value, ts)
            elif segment is None:
                self.segments[hkey] = _Segment([(ts, None)], ts)  # a "degenerate" segment
            elif segment.next_ts != ts:
                segment.insert_as_latest(segment.next_ts, ts, None)
        elif segment is None:
            self.segments[hkey] = _Segment([(ts, value)], found)
        elif segment.next_ts <= ts:
            segment.insert_as_latest(ts, found, value)
        else:
            segment.versions.insert(0, (ts, value))  # the earliest, valid to the segment's first version
        return "stored", None


@dataclass(frozen=True)
class _StoreEvents:
    lost: dict[int, int | None]  # index of a lost tombstone -> the key's history end


def _store_events(case: Case) -> _StoreEvents:
    """Kafka's versioned stores over the case's table records (those Kafka is given: a null-key table record
    is a dead letter here, and left out of Kafka's input)."""
    if not case.versioned:
        return _StoreEvents({})
    spec, _ = case.spec()
    stores = {
        inp.topic: KafkaVersionedStore(inp.versioned.history_retention)
        for inp in (spec.left, spec.right)
        if inp.versioned is not None
    }
    lost: dict[int, int | None] = {}
    for index, record in enumerate(case.records):
        store = stores.get(record.topic)
        if store is None or record.key is None:
            continue
        outcome, history_end = store.put(record.key, record.value, record.ts)
        if outcome == "lost":  # a refused put is refused by the reference too
            lost[index] = history_end
    return _StoreEvents(lost)


# --- the reference, record by record, with a rule's transformation ----------------------------------------
@dataclass
class _Row:
    row: Emitted
    step: int  # the index (in case.records) of the input record that emitted it
    held: bool = False  # a held stream-stream result released by a flush


def _forget_lost_tombstone(engine: ReferenceEngine, record: Record, history_end: int | None) -> None:
    """Kafka's state after a lost tombstone, in the reference engine: the key's history ends at
    ``history_end`` (None: the key has none), as if the tombstone and the value it replaced were not there."""
    hkey = hashable(record.key)
    shape = engine.shape
    if shape is Shape.STREAM_TABLE:
        table = engine._tasks[record.partition].table
        table.versions[hkey] = [v for v in table.versions.get(hkey, []) if v.ts != record.ts]
        return
    if shape is Shape.TABLE_TABLE_FK:
        side = engine._fk.left_versions if record.topic == engine.spec.left.topic else engine._fk.right_versions
    else:
        state = engine._tasks[record.partition]
        side = state.left if record.topic == engine.spec.left.topic else state.right
    if history_end is None:
        side.latest_ts.pop(hkey, None)
    else:
        side.latest_ts[hkey] = history_end


def _input_dead_letter(engine: ReferenceEngine, record: Record, out: Sequence[Emitted]) -> bool:
    """Whether the reference dead-lettered ``record`` at the join's input (a null key or value: not processed)."""
    return any(
        row.topic == engine.spec.dead_letter_topic
        and dict(row.headers).get("reason") in ("null-key", "null-value")
        and dict(row.headers).get("source_topic") == record.topic
        for row in out
    )


def _advance_dropped(engine: ReferenceEngine, record: Record) -> None:
    """DROPPED_TIME's transformation, after the reference dead-lettered a stream-stream ``record``: Kafka's
    ``KStreamKStreamJoin.process`` advances the task's shared time tracker before it drops the record
    (``skipRecord``), and ``KStreamJoinWindow`` puts every keyed record into its side's window store first
    (a null value stores nothing but moves the store's observed stream time, hence its retention)."""
    task = record.partition
    previous = engine.stream_time.get(task)
    engine.stream_time[task] = record.ts if previous is None else max(previous, record.ts)
    if record.key is None:
        return
    state = engine._tasks.get(task)
    if state is None:
        window = engine.spec.join.window
        assert window is not None
        state = engine._tasks[task] = stream_stream.StreamStreamState(
            window.before, window.after, engine.spec.join.grace, engine.kind
        )
    side = Side.LEFT if record.topic == engine.spec.left.topic else Side.RIGHT
    state.side_time[side] = max(state.side_time.get(side, record.ts), record.ts)
    stream_stream.expire(state, side)


def _store_key(row: stream_stream.Stored) -> tuple[Any, ...]:
    """Where a held record sits in Kafka's outer-join store: ``TimestampedKeyAndJoinSide`` bytes (ts, then
    the right side before the left, then the serialized key), then arrival (the store's value list)."""
    return (row.ts, 0 if row.side is Side.RIGHT else 1, serialized_key_order(row.key), row.seq)


def _due(engine: ReferenceEngine, record: Record) -> list[stream_stream.Stored]:
    """The held results processing ``record`` must flush first by section 3's rule: when the record (keyed,
    with a value) is at the task's new stream time, every pending record whose window closed before it
    (``close < stream time``), in store order (:func:`_store_key`)."""
    if engine.shape is not Shape.STREAM_STREAM or record.key is None or record.value is None:
        return []
    state = engine._tasks.get(record.partition)
    previous = engine.stream_time.get(record.partition)
    now = record.ts if previous is None else max(previous, record.ts)
    if state is None or record.ts != now:
        return []
    return sorted((row for row in state.pending.values() if state.close(row.side, row.ts) < now), key=_store_key)


#: Java's ``Long.MAX_VALUE``: the time tracker's ``minTime`` when its outer-join store was found empty
LONG_MAX = 2**63 - 1


def _java_long(value: int) -> int:
    """``value`` as a Java ``long`` sum wraps (``minTime + after + grace`` overflows when minTime is MAX)."""
    return (value + 2**63) % 2**64 - 2**63


@dataclass
class _KafkaHeld:
    """HELD's transformation: the reference's held records, released on Kafka's schedule. Kafka Streams
    4.1.1's ``KStreamKStreamJoin`` keeps them in its outer-join store (here: the reference's pending
    records, which it puts and removes by the same rules) and scans the store in
    ``emitNonJoinedOuterRecords`` (this class's :meth:`scan`, replacing ``stream_stream.flush_closed``) at
    the records where the reference flushes (keyed, with a value, at the task's stream time)."""

    #: ``TimeTracker.minTime`` per task (by its state's id): the min ts put in the store since the last scan,
    #: or the ts of the last record that scan visited
    min_time: dict[int, int] = field(default_factory=dict)
    #: ``joinAfterMs`` of the processor at work: the window's after for a left record, before for a right one
    join_after: int = 0
    put: set[tuple[int, int]] = field(default_factory=set)  # (task state id, seq) of the records put so far

    def scan(self, state: stream_stream.StreamStreamState, stream_time: int) -> list[Result]:
        """Skips while ``minTime + joinAfterMs + grace >= stream time``; else visits the store in order,
        ``minTime`` set to each record's ts, passes over a record whose window is open (``ts + after`` for
        a left record, ``ts + before`` for a right one, ``+ grace >= stream time``) and stops once one of
        each side was open; emits (and forgets) the others."""
        task = id(state)
        min_time = self.min_time.get(task, LONG_MAX)
        if _java_long(min_time + self.join_after + state.grace) >= stream_time:
            return []
        self.min_time[task] = LONG_MAX
        open_sides: set[Side] = set()
        due = []
        for row in sorted(state.pending.values(), key=_store_key):
            self.min_time[task] = row.ts
            if len(open_sides) == 2:
                break
            if row.ts + (state.after if row.side is Side.LEFT else state.before) + state.grace >= stream_time:
                open_sides.add(row.side)
                continue
            due.append(row)
        for row in due:
            row.pending = False
            del state.pending[row.seq]
        return [stream_stream.non_joined(row.side, row.key, row.value, row.ts) for row in due]

    def after_step(self, engine: ReferenceEngine, record: Record) -> None:
        """``updatedMinTime`` for each record the step put in the store (it became pending)."""
        state = engine._tasks.get(record.partition)
        if not isinstance(state, stream_stream.StreamStreamState):
            return
        task = id(state)
        for row in state.pending.values():
            if (task, row.seq) not in self.put:
                self.put.add((task, row.seq))
                self.min_time[task] = min(self.min_time.get(task, LONG_MAX), row.ts)


@dataclass
class _Replay:
    rows: list[_Row]
    #: every flush of held results was section 3's: exactly the due records, in store order
    documented_flushes: bool


def _reference_rows(
    case: Case, lost: dict[int, int | None], *, dropped_time: bool = False, kafka_held: bool = False
) -> _Replay:
    """The reference's outputs (without dead letters) record by record, with the chosen transformations:
    ``lost`` tombstones forgotten, dropped records advancing the clocks (``dropped_time``), held results
    on Kafka's schedule (``kafka_held``)."""
    spec, functions = case.spec()
    engine = ReferenceEngine(spec, functions=functions)
    window = spec.join.window
    held = _KafkaHeld()
    rows: list[_Row] = []
    documented = True
    with contextlib.ExitStack() as patches:
        if kafka_held:
            patches.enter_context(mock.patch.object(stream_stream, "flush_closed", held.scan))
        for index, record in enumerate(case.records):
            due = [] if kafka_held else _due(engine, record)
            if window is not None:
                held.join_after = window.after if record.topic == spec.left.topic else window.before
            out = engine.process(record)
            joins = [row for row in out if row.topic == engine.output_topic]
            expected = [Emitted(engine.output_topic, row.key, _output(engine, row), row.ts) for row in due]
            documented = documented and joins[: len(expected)] == expected
            flushed = len(expected)
            for row in without_dead_letters(spec, out):
                joined = row.topic == engine.output_topic
                rows.append(_Row(row, index, held=joined and flushed > 0))
                flushed -= joined  # the first join results are the held ones (each followed by its updates)
            if kafka_held:
                held.after_step(engine, record)
            if dropped_time and engine.shape is Shape.STREAM_STREAM and _input_dead_letter(engine, record, out):
                _advance_dropped(engine, record)
            if index in lost:
                _forget_lost_tombstone(engine, record, lost[index])
    return _Replay(rows, documented)


def _output(engine: ReferenceEngine, row: stream_stream.Stored) -> Any:
    """A held record's non-joined result value, as the reference emits it (joiner, output format)."""
    result = stream_stream.non_joined(row.side, row.key, row.value, row.ts)
    return output_value(engine.joiner(result.key, result.left, result.right), engine.spec.output.value_format)


# --- the verdict -----------------------------------------------------------------------------------------
def _npe(case: Case, run: OracleRun) -> bool:
    """NPE's rule: Kafka failed with ``NullPointerException: key cannot be null`` and the case is a left
    stream-table join with grace (versioned table) with a null-key stream record (one Kafka is given:
    joined with null here, not a dead letter)."""
    spec, _ = case.spec()
    return (
        run.error is not None
        and "NullPointerException: key cannot be null" in run.error
        and case.cell.shape is Shape.STREAM_TABLE
        and case.cell.kind is Kind.LEFT
        and spec.join.grace > 0
        and any(r.topic == spec.left.topic and r.key is None and r.value is not None for r in case.records)
    )


def _topics(rows: Sequence[Emitted]) -> dict[str, list[tuple[Any, Any, int]]]:
    topics: dict[str, list[tuple[Any, Any, int]]] = {}
    for row in rows:
        topics.setdefault(row.topic, []).append((hashable(row.key), hashable(row.value), row.ts))
    return topics


def _explains(case: Case, run: OracleRun, chosen: Sequence[Difference], events: _StoreEvents) -> bool:
    lost = events.lost if LOST_TOMBSTONE in chosen else {}
    dropped_time = DROPPED_TIME in chosen
    replay = _reference_rows(case, lost, dropped_time=dropped_time)
    if HELD in chosen:
        # the reference's own held results must be section 3's (due, all of them, in store order): only
        # their schedule is Kafka's
        if not replay.documented_flushes or not any(r.held for r in replay.rows):
            return False
        replay = _reference_rows(case, lost, dropped_time=dropped_time, kafka_held=True)
    return _topics([r.row for r in replay.rows]) == _topics(run.emitted)


def _candidates(case: Case, events: _StoreEvents) -> list[Difference]:
    """The differences whose trigger occurs in the case (or, for output rules, can: the shape has them)."""
    found = []
    if case.cell.shape is Shape.STREAM_STREAM:
        engine = case.engine()
        if any(_input_dead_letter(engine, record, engine.process(record)) for record in case.records):
            found.append(DROPPED_TIME)
    if events.lost:
        found.append(LOST_TOMBSTONE)
    if case.cell.shape is Shape.STREAM_STREAM and case.cell.kind is not Kind.INNER:
        found.append(HELD)
    return found


def classify(case: Case, run: OracleRun) -> Verdict:
    """Equal, explained (by the smallest set of documented differences whose rules together give Kafka's
    output), or unexplained."""
    spec, _ = case.spec()
    if run.error is not None:
        if _npe(case, run):
            return Verdict(case, False, (NPE,))
        return Verdict(case, False, detail=describe(case, run))
    reference = without_dead_letters(spec, case.engine().replay(case.records))
    if _topics(reference) == _topics(run.emitted):
        return Verdict(case, True)
    events = _store_events(case)
    candidates = _candidates(case, events)
    for size in range(1, len(candidates) + 1):
        for chosen in itertools.combinations(candidates, size):
            if _explains(case, run, chosen, events):
                return Verdict(case, False, tuple(chosen))
    return Verdict(case, False, detail=describe(case, run))
