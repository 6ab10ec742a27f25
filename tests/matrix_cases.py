"""The differential matrix: every shape x kind x aggregate (None, sum, count) cell, its specs and seeded
generated cases, and what a cell's cases must cover.

:func:`build` is the one source of the matrix's specs (with Spark SQL projections and their Python stand-ins
for the reference engine). :func:`generate` makes a reproducible case from ``(cell, seed)`` with
``random.Random``: several keys, joins that match and that do not, tombstones on tables, null keys on stream
sides (KIP-962), null values on streams, out-of-order timestamps (some beyond the window and grace, or the
history retention of a versioned table), updates that retract an aggregate's contribution, null groups and
amounts, and both value-type arrangements (long left and string right, and the reverse).
:func:`features` says what the reference engine did with a case; :func:`missing` checks that a cell's cases
together did everything :func:`required` asks for, so generation that turns trivial fails the tests that use
it (reference tier ``tests/unit/test_matrix_reference.py``, Kafka Streams tier
``tests/unit/test_matrix_kafka_streams.py``, Spark tier ``tests/spark/test_differential.py``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from streamjoin.core.records import Emitted, Record
from streamjoin.core.reference import ReferenceEngine
from streamjoin.core.semantics.common import hashable
from streamjoin.core.shapes import SHAPES, Kind, Role, Shape
from streamjoin.core.spec import PipelineSpec, parse_spec

AGGREGATES = (None, "sum", "count")
#: generated cases per cell (seeds 0..CASES_PER_CELL-1): every tier draws from these
CASES_PER_CELL = 60


@dataclass(frozen=True)
class Cell:
    shape: Shape
    kind: Kind
    agg: str | None

    @property
    def id(self) -> str:
        return f"{self.shape.value}-{self.kind.value}-{self.agg or 'none'}"

    def __str__(self) -> str:
        return self.id


MATRIX = [
    Cell(shape, kind, agg)
    for shape, traits in SHAPES.items()
    for kind in sorted(traits.kinds, key=list(Kind).index)
    for agg in AGGREGATES
]

#: stream-stream window and grace (ms); a record more than RETENTION behind stream time is beyond them
BEFORE, AFTER, GRACE = 4, 2, 1
#: versioned tables: history retention (ms) and, for stream-table, the lookup's grace
HISTORY, TABLE_GRACE = 6, 2

#: shapes whose value types may be either way round (the others' left value points at the right key)
BOTH_ARRANGEMENTS = frozenset({Shape.STREAM_STREAM, Shape.STREAM_TABLE, Shape.TABLE_TABLE})
#: shapes with a versioned variant
VERSIONED = frozenset({Shape.STREAM_TABLE, Shape.TABLE_TABLE, Shape.TABLE_TABLE_FK})


def _points_at(key: Any, value: str) -> str | None:
    """The foreign key / lookup key: the value's first letter, none for 'n...' (points nowhere)."""
    return None if value[:1] == "n" else value[:1]


def build(
    shape: Shape, kind: Kind, agg: str | None, long_left: bool, versioned: bool = False
) -> tuple[PipelineSpec, dict[str, Any]]:
    """A spec of ``shape``/``kind`` whose left values are longs and right values strings (or the reverse;
    always string left, long right where the left value points at the right key), with Spark SQL
    projections and their Python stand-ins for the reference. ``versioned``: the table sides keep history
    (a stream-table join then has a grace)."""
    traits = SHAPES[shape]
    left_format, right_format = ("long", "string") if long_left else ("string", "long")
    if shape is Shape.TABLE_TABLE_FK or shape is Shape.STREAM_GLOBALTABLE:
        left_format, right_format = "string", "long"  # the left value points at the right key
    left: dict[str, Any] = {"role": traits.left.value, "value": {"format": left_format}}
    right: dict[str, Any] = {"role": traits.right.value, "value": {"format": right_format}}
    join: dict[str, Any] = {"shape": shape.value, "kind": kind.value, "left": "l", "right": "r"}
    functions: dict[str, Any] = {}
    if traits.windowed:
        join |= {"window": {"before": f"{BEFORE}ms", "after": f"{AFTER}ms"}, "grace": f"{GRACE}ms"}
    if versioned:
        if shape not in VERSIONED:
            raise ValueError(f"{shape.value} has no versioned variant in the matrix")
        for side in (left, right):
            if side["role"] == "table":
                side["versioned"] = {"history_retention": f"{HISTORY}ms"}
        if shape is Shape.STREAM_TABLE:
            join["grace"] = f"{TABLE_GRACE}ms"
    if traits.key_selector:
        join["key_selector"] = {"expr": "nullif(substring(lval, 1, 1), 'n')"}
        functions["key_selector"] = _points_at
    if traits.foreign_key:
        join["foreign_key"] = {"expr": "nullif(substring(value, 1, 1), 'n')"}
        functions["foreign_key"] = _points_at
    data: dict[str, Any] = {
        "name": "matrix",
        "inputs": {"l": {"topic": "lt", **left}, "r": {"topic": "rt", **right}},
        "join": join,
        "output": {"topic": "out"},
        "dead_letter_topic": "dlq",
    }
    if agg is not None:
        # the group is the string side (null when that side is missing: a null-group dead letter); the
        # amount is the long side (null when missing: a null-amount dead letter)
        group_side, amount_side = ("right", "left") if left_format == "long" else ("left", "right")
        data["aggregate"] = {
            "group_by": {"expr": f"substring(value.{group_side}, 1, 1)"},
            "reduce": agg,
            "output": {"topic": "agg", "value_format": "long"},
        }
        functions["group_by"] = lambda key, value: None if value[group_side] is None else value[group_side][:1]
        if agg == "sum":
            data["aggregate"]["value"] = {"expr": f"value.{amount_side}"}
            functions["value"] = lambda key, value: value[amount_side]
    return parse_spec(data, "matrix"), functions


