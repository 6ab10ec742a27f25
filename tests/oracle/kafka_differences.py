"""The documented differences between the reference engine and Kafka Streams 4.1.1, each recognised by its
rule on one generated case: of the differential matrix (``tests/matrix_cases.py``, one join) or a chain of
joins (``tests/chained_cases.py``, where each rule applies to every stage it concerns).

:func:`classify` says whether Kafka Streams' output for a case equals the reference engine's, and if not,
which documented differences explain it. A difference explains a case only by its rule: its trigger occurs
in the case, and the reference's output, transformed as the rule says (the stream-stream clocks that a
record Kafka drops still advances; Kafka's versioned-store state after a tombstone it loses; the
reference's own held stream-stream results released on Kafka's schedule; in a chain, a table-table stage's
right records joined at the earlier table-table stage's value-getter timestamps), equals Kafka's exactly.
Differences combine by applying their transformations in sequence; the smallest set that explains the case
is named. Anything else is unexplained. The rules, their Kafka sources and the cases each explains are in
``docs/SEMANTICS.md`` ("Differences from Kafka Streams"). :func:`traced` gives the oracle's runner the
values a chain reaches by those rules (its tables of derived keys and aggregate entries need them).
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from chained_cases import ChainCase
from kafka_streams_oracle import OracleRun, Traced, without_dead_letters
from matrix_cases import Case
from streamjoin.core.records import Emitted, Record
from streamjoin.core.reference import ReferenceEngine, Stage
from streamjoin.core.semantics import stream_stream, table_table
from streamjoin.core.semantics.common import Result, Side, Step, hashable, serialized_key_order
from streamjoin.core.shapes import Kind, Role, Shape
from streamjoin.core.spec import PipelineSpec


@dataclass(frozen=True)
class Difference:
    """A documented difference: its name (as ``docs/SEMANTICS.md`` lists it, in backquotes), what it is, and
    whether only a chain of joins can show it (not a matrix case)."""

    name: str
    what: str
    chains_only: bool = False

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
GETTER_TS = Difference(
    "chained-table-getter-ts",
    "a table-table stage after a table-table stage: a right record finds the earlier stage's result through "
    "that join's value getter, whose timestamp is recomputed from its sides' current values",
    chains_only=True,
)
DIFFERENCES = (DROPPED_TIME, LOST_TOMBSTONE, HELD, NPE, GETTER_TS)


@dataclass(frozen=True)
class Verdict:
    """A case's outcome: equal, explained by ``explained_by`` (non-empty), or unexplained (``detail``)."""

    case: Any  # a matrix Case or a ChainCase
    equal: bool
    explained_by: tuple[Difference, ...] = ()
    detail: str = ""

    @property
    def unexplained(self) -> bool:
        return not self.equal and not self.explained_by


@dataclass(frozen=True)
class Subject:
    """A case as the rules read it: its spec (one join or a chain), the Python projections, the records (file
    order, one task) and how a failing test shows it."""

    spec: PipelineSpec
    functions: Mapping[str, Callable[..., Any]]
    records: tuple[Record, ...]
    text: str

    def engine(self, *, trace: bool = False) -> ReferenceEngine:
        return ReferenceEngine(self.spec, functions=self.functions, trace=trace)


def subject(case: Case | ChainCase) -> Subject:
    """The rules' view of a matrix case or of a chain."""
    if isinstance(case, ChainCase):
        stages = " -> ".join(f"{join.shape.value} {join.kind.value}" for join in case.spec.stages)
        lines = [f"{case.name}: {stages} ({len(case.records)} records, file order):"]
        lines += [f"  {r.topic} {r.key}={json.dumps(r.value)}@{r.ts}" for r in case.records]
        return Subject(case.spec, case.functions, case.records, "\n".join(lines))
    spec, functions = case.spec()
    return Subject(spec, functions, case.records, str(case))


