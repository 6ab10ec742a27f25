"""Every Spark join shape with inputs of different value types (string, long, JSON struct) on the two
sides gives what the reference engine gives: no side's type leaks into the other (e.g. a string value
cast to a long when Spark unifies the two sides' columns)."""

from __future__ import annotations

from typing import Any

import pytest
from test_spark_scenarios import assert_same, spark_replay

from streamjoin.core.records import Record
from streamjoin.core.reference import ReferenceEngine
from streamjoin.core.spec import PipelineSpec, parse_spec

pytestmark = pytest.mark.spark

FORMATS: dict[str, dict[str, Any]] = {
    "string": {"format": "string"},
    "long": {"format": "long"},
    "json": {"format": "json", "schema": {"name": "string", "n": "long"}},
}
SAMPLES: dict[str, list[Any]] = {
    "string": ["eu-west", "asia"],
    "long": [7, -3],
    "json": [{"name": "pen", "n": 2}, {"name": "ink", "n": 5}],
}
SHAPES: dict[str, dict[str, Any]] = {
    "table-table inner": {"join": {"shape": "table-table", "kind": "inner"}, "roles": ("table", "table")},
    "table-table left": {"join": {"shape": "table-table", "kind": "left"}, "roles": ("table", "table")},
    "table-table outer": {"join": {"shape": "table-table", "kind": "outer"}, "roles": ("table", "table")},
    "stream-stream outer": {
        "join": {"shape": "stream-stream", "kind": "outer", "window": {"before": 5, "after": 5}},
        "roles": ("stream", "stream"),
    },
    "stream-table left": {"join": {"shape": "stream-table", "kind": "left"}, "roles": ("stream", "table")},
    "stream-table versioned grace": {
        "join": {"shape": "stream-table", "kind": "left", "grace": 2},
        "roles": ("stream", "table"),
        "versioned": True,
    },
    "stream-globaltable left": {
        "join": {"shape": "stream-globaltable", "kind": "left"},
        "roles": ("stream", "global_table"),
    },
    "table-table-fk inner": {
        "join": {"shape": "table-table-fk", "kind": "inner", "foreign_key": {"expr": "'A'"}},
        "roles": ("table", "table"),
    },
    "table-table-fk left": {
        "join": {"shape": "table-table-fk", "kind": "left", "foreign_key": {"expr": "'A'"}},
        "roles": ("table", "table"),
    },
    "table-table left + count": {
        "join": {"shape": "table-table", "kind": "left"},
        "roles": ("table", "table"),
        "aggregate": {"reduce": "count"},
    },
    "stream-table left + count": {
        "join": {"shape": "stream-table", "kind": "left"},
        "roles": ("stream", "table"),
        "aggregate": {"reduce": "count"},
    },
}
#: a string against a long (Spark would cast one to the other) and a scalar against a struct
TYPE_PAIRS = [("string", "long"), ("long", "json")]


def mixed_spec(shape: str, left_type: str, right_type: str) -> PipelineSpec:
    case = SHAPES[shape]
    left_role, right_role = case["roles"]
    right: dict[str, Any] = {"topic": "rt", "role": right_role, "value": FORMATS[right_type]}
    if case.get("versioned"):
        right["versioned"] = {"history_retention": 1000}
    data: dict[str, Any] = {
        "name": "mixed",
        "inputs": {"l": {"topic": "lt", "role": left_role, "value": FORMATS[left_type]}, "r": right},
        "join": {"left": "l", "right": "r", **case["join"]},
        "output": {"topic": "out"},
        "dead_letter_topic": "dlq",
    }
    if "aggregate" in case:
        # group by whether the right side matched: both sides' values reach the aggregation
        group = "CASE WHEN value.right IS NULL THEN 'alone' ELSE 'matched' END"
        data["aggregate"] = {**case["aggregate"], "group_by": {"expr": group}, "output": {"topic": "agg"}}
    return parse_spec(data)


def mixed_records(spec: PipelineSpec, left_type: str, right_type: str) -> list[Record]:
    """Updates, matches, non-matches and (on tables) deletes of both sides; the foreign key is always A."""
    (l1, l2), (r1, r2) = SAMPLES[left_type], SAMPLES[right_type]
    records = [
        Record("rt", "A", r1, 1),
        Record("lt", "A", l1, 2),
        Record("rt", "A", r2, 3),
        Record("lt", "B", l2, 4),
        Record("lt", "A", l2, 20),
    ]
    if spec.right.role.value != "stream":
        records.append(Record("rt", "A", None, 21))
    if spec.left.role.value == "table":
        records.append(Record("lt", "A", None, 22))
    records.append(Record("lt", "C", l1, 40))
    return records


@pytest.mark.parametrize("types", TYPE_PAIRS, ids=lambda t: f"{t[0]}-{t[1]}")
@pytest.mark.parametrize("shape", list(SHAPES))
def test_mixed_value_types_join_as_in_the_reference(spark: Any, shape: str, types: tuple[str, str]) -> None:
    spec = mixed_spec(shape, *types)
    records = mixed_records(spec, *types)
    functions: dict[str, Any] = {"group_by": lambda key, value: "alone" if value["right"] is None else "matched"}
    if spec.join.foreign_key is not None:
        functions["foreign_key"] = lambda key, value: "A"
    expected = ReferenceEngine(spec, functions=functions).replay(records)
    assert any(e.value is not None for e in expected), "the case must produce joined values"
    assert_same(expected, spark_replay(spark, spec, records), "dlq", f"{shape} {types}")