@dataclass(frozen=True)
class Case:
    """One generated input of a cell: its spec variant and records (file order, partition 0)."""

    cell: Cell
    seed: int
    long_left: bool
    versioned: bool
    records: tuple[Record, ...]

    def spec(self) -> tuple[PipelineSpec, dict[str, Any]]:
        return build(self.cell.shape, self.cell.kind, self.cell.agg, self.long_left, self.versioned)

    def engine(self) -> ReferenceEngine:
        spec, functions = self.spec()
        return ReferenceEngine(spec, functions=functions)

    def __str__(self) -> str:
        """Compact and readable: the cell, seed, variant and one ``topic key=value@ts`` per record."""
        variant = f"long_left={self.long_left} versioned={self.versioned}"
        lines = [f"{self.cell} seed={self.seed} {variant} ({len(self.records)} records, file order):"]
        lines += [f"  {r.topic} {r.key}={json.dumps(r.value)}@{r.ts}" for r in self.records]
        return "\n".join(lines)


def generate(cell: Cell, seed: int) -> Case:
    """A reproducible case of ``cell``: the same ``(cell, seed)`` gives the same case on every run."""
    rng = random.Random(f"{cell.id}/{seed}")
    shape = cell.shape
    long_left = shape in BOTH_ARRANGEMENTS and rng.random() < 0.5
    versioned = shape in VERSIONED and rng.random() < 0.5
    spec, _ = build(shape, cell.kind, cell.agg, long_left, versioned)
    traits = SHAPES[shape]
    fk_right = traits.foreign_key or traits.key_selector  # the right keys are what left values point at
    # a global table is bootstrapped: its records come first (their order among stream records is moot)
    records: list[Record] = []
    if shape is Shape.STREAM_GLOBALTABLE:
        for _ in range(rng.randint(1, 4)):
            records.append(_record(rng, spec, "r", fk_right, rng.randint(0, 20), records))
    clock = rng.randint(0, 3)
    for _ in range(rng.randint(6, 16)):
        step = rng.random()
        if step < 0.2 and clock > 0:
            ts = max(0, clock - rng.randint(1, 12))  # out of order; beyond the window/grace/history at > 7
        elif step < 0.3:
            clock += rng.randint(8, 14)  # closes windows, moves history on
            ts = clock
        else:
            clock += rng.randint(0, 3)
            ts = clock
        side = "l" if shape is Shape.STREAM_GLOBALTABLE else rng.choice("lr")
        records.append(_record(rng, spec, side, fk_right, ts, records))
    return Case(cell, seed, long_left, versioned, tuple(records))


def _record(rng: random.Random, spec: PipelineSpec, side: str, fk_right: bool, ts: int, before: list[Record]) -> Record:
    inp = spec.inputs[side]
    stream = inp.role is Role.STREAM
    if side == "r" and fk_right:
        key: Any = rng.choice("xxyyw")  # 'w': a right key no left value points at
    else:
        keyed = [r.key for r in before[-4:] if r.key in ("A", "B", "C")]
        key = rng.choice(keyed) if keyed and rng.random() < 0.5 else rng.choice("AABBC")  # recent keys join
        if stream and rng.random() < 0.12:
            key = None  # KIP-962: joined with null on a kept side, else a null-key dead letter
    if rng.random() < (0.12 if stream else 0.18):
        value: Any = None  # a tombstone on a table, a null-value dead letter on a stream
    elif inp.value.format.value == "long":
        value = rng.randint(-3, 9)
    else:
        value = rng.choice("xyzn") + rng.choice(["", "1"])
    return Record(inp.topic, key, value, ts)