# --- showing outputs -----------------------------------------------------------------------------------
def per_topic(rows: Sequence[Emitted]) -> dict[str, list[str]]:
    topics: dict[str, list[str]] = {}
    for row in rows:
        topics.setdefault(row.topic, []).append(f"{row.key}={json.dumps(row.value)}@{row.ts}")
    return topics


def show(topics: dict[str, list[str]]) -> str:
    shown = (f"  {topic}:\n" + "\n".join(f"    {row}" for row in rows) for topic, rows in topics.items())
    return "\n".join(shown) or "  (nothing)"


def describe(case: Subject, run: OracleRun) -> str:
    """The case and both outputs (what a failing test prints)."""
    reference = per_topic(without_dead_letters(case.spec, case.engine().replay(case.records)))
    if run.error is not None:
        return f"{case.text}\nKafka Streams failed:\n{run.error.strip()[:1500]}\nreference:\n{show(reference)}"
    return f"{case.text}\nreference:\n{show(reference)}\nKafka Streams 4.1.1:\n{show(per_topic(run.emitted))}"


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


def _store_events(case: Subject) -> _StoreEvents:
    """Kafka's versioned stores over the case's table records (those Kafka is given: a null-key table record
    is a dead letter here, and left out of Kafka's input)."""
    stores = {
        inp.topic: KafkaVersionedStore(inp.versioned.history_retention)
        for inp in case.spec.inputs.values()
        if inp.versioned is not None
    }
    if not stores:
        return _StoreEvents({})
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
def _forget_lost_tombstone(engine: ReferenceEngine, record: Record, history_end: int | None) -> None:
    """Kafka's state after a lost tombstone, in the reference engine (every stage that reads the table): the
    key's history ends at ``history_end`` (None: the key has none), as if the tombstone and the value it
    replaced were not there."""
    hkey = hashable(record.key)
    for stage in engine.stages:
        for side, inp in ((Side.LEFT, stage.left_input), (Side.RIGHT, stage.right_input)):
            if inp is None or inp.topic != record.topic:
                continue
            if stage.shape is Shape.STREAM_TABLE:
                table = stage.tasks[record.partition].table
                table.versions[hkey] = [v for v in table.versions.get(hkey, []) if v.ts != record.ts]
                continue
            if stage.shape is Shape.TABLE_TABLE_FK:
                assert stage.fk is not None
                versions = stage.fk.left_versions if side is Side.LEFT else stage.fk.right_versions
            else:
                state = stage.tasks[record.partition]
                versions = state.left if side is Side.LEFT else state.right
            if history_end is None:
                versions.latest_ts.pop(hkey, None)
            else:
                versions.latest_ts[hkey] = history_end


def _drops(stage: Stage, record: Record, side: Side, role: Role) -> bool:
    """DROPPED_TIME's trigger: a stream-stream stage drops the record (the reference dead-letters it there): a
    null value, or a null key on a side the stage does not keep."""
    return stage.shape is Shape.STREAM_STREAM and (
        record.value is None or (record.key is None and not stage.keeps(side, role))
    )


def _advance_dropped(stage: Stage, record: Record, side: Side) -> None:
    """DROPPED_TIME's transformation, after a stream-stream ``stage`` dropped ``record``: Kafka's
    ``KStreamKStreamJoin.process`` advances the join's shared time tracker before it drops the record
    (``skipRecord``), and ``KStreamJoinWindow`` puts every keyed record into its side's window store first
    (a null value stores nothing but moves the store's observed stream time, hence its retention)."""
    task = record.partition
    previous = stage.stream_time.get(task)
    stage.stream_time[task] = record.ts if previous is None else max(previous, record.ts)
    if record.key is None:
        return
    state = stage.tasks.get(task)
    if state is None:
        window = stage.join.window
        assert window is not None
        state = stage.tasks[task] = stream_stream.StreamStreamState(
            window.before, window.after, stage.join.grace, stage.kind
        )
    state.side_time[side] = max(state.side_time.get(side, record.ts), record.ts)
    stream_stream.expire(state, side)


