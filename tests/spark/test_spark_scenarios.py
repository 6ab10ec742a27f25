"""The Spark engine against the conformance scenarios and against the reference engine.

Every ``tests/scenarios/*.yaml`` goes through :func:`streamjoin.spark.replay.replay` (file order) and
must give the scenario's changelog and final table. Then Hypothesis feeds small random inputs of every
shape to both the Spark replay and ``ReferenceEngine.replay`` and compares what they emit (few examples:
each Spark replay costs a second or two).

Spark's JSON drops null fields (``{"left": 1, "right": null}`` comes back as ``{"left": 1}``), so
values are compared with null fields removed. Spark's replay lists dead letters after the changelog;
they are compared as a multiset. Changelogs are compared per output topic (see :func:`assert_same`).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scenario_loader import Scenario, load_scenarios
from streamjoin.core.records import Emitted, Record, final_tables
from streamjoin.core.reference import ReferenceEngine
from streamjoin.core.spec import PipelineSpec, parse_spec
from streamjoin.spark.engine import process_batch
from streamjoin.spark.replay import raw_frame, replay
from streamjoin.spark.state import KernelCheckpoint

pytestmark = pytest.mark.spark
SCENARIOS = load_scenarios()


def without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    return value


def _parsed(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def as_records(records: list[Record]) -> list[dict[str, Any]]:
    return [{"topic": r.topic, "key": r.key, "value": r.value, "ts": r.ts, "partition": r.partition} for r in records]


def normalised(rows: list[Emitted], dead_letter_topic: str) -> tuple[list[tuple[Any, ...]], Counter[str]]:
    """``(changelog, dead letters)``: the changelog in order, the dead letters as a multiset."""
    changelog, dead = [], Counter()
    for row in rows:
        if row.topic == dead_letter_topic:
            fields = {"key": row.key, "value": without_nulls(_parsed(row.value)), "ts": row.ts}
            dead[json.dumps({**fields, "headers": dict(row.headers)}, sort_keys=True)] += 1
        else:
            changelog.append((row.topic, row.key, without_nulls(row.value), row.ts))
    return changelog, dead


def spark_replay(spark: Any, spec: PipelineSpec, records: list[Record], **options: Any) -> list[Emitted]:
    """Spark's replay (``options``: its ``batch`` and ``max_records``) as :class:`Emitted` rows. A function
    joiner's results travel as JSON text (see :mod:`streamjoin.spark.projection`): they are decoded here."""
    out = replay(spark, spec, as_records(records), **options)
    json_text = spec.join.joiner.function is not None
    joined_topic = spec.output.topic or "<join>"
    rows = []
    for r in out:
        value = r["value"]
        if json_text and r["topic"] == joined_topic and isinstance(value, str):
            value = json.loads(value)
        rows.append(Emitted(r["topic"], r["key"], value, r["ts"], tuple((r.get("headers") or {}).items())))
    return rows


def _show(rows: list[tuple[Any, ...]]) -> str:
    return "\n".join(f"  {row}" for row in rows) or "  (nothing)"


def per_topic(rows: list[tuple[Any, ...]]) -> dict[str, list[tuple[Any, ...]]]:
    topics: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        topics.setdefault(row[0], []).append(row)
    return topics


def assert_same(expected: list[Emitted], got: list[Emitted], dead_letter_topic: str, what: str) -> None:
    """Same changelog per output topic, in order, and the same dead letters.

    Across topics, Spark's replay lists a triggering record's join results before their aggregate
    updates (it sorts by position, then stage); the reference interleaves each result with its updates.
    Kafka consumers only see the order within a topic, which is compared exactly.
    """
    want_log, want_dead = normalised(expected, dead_letter_topic)
    got_log, got_dead = normalised(got, dead_letter_topic)
    assert per_topic(got_log) == per_topic(want_log), (
        f"{what}: changelog differs\nexpected:\n{_show(want_log)}\ngot:\n{_show(got_log)}"
    )
    assert got_dead == want_dead, f"{what}: dead letters differ\nexpected: {want_dead}\ngot:      {got_dead}"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_scenario_through_spark_replay(spark: Any, scenario: Scenario) -> None:
    got = spark_replay(spark, scenario.spec, scenario.inputs)
    assert_same(scenario.expected, got, scenario.spec.dead_letter_topic, scenario.name)
    table = final_tables(
        [Emitted(r.topic, r.key, without_nulls(r.value), r.ts) for r in got],
        exclude=[scenario.spec.dead_letter_topic],
    )
    wanted = {topic: {k: without_nulls(v) for k, v in rows.items()} for topic, rows in scenario.final_table.items()}
    assert table == wanted, f"{scenario.name}: final table differs\nexpected: {wanted}\ngot:      {table}"
    if "dead_lettered" in scenario.counters:
        dead = sum(1 for r in got if r.topic == scenario.spec.dead_letter_topic)
        assert dead == scenario.counters["dead_lettered"], f"{scenario.name}: dead letters: {dead}"