def cases(cell: Cell, count: int = CASES_PER_CELL) -> list[Case]:
    """The cell's cases, seeds ``0 .. count - 1``."""
    return [generate(cell, seed) for seed in range(count)]


# --- coverage -------------------------------------------------------------------------------------------
#: what each feature name means (what :func:`features` saw the reference engine do)
FEATURES = {
    "joined": "a join result with both sides",
    "left-only": "a join result (l, null)",
    "right-only": "a join result (null, r)",
    "tombstone-in": "a tombstone on a table input that the engine applied (it changed the key's table state)",
    "tombstone-out": "a tombstone join result",
    "null-key-joined": "a stream record without a key joined with null (KIP-962)",
    "null-key-right-joined": "a right stream record without a key joined with null (outer, KIP-962)",
    "null-key-matched": "a stream record without a key that matched by its lookup key",
    "null-lookup-joined": "a stream record whose lookup key is null joined with null",
    "dl-null-key": "a null-key dead letter",
    "dl-null-value": "a null-value dead letter",
    "dl-null-group": "a null-group dead letter",
    "dl-null-amount": "a null-amount dead letter",
    "aggregate": "an aggregate update",
    "retraction": "a table result replacing or deleting one that counted in an aggregate",
    "out-of-order-emitted": "a record older than stream time that emitted a join result",
    "late": "a record further behind stream time than the window+grace (stream-stream) or the history "
    "(versioned) that the join processed (not a dead letter: joined, emitted, stored or refused by its rule)",
    "late-emitted": "such a late record that emitted a join result",
    "long-left-joined": "a join result of a long-left/string-right spec",
    "string-left-joined": "a join result of a string-left/long-right spec",
    "versioned-joined": "a join result of a versioned spec",
}


def _late_margin(case: Case) -> int | None:
    if case.cell.shape is Shape.STREAM_STREAM:
        return BEFORE + AFTER + GRACE
    return HISTORY if case.versioned else None


def _table_entry(engine: ReferenceEngine, record: Record) -> Any:
    """The engine's state for ``record``'s key on ``record``'s table side (a copy): a record changed it
    iff the engine applied the record."""
    hkey = hashable(record.key)
    left = record.topic == engine.spec.left.topic
    if engine.shape is Shape.TABLE_TABLE_FK:
        fk = engine._fk
        if left:
            row = fk.left.get(hkey)
            return (None if row is None else (row.value, row.fk), fk.left_versions.latest_ts.get(hkey))
        return (fk.right.get(hkey), fk.right_versions.latest_ts.get(hkey))
    if engine.shape is Shape.STREAM_GLOBALTABLE:
        table = engine._global
    else:
        state = engine._tasks.get(record.partition)
        if state is None:
            return None
        if engine.shape is Shape.TABLE_TABLE:
            side = state.left if left else state.right
            return (side.values.get(hkey), side.latest_ts.get(hkey))
        table = state.table
    return (table.latest.get(hkey), [(v.ts, v.value) for v in table.versions.get(hkey, [])])


def features(case: Case) -> set[str]:
    """What the reference engine did with ``case`` in file order (one record at a time): what it emitted,
    dead-lettered and applied to its state, by its own clock."""
    spec, functions = case.spec()
    engine = ReferenceEngine(spec, functions=functions)
    found: set[str] = set()
    contributes: dict[Any, bool] = {}  # result key -> its current result counts in an aggregate
    margin = _late_margin(case)
    for record in case.records:
        role = spec.input_by_topic(record.topic)[1].role
        table = role is not Role.STREAM and record.key is not None
        before = _table_entry(engine, record) if table else None
        stream_time = engine.stream_time.get(record.partition)
        out = engine.process(record)
        if table and record.value is None and _table_entry(engine, record) != before:
            found.add("tombstone-in")
        joins = [row for row in out if row.topic == "out"]
        dead = [row for row in out if row.topic == spec.dead_letter_topic]
        found.update(f"dl-{dict(row.headers)['reason']}" for row in dead)
        if any(row.topic == "agg" for row in out):
            found.add("aggregate")
        for row in joins:
            found.update(_result_features(case, record, row))
        processed = not any(dict(row.headers)["source_topic"] == record.topic for row in dead)
        if role is not Role.GLOBAL_TABLE and stream_time is not None and record.ts < stream_time and processed:
            if joins:
                found.add("out-of-order-emitted")
            if margin is not None and record.ts < stream_time - margin and (role is Role.STREAM or case.versioned):
                found.add("late")
                if joins:
                    found.add("late-emitted")
        if case.cell.agg is not None and SHAPES[case.cell.shape].table_result:
            for row in joins:
                if contributes.get(row.key) and any(r.topic == "agg" for r in out):
                    found.add("retraction")
                contributes[row.key] = row.value is not None and _counts(functions, case.cell.agg, row)
    return found