def _store_key(row: stream_stream.Stored) -> tuple[Any, ...]:
    """Where a held record sits in Kafka's outer-join store: ``TimestampedKeyAndJoinSide`` bytes (ts, then
    the right side before the left, then the serialized key), then arrival (the store's value list)."""
    return (row.ts, 0 if row.side is Side.RIGHT else 1, serialized_key_order(row.key), row.seq)


def _due(state: stream_stream.StreamStreamState, record: Record, stream_time: int) -> list[stream_stream.Stored]:
    """The held results a stream-stream step of ``record`` (keyed, with a value) must flush first by section 3's
    rule: when the record is at the stage's stream time, every pending record whose window closed before it
    (``close < stream time``), in store order (:func:`_store_key`)."""
    if record.ts != stream_time:
        return []
    due = (row for row in state.pending.values() if state.close(row.side, row.ts) < stream_time)
    return sorted(due, key=_store_key)


#: Java's ``Long.MAX_VALUE``: the time tracker's ``minTime`` when its outer-join store was found empty
LONG_MAX = 2**63 - 1


def _java_long(value: int) -> int:
    """``value`` as a Java ``long`` sum wraps (``minTime + after + grace`` overflows when minTime is MAX)."""
    return (value + 2**63) % 2**64 - 2**63


@dataclass
class _KafkaHeld:
    """HELD's transformation: the reference's held records, released on Kafka's schedule. Kafka Streams
    4.1.1's ``KStreamKStreamJoin`` keeps them in its outer-join store (here: the reference's pending
    records of each stream-stream stage, which it puts and removes by the same rules) and scans the store in
    ``emitNonJoinedOuterRecords`` (this class's :meth:`scan`, replacing ``stream_stream.flush_closed``) at
    the records where the reference flushes (keyed, with a value, at the stage's stream time)."""

    #: ``TimeTracker.minTime`` per stage task (by its state's id): the min ts put in the store since the last
    #: scan, or the ts of the last record that scan visited
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

    def track(self, state: stream_stream.StreamStreamState) -> None:
        """``updatedMinTime`` for each record a step put in the store (it became pending)."""
        task = id(state)
        for row in state.pending.values():
            if (task, row.seq) not in self.put:
                self.put.add((task, row.seq))
                self.min_time[task] = min(self.min_time.get(task, LONG_MAX), row.ts)


def _getter_ts(engine: ReferenceEngine, index: int, hkey: Any, partition: int) -> int | None:
    """The timestamp Kafka's value getter of table-table stage ``index`` gives key ``hkey`` (None: no value):
    ``KTableKTable{Inner,Left,Outer}JoinValueGetter.get`` joins its sides' current values at the max of their
    timestamps (a left join without a right value: the left one's), an earlier table-table stage's result
    (not materialized either) being its own getter's."""
    state = engine.stages[index].tasks.get(partition)
    if not isinstance(state, table_table.TableTableState):
        return None
    left_row, right_row = state.left.values.get(hkey), state.right.values.get(hkey)
    left_ts = None if left_row is None else left_row[1]
    if left_ts is not None and index > 0 and engine.stages[index - 1].shape is Shape.TABLE_TABLE:
        left_ts = _getter_ts(engine, index - 1, hkey, partition)
    right_ts = None if right_row is None else right_row[1]
    present = [ts for ts in (left_ts, right_ts) if ts is not None]
    kind = engine.stages[index].kind
    if kind is Kind.INNER:
        return max(present) if len(present) == 2 else None
    if kind is Kind.LEFT:
        return None if left_ts is None else max(present)
    return max(present) if present else None


def _stage_of(engine: ReferenceEngine, state: Any) -> int:
    return next(stage.index for stage in engine.stages if any(task is state for task in stage.tasks.values()))


