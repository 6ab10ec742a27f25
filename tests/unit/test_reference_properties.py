"""Property tests of the reference engine (hypothesis): the batch processing order, order independence, SQL
agreement; and batches whose results follow from the order alone, derived by hand."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamjoin.core.ordering import processing_order
from streamjoin.core.records import Emitted, Record, final_tables
from streamjoin.core.reference import ReferenceEngine
from streamjoin.core.spec import PipelineSpec, Role, parse_spec

FN = "streamjoin.examples.functions"
PROPERTY_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KEYS = ["a", "b", "c"]


def spec(shape: str, kind: str, left_role: str, right_role: str, **join: Any) -> PipelineSpec:
    inputs: dict[str, Any] = {"l": {"topic": "l", "role": left_role}, "r": {"topic": "r", "role": right_role}}
    versioned = join.pop("versioned", None)
    if versioned is not None:
        inputs["r"]["versioned"] = {"history_retention": versioned}
        if left_role == "table":
            inputs["l"]["versioned"] = {"history_retention": versioned}
    aggregate = join.pop("aggregate", None)
    data: dict[str, Any] = {
        "name": "prop",
        "inputs": inputs,
        "join": {"shape": shape, "kind": kind, "left": "l", "right": "r", **join},
        "output": {"topic": "out"},
        "dead_letter_topic": "dlq",
    }
    if aggregate is not None:
        data["aggregate"] = aggregate
    return parse_spec(data)


def number(records: list[Record]) -> list[Record]:
    """Offsets = position within (topic, partition), as a file read into a batch would have them."""
    counts: Counter[tuple[str, int]] = Counter()
    numbered = []
    for record in records:
        queue = (record.topic, record.partition)
        numbered.append(Record(record.topic, record.key, record.value, record.ts, record.partition, counts[queue]))
        counts[queue] += 1
    return numbered


@st.composite
def batches(draw: st.DrawFn, tombstones: bool, fk: bool = False, null_keys: bool = False) -> list[Record]:
    size = draw(st.integers(0, 14))
    partitioned = draw(st.booleans())  # keys spread over two partitions (two tasks), co-partitioned
    records = []
    for index in range(size):
        topic = draw(st.sampled_from(["l", "r"]))
        key_choices: list[Any] = ["p", "q"] if fk and topic == "r" else list(KEYS)
        key = draw(st.sampled_from([*key_choices, None] if null_keys else key_choices))
        if fk and topic == "l":
            value: Any = {"product": draw(st.sampled_from(["p", "q", None])), "qty": draw(st.integers(1, 5))}
        else:
            value = f"{topic}{index}"
        if tombstones and draw(st.integers(0, 4)) == 0:
            value = None
        partition = KEYS.index(key) % 2 if partitioned and key in KEYS else 0
        records.append(Record(topic, key, value, draw(st.integers(0, 40)), partition))
    return number(records)


def canonical(rows: list[Emitted]) -> Counter[str]:
    return Counter(json.dumps(row.as_dict(), sort_keys=True) for row in rows)


SPECS_FOR_BATCH_ORDER = [
    (spec("stream-stream", "outer", "stream", "stream", window={"before": 5, "after": 3}, grace=2), True),
    (spec("stream-stream", "left", "stream", "stream", window={"before": 0, "after": 6}), True),
    (spec("stream-table", "left", "stream", "table"), True),
    (spec("stream-table", "inner", "stream", "table", versioned=20, grace=4), True),
    (spec("stream-globaltable", "left", "stream", "global_table"), True),
    (spec("table-table", "outer", "table", "table"), True),
    (spec("table-table", "left", "table", "table", versioned=10), True),
]


def running_max_ts(records: list[Record]) -> dict[tuple[str, int, int], int]:
    """(topic, partition, offset) -> the largest ts in its queue up to it: computed here, not by the module."""
    result: dict[tuple[str, int, int], int] = {}
    for topic, partition in {(r.topic, r.partition) for r in records}:
        highest = None
        for record in sorted(
            (r for r in records if (r.topic, r.partition) == (topic, partition)), key=lambda r: r.offset
        ):
            highest = record.ts if highest is None else max(highest, record.ts)
            result[(topic, partition, record.offset)] = highest
    return result


@PROPERTY_SETTINGS
@given(choice=st.integers(0, len(SPECS_FOR_BATCH_ORDER) - 1), data=st.data())
def test_processing_order_is_kafka_streams_partition_group_order(choice: int, data: st.DataObject) -> None:
    """The order itself, against the rule as the module states it, pair by pair: global-table records first
    (by partition, offset); then by each queue's running max of ts; at equal times a table update before a
    stream record, then input position, partition, offset. Each queue stays in offset order."""
    pipeline, tombstones = SPECS_FOR_BATCH_ORDER[choice]
    records = data.draw(batches(tombstones=tombstones, null_keys=True))
    shuffled = data.draw(st.permutations(records))  # the input order must not matter
    ordered = processing_order(shuffled, pipeline)
    coordinates = [(r.topic, r.partition, r.offset) for r in ordered]
    assert sorted(coordinates) == sorted((r.topic, r.partition, r.offset) for r in records)
    for queue in {(r.topic, r.partition) for r in records}:
        offsets = [r.offset for r in ordered if (r.topic, r.partition) == queue]
        assert offsets == sorted(offsets), f"queue {queue} reordered: {offsets}"
    roles = {inp.topic: inp.role for inp in pipeline.inputs.values()}
    position = {inp.topic: n for n, inp in enumerate(pipeline.inputs.values())}
    rank = {Role.GLOBAL_TABLE: 0, Role.TABLE: 1, Role.STREAM: 2}
    effective = running_max_ts(records)

    def place(r: Record) -> tuple[int, ...]:
        if roles[r.topic] is Role.GLOBAL_TABLE:
            return (0, position[r.topic], r.partition, r.offset)
        ts = effective[(r.topic, r.partition, r.offset)]
        return (1, ts, rank[roles[r.topic]], position[r.topic], r.partition, r.offset)

    for before, after in itertools.pairwise(ordered):
        assert place(before) < place(after), f"{before} is processed before {after}"


STREAM_TABLE_LEFT = spec("stream-table", "left", "stream", "table")


@pytest.mark.parametrize(
    ("pipeline", "batch", "expected"),
    [
        pytest.param(  # at equal timestamps the table update goes first, whatever the file order
            STREAM_TABLE_LEFT,
            [Record("l", "k", "c", 5), Record("r", "k", "EU", 5)],
            [Emitted("out", "k", {"left": "c", "right": "EU"}, 5)],
            id="table-update-before-stream-record-at-equal-ts",
        ),
        pytest.param(  # a later table update comes after the click, though the file has it first
            STREAM_TABLE_LEFT,
            [Record("r", "k", "EU", 9), Record("l", "k", "c", 5)],
            [Emitted("out", "k", {"left": "c", "right": None}, 5)],
            id="later-table-update-after-the-click",
        ),
        pytest.param(  # c2 waits behind c10 (running max 10): the update at 5 is in the table for both
            STREAM_TABLE_LEFT,
            [Record("l", "k", "c10", 10), Record("l", "k", "c2", 2), Record("r", "k", "EU", 5)],
            [
                Emitted("out", "k", {"left": "c10", "right": "EU"}, 10),
                Emitted("out", "k", {"left": "c2", "right": "EU"}, 2),
            ],
            id="out-of-order-record-waits-behind-the-running-max",
        ),
        pytest.param(  # a global table is bootstrapped before the batch's stream records, whatever its ts
            spec("stream-globaltable", "left", "stream", "global_table"),
            [Record("l", "k", "c", 1), Record("r", "k", "EU", 100)],
            [Emitted("out", "k", {"left": "c", "right": "EU"}, 1)],
            id="global-table-first",
        ),
    ],
)
def test_replay_batch_results_in_processing_order(
    pipeline: PipelineSpec, batch: list[Record], expected: list[Emitted]
) -> None:
    """Derived by hand from the rule; ``replay`` (file order) gives another answer for every case."""
    assert ReferenceEngine(pipeline).replay_batch(batch) == expected
    assert ReferenceEngine(pipeline).replay(batch) != expected


def sql_band_join(records: list[Record], before: int, after: int, kind: str) -> Counter[str]:
    """What a batch SQL engine says: every in-window pair, plus unmatched rows of the kept sides."""
    lefts = [r for r in records if r.topic == "l"]
    rights = [r for r in records if r.topic == "r"]
    rows = []
    matched_left, matched_right = set(), set()
    for i, left in enumerate(lefts):
        for j, right in enumerate(rights):
            if left.key == right.key and left.ts - before <= right.ts <= left.ts + after:
                rows.append(
                    Emitted("out", left.key, {"left": left.value, "right": right.value}, max(left.ts, right.ts))
                )
                matched_left.add(i)
                matched_right.add(j)
    if kind in ("left", "outer"):
        rows += [
            Emitted("out", r.key, {"left": r.value, "right": None}, r.ts)
            for i, r in enumerate(lefts)
            if i not in matched_left
        ]
    if kind == "outer":
        rows += [
            Emitted("out", r.key, {"left": None, "right": r.value}, r.ts)
            for j, r in enumerate(rights)
            if j not in matched_right
        ]
    return canonical(rows)


@PROPERTY_SETTINGS
@given(
    data=st.data(),
    kind=st.sampled_from(["inner", "left", "outer"]),
    before=st.integers(0, 8),
    after=st.integers(0, 8),
)
def test_stream_stream_is_the_sql_band_join_in_ts_order_and_joins_the_same_pairs_in_any_order(
    data: st.DataObject, kind: str, before: int, after: int
) -> None:
    """With a grace that keeps every record in its window store: in timestamp order, once a final record
    has closed every window, the result is the SQL (outer) band join. In any order the joined pairs are
    the same; an out-of-order record whose window end is behind stream time may come out with null at
    once and still be joined later, so the non-joined results only include the SQL ones, each once."""
    pipeline = spec("stream-stream", kind, "stream", "stream", window={"before": before, "after": after}, grace=1000)
    records = [r for r in data.draw(batches(tombstones=False)) if r.partition == 0]
    shuffled = data.draw(st.permutations(records))
    tick = Record("l", "tick", "tick", 2000)  # closes every window; its own stays open
    expected = sql_band_join(records, before, after, kind)
    in_ts_order = sorted(records, key=lambda r: r.ts)
    engine = ReferenceEngine(pipeline)
    assert canonical(engine.replay([*in_ts_order, tick])) == expected
    engine = ReferenceEngine(pipeline)
    got = canonical(engine.replay([*shuffled, tick]))
    assert engine.counters["late_dropped"] == 0

    def joined(rows: Counter[str]) -> Counter[str]:
        return Counter({row: n for row, n in rows.items() if None not in json.loads(row)["value"].values()})

    assert joined(got) == joined(expected)
    unjoined_got, unjoined_expected = got - joined(got), expected - joined(expected)
    assert unjoined_got & unjoined_expected == unjoined_expected
    assert all(n == 1 for n in unjoined_got.values())


def latest_per_key(records: list[Record], topic: str, versioned: bool) -> dict[Any, Any]:
    table: dict[Any, tuple[int, Any]] = {}
    for record in records:
        if record.topic != topic:
            continue
        if versioned and record.key in table and record.ts < table[record.key][0]:
            continue
        table[record.key] = (record.ts, record.value)
    return {key: value for key, (_, value) in table.items() if value is not None}


@PROPERTY_SETTINGS
@given(data=st.data(), kind=st.sampled_from(["inner", "left", "outer"]), versioned=st.booleans())
def test_table_table_final_table_is_the_sql_join_of_the_final_inputs(
    data: st.DataObject, kind: str, versioned: bool
) -> None:
    pipeline = spec("table-table", kind, "table", "table", versioned=1000 if versioned else None)
    records = data.draw(batches(tombstones=True))
    got = final_tables(ReferenceEngine(pipeline).replay(records)).get("out", {})
    left, right = latest_per_key(records, "l", versioned), latest_per_key(records, "r", versioned)
    keys = {"inner": left.keys() & right.keys(), "left": set(left), "outer": left.keys() | right.keys()}[kind]
    assert got == {key: {"left": left.get(key), "right": right.get(key)} for key in keys}


@PROPERTY_SETTINGS
@given(data=st.data(), kind=st.sampled_from(["inner", "left"]))
def test_foreign_key_final_table_and_aggregate_follow_the_final_inputs(data: st.DataObject, kind: str) -> None:
    pipeline = spec(
        "table-table-fk",
        kind,
        "table",
        "table",
        foreign_key={"function": f"{FN}:order_product"},
        aggregate={
            "group_by": {"function": f"{FN}:product_name_or_none"},
            "reduce": "sum",
            "value": {"function": f"{FN}:order_qty"},
            "output": {"topic": "agg"},
        },
    )
    records = data.draw(batches(tombstones=True, fk=True))
    tables = final_tables(ReferenceEngine(pipeline).replay(records))
    orders, products = latest_per_key(records, "l", False), latest_per_key(records, "r", False)
    joined = {
        key: {"left": order, "right": products.get(order["product"])}
        for key, order in orders.items()
        if kind == "left" or order["product"] in products
    }
    assert tables.get("out", {}) == joined
    totals: Counter[Any] = Counter()
    for row in joined.values():
        totals[row["right"] if row["right"] is not None else "none"] += row["left"]["qty"]
    aggregated = tables.get("agg", {})
    assert {group: total for group, total in aggregated.items() if total} == {g: t for g, t in totals.items() if t}
    assert set(totals) <= set(aggregated)
