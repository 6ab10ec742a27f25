"""The documented differences between the reference engine and Kafka Streams 4.1.1, each recognised by its
rule on one generated case of the differential matrix (``tests/matrix_cases.py``).

:func:`classify` says whether Kafka Streams' output for a case equals the reference engine's, and if not,
which documented differences explain it. A difference explains a case only by its rule: its trigger occurs
in the case, and the reference's output, transformed as the rule says (Kafka's versioned-store state after a
tombstone it loses), equals Kafka's exactly, or (held stream-stream results) relates to it as the rule
states. Differences combine by applying their transformations in sequence; the smallest set that
explains the case is named. Anything else is unexplained. The rules, their Kafka sources and the cases each
explains are in ``docs/SEMANTICS.md`` ("Differences from Kafka Streams").
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka_streams_oracle import OracleRun, without_dead_letters
from matrix_cases import Case
from streamjoin.core.records import Emitted, Record
from streamjoin.core.reference import ReferenceEngine
from streamjoin.core.semantics import aggregate
from streamjoin.core.semantics.common import hashable, serialized_key_order
from streamjoin.core.shapes import Kind, Shape


@dataclass(frozen=True)
class Difference:
    """A documented difference: its name (as ``docs/SEMANTICS.md`` lists it, in backquotes) and what it is."""

    name: str
    what: str

    def __str__(self) -> str:
        return self.name


#: applied in this order when combined (the versioned store's state, then the outputs)
LOST_TOMBSTONE = Difference(
    "versioned-same-ts-tombstone",
    "a tombstone at the timestamp of a key's latest value deletes that value without leaving a trace when the "
    "key's history ends before it: a later put older than the tombstone becomes the key's latest value",
)
HELD = Difference(
    "held-non-joined",
    "stream-stream left/outer: held non-joined results come out later than here, or not before the input ends",
)
NPE = Difference(
    "grace-null-key-npe",
    "stream-table left join with grace: a null-key stream record fails the task (NullPointerException)",
)
DIFFERENCES = (LOST_TOMBSTONE, HELD, NPE)


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


def _held_count(engine: ReferenceEngine, record: Record) -> int:
    """How many held results processing ``record`` flushes first (stream-stream: the pending records whose
    window closes before the new stream time, when the record is at it)."""
    if engine.shape is not Shape.STREAM_STREAM or record.key is None or record.value is None:
        return 0
    state = engine._tasks.get(record.partition)
    previous = engine.stream_time.get(record.partition)
    now = record.ts if previous is None else max(previous, record.ts)
    if state is None or record.ts != now:
        return 0
    return sum(1 for row in state.pending.values() if state.close(row.side, row.ts) < now)


def _reference_rows(case: Case, lost: dict[int, int | None]) -> list[_Row]:
    spec, functions = case.spec()
    engine = ReferenceEngine(spec, functions=functions)
    rows: list[_Row] = []
    for index, record in enumerate(case.records):
        held = _held_count(engine, record)
        for row in without_dead_letters(spec, engine.process(record)):
            joined = row.topic == engine.output_topic
            rows.append(_Row(row, index, held=joined and held > 0))
            held -= joined  # the first join results are the held ones (each followed by its updates)
        if index in lost:
            _forget_lost_tombstone(engine, record, lost[index])
    return rows


def _aggregate_of(case: Case, joined: Sequence[Emitted]) -> list[Emitted]:
    """The reference's aggregate updates for a stream of join results (a stream-producing join's)."""
    engine = case.engine()
    assert engine.group_by is not None and engine.aggregate_topic is not None
    state = aggregate.StreamAggregateState()
    out: list[Emitted] = []
    for row in joined:
        group = engine.group_by(row.key, row.value)
        amount: Any = 1
        if group is not None and not engine.counting:
            assert engine.value_of is not None
            amount = engine.value_of(row.key, row.value)
        if group is None or amount is None:
            continue  # a null group or amount: a dead letter here, dropped by Kafka
        updates = aggregate.step_stream(state, group, amount, row.ts)
        out += [Emitted(engine.aggregate_topic, u.group, u.total, u.ts) for u in updates]
    return out


def _store_order(row: Emitted) -> tuple[Any, ...]:
    """Where a held result sits in Kafka's outer-join store: ``TimestampedKeyAndJoinSide`` bytes, i.e.
    ts, then the right side before the left, then the serialized key."""
    assert isinstance(row.value, dict)
    return (row.ts, 0 if row.value["left"] is None else 1, serialized_key_order(row.key))


def _held_relation(case: Case, rows: list[_Row], kafka: list[Emitted]) -> bool:
    """HELD's rule. Kafka's join results are the reference's other results (joined, and non-joined
    emitted at once), all of them, in order, interleaved with some of the reference's held results (each at
    most once), each coming no earlier than in the reference (counted in other results before it); held
    results that Kafka emits one after the other are in its store's order (ts, right before left, key).
    Kafka's aggregate updates (if any) are the reference's aggregate of Kafka's own join results."""
    engine = case.engine()
    joins = [r for r in rows if r.row.topic == engine.output_topic]
    kafka_joins = [row for row in kafka if row.topic == engine.output_topic]
    others = [r.row for r in joins if not r.held]
    held: list[tuple[Emitted, int]] = []  # (row, how many other results precede it in the reference)
    for r in joins:
        if r.held:
            held.append((r.row, sum(1 for o in joins[: joins.index(r)] if not o.held)))

    @functools.cache
    def fits(i: int, j: int, used: int, last: tuple[Any, ...] | None) -> bool:
        if i == len(kafka_joins):
            return j == len(others)
        row = kafka_joins[i]
        if j < len(others) and row == others[j] and fits(i + 1, j + 1, used, None):
            return True
        if isinstance(row.value, dict) and None in (row.value.get("left"), row.value.get("right")):
            order = _store_order(row)
            if last is not None and order < last:
                return False
            return any(
                not used & (1 << k) and h == row and j >= before and fits(i + 1, j, used | (1 << k), order)
                for k, (h, before) in enumerate(held)
            )
        return False

    if not fits(0, 0, 0, None):
        return False
    if engine.aggregate_topic is None:
        return all(row.topic == engine.output_topic for row in kafka)
    kafka_updates = [row for row in kafka if row.topic == engine.aggregate_topic]
    return len(kafka_updates) + len(kafka_joins) == len(kafka) and kafka_updates == _aggregate_of(case, kafka_joins)


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
    rows = _reference_rows(case, lost)
    if HELD in chosen:
        return any(r.held for r in rows) and _held_relation(case, rows, run.emitted)
    return _topics([r.row for r in rows]) == _topics(run.emitted)


def _candidates(case: Case, events: _StoreEvents) -> list[Difference]:
    """The differences whose trigger occurs in the case (or, for output rules, can: the shape has them)."""
    found = []
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