@dataclass
class _Replay:
    rows: list[Emitted] = field(default_factory=list)
    #: every flush of held results was section 3's: exactly the due records, in store order, first
    documented_flushes: bool = True
    held: int = 0  # held results the reference released
    dropped: int = 0  # records a stream-stream stage dropped (DROPPED_TIME's trigger)
    traced: Traced = field(default_factory=list)  # with ``trace``: every stage's results


def _reference_rows(
    case: Subject,
    lost: dict[int, int | None],
    *,
    dropped_time: bool = False,
    kafka_held: bool = False,
    getter_ts: bool = False,
    trace: bool = False,
) -> _Replay:
    """The reference's outputs (without dead letters) with the chosen transformations, applied at every
    stage they concern: ``lost`` tombstones forgotten, records a stream-stream stage drops advancing its
    clocks (``dropped_time``), held results on Kafka's schedule (``kafka_held``), a table-table stage after
    a table-table stage joining its right records at the earlier stage's getter timestamps (``getter_ts``)."""
    engine = case.engine(trace=trace)
    replay = _Replay(traced=engine.traced)
    held = _KafkaHeld()
    original_step, original_feed, original_joined = stream_stream.step, engine._feed, table_table.joined

    def joined(state: table_table.TableTableState, record: Record, side: Side, existed: bool) -> Step:
        index = _stage_of(engine, state) if side is Side.RIGHT else 0
        hkey = hashable(record.key)
        row = state.left.values.get(hkey)
        if index == 0 or engine.stages[index - 1].shape is not Shape.TABLE_TABLE or row is None:
            return original_joined(state, record, side, existed)
        looked_up = _getter_ts(engine, index - 1, hkey, record.partition)
        state.left.values[hkey] = (row[0], row[1] if looked_up is None else looked_up)
        try:
            return original_joined(state, record, side, existed)
        finally:
            state.left.values[hkey] = row

    def step(state: stream_stream.StreamStreamState, record: Record, stream_time: int, side: Side) -> Step:
        if kafka_held:
            held.join_after = state.after if side is Side.LEFT else state.before
            result = original_step(state, record, stream_time, side)
            held.track(state)
            return result
        due = _due(state, record, stream_time)
        result = original_step(state, record, stream_time, side)
        expected = [stream_stream.non_joined(row.side, row.key, row.value, row.ts) for row in due]
        replay.documented_flushes &= result.results[: len(expected)] == expected
        replay.held += len(expected)
        return result

    def feed(stage: Stage, record: Record, side: Side, role: Role) -> list[Emitted]:
        out = original_feed(stage, record, side, role)
        if _drops(stage, record, side, role):
            replay.dropped += 1
            if dropped_time:
                _advance_dropped(stage, record, side)
        return out

    with contextlib.ExitStack() as patches:
        patches.enter_context(mock.patch.object(stream_stream, "step", step))
        patches.enter_context(mock.patch.object(engine, "_feed", feed))
        if kafka_held:
            patches.enter_context(mock.patch.object(stream_stream, "flush_closed", held.scan))
        if getter_ts:
            patches.enter_context(mock.patch.object(table_table, "joined", joined))
        for index, record in enumerate(case.records):
            replay.rows.extend(without_dead_letters(case.spec, engine.process(record)))
            if index in lost:
                _forget_lost_tombstone(engine, record, lost[index])
    return replay


# --- the verdict -----------------------------------------------------------------------------------------
def _npe(case: Subject, run: OracleRun) -> bool:
    """NPE's rule: Kafka failed with ``NullPointerException: key cannot be null`` and a left stream-table stage
    with grace (versioned table) gets a null-key stream record with a value: an input record (joined with null
    here, not a dead letter; Kafka is given it) or, in a chain, an earlier stage's result (KIP-962's)."""
    if run.error is None or "NullPointerException: key cannot be null" not in run.error:
        return False
    engine = case.engine(trace=True)
    engine.replay(case.records)
    for stage in engine.stages:
        if stage.shape is not Shape.STREAM_TABLE or stage.kind is not Kind.LEFT or stage.join.grace <= 0:
            continue
        if stage.left_input is not None:
            topic = stage.left_input.topic
            lefts = [(r.key, r.value) for r in case.records if r.topic == topic]
        else:
            lefts = [(result.key, value) for result, value in engine.traced[stage.index - 1]]
        if any(key is None and value is not None for key, value in lefts):
            return True
    return False