def _counts(functions: dict[str, Any], agg: str | None, row: Emitted) -> bool:
    if functions["group_by"](row.key, row.value) is None:
        return False
    return agg != "sum" or functions["value"](row.key, row.value) is not None


def _result_features(case: Case, record: Record, row: Emitted) -> set[str]:
    if row.value is None:
        return {"tombstone-out"}
    left, right = row.value["left"], row.value["right"]
    found = set()
    if left is not None and right is not None:
        found.add("joined")
        found.add("long-left-joined" if case.long_left else "string-left-joined")
        if case.versioned:
            found.add("versioned-joined")
        if row.key is None:
            found.add("null-key-matched")
    elif right is None:
        found.add("left-only")
        if record.key is None and row.key is None:
            found.add("null-key-joined")
        elif case.cell.shape is Shape.STREAM_GLOBALTABLE and _points_at(None, left) is None:
            found.add("null-lookup-joined")
    else:
        found.add("right-only")
        if row.key is None:
            found.add("null-key-right-joined")
    return found


def required(cell: Cell) -> set[str]:
    """What a cell's cases must cover together (see :data:`FEATURES`)."""
    shape, kind, agg = cell.shape, cell.kind, cell.agg
    traits = SHAPES[shape]
    need = {"joined", "out-of-order-emitted"}
    if kind in (Kind.LEFT, Kind.OUTER):
        need.add("left-only")
    if kind is Kind.OUTER:
        need.add("right-only")
    if traits.table_result:
        need.add("tombstone-out")
    if Role.TABLE in (traits.left, traits.right) or Role.GLOBAL_TABLE in (traits.left, traits.right):
        need.add("tombstone-in")
    if traits.stream_result:
        need.add("dl-null-value")
        # null keys: joined with null on a kept side, a dead letter on the others (KIP-962)
        if kind is Kind.INNER or (shape is Shape.STREAM_STREAM and kind is Kind.LEFT):
            need.add("dl-null-key")
        if kind is not Kind.INNER:
            need.add("null-key-joined")
        if kind is Kind.OUTER:
            need.add("null-key-right-joined")
    if shape is Shape.STREAM_GLOBALTABLE:
        need.add("null-key-matched")  # a keyless stream record found by its lookup key (KAFKA-10277)
        if kind is Kind.LEFT:
            need.add("null-lookup-joined")
    if shape is Shape.STREAM_STREAM:
        need.add("late")
        if kind is not Kind.INNER:
            need.add("late-emitted")
    if shape in VERSIONED:
        need |= {"versioned-joined", "late"}
    if shape in BOTH_ARRANGEMENTS:
        need |= {"long-left-joined", "string-left-joined"}
    if agg is not None:
        need.add("aggregate")
        if traits.table_result:
            need.add("retraction")
        if kind is not Kind.INNER:
            # a missing side is null: the group when it is the string side, the amount when the long side
            if shape in BOTH_ARRANGEMENTS:
                need.add("dl-null-group")
            if agg == "sum":
                need.add("dl-null-amount")
    return need


def missing(cell: Cell, seen: Iterable[set[str]]) -> list[str]:
    """The required features no case of the cell showed, each with what it means."""
    union: set[str] = set().union(*seen)
    return [f"{name} ({FEATURES[name]})" for name in sorted(required(cell) - union)]


def richest(cell_cases: Sequence[Case], seen: Sequence[set[str]], max_records: int | None = None) -> Case:
    """The case covering the most of the cell's required features (ties: more features, then the lowest
    seed), among those of at most ``max_records`` records when given."""
    need = required(cell_cases[0].cell)
    small = [i for i, case in enumerate(cell_cases) if max_records is None or len(case.records) <= max_records]
    best = max(small, key=lambda i: (len(seen[i] & need), len(seen[i]), -cell_cases[i].seed))
    return cell_cases[best]


def show_rows(rows: Iterable[Emitted]) -> str:
    """Emitted rows, one a line: ``topic key=value@ts [reason]``."""
    lines = []
    for row in rows:
        reason = dict(row.headers).get("reason")
        lines.append(f"  {row.topic} {row.key}={json.dumps(row.value)}@{row.ts}" + (f" [{reason}]" if reason else ""))
    return "\n".join(lines) or "  (nothing)"