def test_stream_stream_reports_no_late_drops(spark: Any) -> None:
    """Kafka Streams drops no out-of-order record in a stream-stream join: neither does the Spark engine."""
    scenario = next(s for s in SCENARIOS if s.name == "stream_stream_left_out_of_order")
    state = KernelCheckpoint(None)  # a fresh state in a temporary folder
    raw = raw_frame(spark, scenario.spec, as_records(scenario.inputs), batch=False)
    out = process_batch(raw, scenario.spec, state, file_order=True)
    assert out.results.count() == len(scenario.expected)


# --- Spark == reference on random inputs ---------------------------------------------------------------
def _spec(join: dict[str, Any], left: dict[str, Any], right: dict[str, Any], **extra: Any) -> PipelineSpec:
    return parse_spec(
        {
            "name": "prop",
            "inputs": {"l": {"topic": "lt", **left}, "r": {"topic": "rt", **right}},
            "join": {"left": "l", "right": "r", **join},
            "output": {"topic": "out"},
            "dead_letter_topic": "dlq",
            **extra,
        }
    )


#: the shapes :func:`pipelines` draws from (``stream-table-versioned``: a stream-table join on a versioned table)
FAMILIES = ("stream-stream", "table-table", "table-table-fk", "stream-table-versioned")


@st.composite
def pipelines(draw: st.DrawFn, family: str | None = None) -> tuple[PipelineSpec, dict[str, Any]]:
    """A small spec of any shape of :data:`FAMILIES`, or of ``family`` (Spark SQL projections, with Python
    stand-ins for the reference)."""
    shape = family or draw(st.sampled_from(FAMILIES))
    stream, table = {"role": "stream"}, {"role": "table"}
    functions: dict[str, Any] = {}
    if shape == "stream-stream":
        window = {"before": draw(st.integers(0, 8)), "after": draw(st.integers(0, 8))}
        kind = draw(st.sampled_from(["inner", "left", "outer"]))
        join = {"shape": shape, "kind": kind, "window": window, "grace": draw(st.integers(0, 3))}
        return _spec(join, stream, stream), functions
    if shape == "stream-table-versioned":
        grace = draw(st.sampled_from([0, 0, 3, 8]))
        versioned = {**table, "versioned": {"history_retention": max(grace, draw(st.sampled_from([4, 10, 1000])))}}
        join = {"shape": "stream-table", "kind": draw(st.sampled_from(["inner", "left"])), "grace": grace}
        return _spec(join, stream, versioned), functions
    left, right = dict(table), dict(table)
    for side in (left, right):
        if draw(st.booleans()) and draw(st.booleans()):
            side["versioned"] = {"history_retention": 1000}
    extra: dict[str, Any] = {}
    if draw(st.booleans()):
        extra["aggregate"] = {
            "group_by": {"expr": "substring(coalesce(value.left, '-'), 1, 1)"},
            "reduce": "count",
            "output": {"topic": "agg"},
        }
        functions["group_by"] = lambda key, value: (value["left"] or "-")[:1]
    if shape == "table-table":
        join = {"shape": shape, "kind": draw(st.sampled_from(["inner", "left", "outer"]))}
    else:
        join = {"shape": shape, "kind": draw(st.sampled_from(["inner", "left"]))}
        join["foreign_key"] = {"expr": "substring(value, 1, 1)"}
        functions["foreign_key"] = lambda key, value: value[:1]
    return _spec(join, left, right, **extra), functions


@st.composite
def inputs(draw: st.DrawFn, spec: PipelineSpec) -> list[Record]:
    fk = spec.join.foreign_key is not None
    records = []
    for _ in range(draw(st.integers(1, 12))):
        topic = draw(st.sampled_from(["lt", "rt"]))
        role = spec.left.role if topic == "lt" else spec.right.role
        keys = "xyz" if fk and topic == "rt" else "ABC"
        tombstone = role.value != "stream" and draw(st.integers(0, 3)) == 0
        value = None if tombstone else draw(st.sampled_from("xyz")) + draw(st.sampled_from(["", "1", "22"]))
        # stream records may lack a key (KIP-962: joined with null on a kept side, else a dead letter)
        key = draw(st.sampled_from([*keys, None] if role.value == "stream" else keys))
        records.append(Record(topic, key, value, draw(st.integers(0, 20))))
    return records