def _topics(rows: Sequence[Emitted]) -> dict[str, list[tuple[Any, Any, int]]]:
    topics: dict[str, list[tuple[Any, Any, int]]] = {}
    for row in rows:
        topics.setdefault(row.topic, []).append((hashable(row.key), hashable(row.value), row.ts))
    return topics


def _explains(case: Subject, run: OracleRun, chosen: Sequence[Difference], events: _StoreEvents) -> bool:
    lost = events.lost if LOST_TOMBSTONE in chosen else {}
    dropped_time, getter_ts = DROPPED_TIME in chosen, GETTER_TS in chosen
    replay = _reference_rows(case, lost, dropped_time=dropped_time, getter_ts=getter_ts)
    if HELD in chosen:
        # the reference's own held results must be section 3's (due, all of them, in store order): only
        # their schedule is Kafka's
        if not replay.documented_flushes or not replay.held:
            return False
        replay = _reference_rows(case, lost, dropped_time=dropped_time, kafka_held=True, getter_ts=getter_ts)
    return _topics(replay.rows) == _topics(run.emitted)


def _candidates(case: Subject, events: _StoreEvents) -> list[Difference]:
    """The differences whose trigger occurs in the case (or, for output rules, can: a stage has them)."""
    found = []
    if _reference_rows(case, {}).dropped:
        found.append(DROPPED_TIME)
    if events.lost:
        found.append(LOST_TOMBSTONE)
    if any(join.shape is Shape.STREAM_STREAM and join.kind is not Kind.INNER for join in case.spec.stages):
        found.append(HELD)
    stages = case.spec.stages
    if any(a.shape is b.shape is Shape.TABLE_TABLE for a, b in itertools.pairwise(stages)):
        found.append(GETTER_TS)
    return found


def _combinations(case: Subject, events: _StoreEvents) -> Iterator[tuple[Difference, ...]]:
    """The sets of differences whose trigger occurs in the case, smallest first."""
    candidates = _candidates(case, events)
    for size in range(1, len(candidates) + 1):
        yield from itertools.combinations(candidates, size)


def traced(case: ChainCase) -> list[Traced]:
    """The chain's stages as the reference replays them by each set of the rules whose trigger the case holds:
    the values Kafka Streams reaches where those rules explain it, which the oracle's tables must hold
    (``kafka_streams_runs(traced=...)``)."""
    seen = subject(case)
    events = _store_events(seen)
    return [
        _reference_rows(seen, events.lost if LOST_TOMBSTONE in chosen else {}, dropped_time=DROPPED_TIME in chosen,
                        kafka_held=HELD in chosen, getter_ts=GETTER_TS in chosen, trace=True).traced
        for chosen in _combinations(seen, events)
    ]  # fmt: skip


def classify(case: Case | ChainCase, run: OracleRun) -> Verdict:
    """Equal, explained (by the smallest set of documented differences whose rules together give Kafka's
    output), or unexplained."""
    seen = subject(case)
    if run.error is not None:
        if _npe(seen, run):
            return Verdict(case, False, (NPE,))
        return Verdict(case, False, detail=describe(seen, run))
    reference = without_dead_letters(seen.spec, seen.engine().replay(seen.records))
    if _topics(reference) == _topics(run.emitted):
        return Verdict(case, True)
    events = _store_events(seen)
    for chosen in _combinations(seen, events):
        if _explains(seen, run, chosen, events):
            return Verdict(case, False, chosen)
    return Verdict(case, False, detail=describe(seen, run))