# --- what a random example exercised (as tests/matrix_cases.py's features, for the property tests) ----------
#: what each feature name means (what :func:`exercised` saw the reference engine do)
FEATURES = {
    "joined": "a join result with both sides",
    "left-only": "a join result (l, null)",
    "deleted": "a tombstone join result (a table row deleted)",
    "out-of-order": "a record older than stream time that the join processed",
    "aggregate": "an aggregate update",
    "cut": "more than one micro-batch",
    "across-batches": "a join result of two records of different micro-batches (state carried between them)",
}


def needs(spec: PipelineSpec) -> set[str]:
    """What one example of ``spec`` must exercise for the Spark property tests to say something about it."""
    need = {"joined"}
    if spec.join.kind.value != "inner":
        need.add("left-only")
    if spec.left.role.value == "table":  # a table-producing join: deletes travel as tombstones
        need.add("deleted")
    else:  # stream-stream windows, a versioned table's as-of lookup: records behind stream time
        need.add("out-of-order")
    if spec.aggregate is not None:
        need.add("aggregate")
    return need


def _joins(spec: PipelineSpec, functions: dict[str, Any], record: Record, other: Record) -> bool:
    """Can ``other`` (a record with a value) be the other side of a join result of ``record``: the other input,
    the same key (a foreign key join: the left value points at the right key), a stream-stream window's time."""
    if other.topic == record.topic:
        return False
    left, right = (record, other) if record.topic == "lt" else (other, record)
    if spec.join.foreign_key is not None:
        return bool(functions["foreign_key"](left.key, left.value) == right.key)
    window = spec.join.window
    in_window = window is None or left.ts - window.before <= right.ts <= left.ts + window.after
    return left.key == right.key and in_window


def exercised(
    spec: PipelineSpec, functions: dict[str, Any], records: list[Record], batch_of: dict[int, int] | None = None
) -> set[str]:
    """The :data:`FEATURES` the reference engine showed on ``records``, one at a time in the given order (the
    file order; the batch ordering rule's for a batch replay). ``batch_of``: each record's micro-batch, by its
    index in ``records``: ``cut``, ``across-batches``."""
    engine = ReferenceEngine(spec, functions=functions)
    found: set[str] = set()
    stream_time: int | None = None
    seen: list[tuple[Record, int]] = []  # (record, its batch), the ones processed so far
    for index, record in enumerate(records):
        out = engine.process(record)
        batch = batch_of[index] if batch_of is not None else 0
        if any(row.topic == spec.dead_letter_topic for row in out):
            continue
        joined = False
        for row in out:
            if row.topic == "agg":
                found.add("aggregate")
            elif row.topic == spec.output.topic:
                if row.value is None:
                    found.add("deleted")
                elif row.value["left"] is not None and row.value["right"] is not None:
                    found.add("joined")
                    joined = True
                elif row.value["right"] is None:
                    found.add("left-only")
        if joined and any(b < batch and _joins(spec, functions, record, other) for other, b in seen):
            found.add("across-batches")
        if stream_time is not None and record.ts < stream_time:
            found.add("out-of-order")
        stream_time = record.ts if stream_time is None else max(stream_time, record.ts)
        if record.value is not None:
            seen.append((record, batch))
    if batch_of is not None and len(set(batch_of.values())) > 1:
        found.add("cut")
    return found


def lacking(spec: PipelineSpec, found: set[str], extra: set[str] = frozenset()) -> list[str]:
    """The needed features an example did not show, each with what it means."""
    return [f"{name} ({FEATURES[name]})" for name in sorted((needs(spec) | extra) - found)]


@pytest.mark.parametrize("family", FAMILIES)
def test_spark_replay_equals_the_reference_engine(spark: Any, family: str) -> None:
    """Per shape, random small inputs that exercise what the shape is about (:func:`needs`: a joined result,
    a non-joined one of a left or outer join, a delete or an out-of-order record, an aggregate update):
    inputs that do not are drawn again before Spark runs (cheap: the reference engine says), so a generator
    that turns trivial fails the test (hypothesis: its inputs filtered out) instead of passing it on nothing."""
    check_family(spark, family)


@settings(max_examples=1, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def check_family(spark: Any, family: str, data: st.DataObject) -> None:
    spec, functions = data.draw(pipelines(family), label="spec")
    rich = inputs(spec).filter(lambda records: not lacking(spec, exercised(spec, functions, records)))
    records = data.draw(rich, label="records")
    expected = ReferenceEngine(spec, functions=functions).replay(records)
    got = spark_replay(spark, spec, records)
    assert_same(expected, got, spec.dead_letter_topic, f"{spec.join.shape.value} {spec.join.kind.value}")
