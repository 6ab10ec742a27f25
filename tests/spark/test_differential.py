"""Spark == reference over the whole matrix: every shape x kind x (no aggregate, sum, count), on inputs
with null keys, null values (tombstones on tables), null groups and amounts, out-of-order timestamps and
two sides of different value types (a long stream against a string table, or the reverse).

Each example is compared twice: records one at a time in file order (Spark: one batch in file order), and
in the batch ordering rule cut into about three micro-batches whose state Spark carries through the state
store (as the streaming job does). Hypothesis is
derandomized and does not shrink: CI runs the same examples every time (each Spark replay costs seconds on
2 cores).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from test_spark_scenarios import assert_same, spark_replay

from streamjoin.core.records import Record
from streamjoin.core.reference import ReferenceEngine
from streamjoin.core.shapes import SHAPES, Kind, Role, Shape
from streamjoin.core.spec import PipelineSpec, parse_spec

pytestmark = pytest.mark.spark

AGGREGATES = (None, "sum", "count")
MATRIX = [
    (shape, kind, agg)
    for shape, traits in SHAPES.items()
    for kind in sorted(traits.kinds, key=list(Kind).index)
    for agg in AGGREGATES
]


def _role(role: Role) -> dict[str, Any]:
    return {"role": role.value}


def build(shape: Shape, kind: Kind, agg: str | None, long_left: bool) -> tuple[PipelineSpec, dict[str, Any]]:
    """A spec of ``shape``/``kind`` whose left values are longs and right values strings (or the reverse),
    with Spark SQL projections and their Python stand-ins for the reference."""
    traits = SHAPES[shape]
    left_format, right_format = ("long", "string") if long_left else ("string", "long")
    if shape is Shape.TABLE_TABLE_FK or shape is Shape.STREAM_GLOBALTABLE:
        left_format, right_format = "string", "long"  # the left value points at the right key
    left = {**_role(traits.left), "value": {"format": left_format}}
    right = {**_role(traits.right), "value": {"format": right_format}}
    join: dict[str, Any] = {"shape": shape.value, "kind": kind.value, "left": "l", "right": "r"}
    functions: dict[str, Any] = {}
    if traits.windowed:
        join |= {"window": {"before": "4ms", "after": "2ms"}, "grace": "1ms"}
    if traits.key_selector:
        join["key_selector"] = {"expr": "substring(lval, 1, 1)"}
        functions["key_selector"] = lambda key, value: value[:1]
    if traits.foreign_key:
        join["foreign_key"] = {"expr": "substring(value, 1, 1)"}
        functions["foreign_key"] = lambda key, value: value[:1]
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


@st.composite
def records(draw: st.DrawFn, spec: PipelineSpec) -> list[Record]:
    out = []
    fk = spec.join.foreign_key is not None or spec.join.key_selector is not None
    for _ in range(draw(st.integers(2, 10))):
        name = draw(st.sampled_from(["l", "r"]))
        inp = spec.inputs[name]
        stream = inp.role is Role.STREAM
        keys = ["x", "y"] if fk and name == "r" else ["A", "B"]
        key = draw(st.sampled_from([*keys, None] if stream else keys))
        if draw(st.integers(0, 5)) == 0:
            value = None  # a tombstone on a table, a null-value dead letter on a stream
        elif inp.value.format.value == "long":
            value = draw(st.integers(-3, 9))
        else:
            value = draw(st.sampled_from(["x", "y", "z"])) + draw(st.sampled_from(["", "1"]))
        out.append(Record(inp.topic, key, value, draw(st.integers(0, 12))))
    return out


@pytest.mark.parametrize(("shape", "kind", "agg"), MATRIX, ids=lambda v: str(v.value if hasattr(v, "value") else v))
@settings(
    max_examples=1,
    deadline=None,
    derandomize=True,
    phases=[Phase.generate],  # no shrinking: each step would be a Spark replay; the failure shows the example
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_spark_equals_the_reference(spark: Any, shape: Shape, kind: Kind, agg: str | None, data: st.DataObject) -> None:
    spec, functions = build(shape, kind, agg, long_left=data.draw(st.booleans(), label="long_left"))
    inputs = data.draw(records(spec), label="records")
    reference = ReferenceEngine(spec, functions=functions)
    what = f"{shape.value} {kind.value} {agg}"
    assert_same(reference.replay(inputs), spark_replay(spark, spec, inputs), spec.dead_letter_topic, what)
    # the batch ordering rule, in about three micro-batches with the state carried by the state store
    size = -(-len(inputs) // 3)
    in_batches = spark_replay(spark, spec, inputs, batch=True, max_records=size)
    assert_same(ReferenceEngine(spec, functions=functions).replay_batch(inputs), in_batches, spec.dead_letter_topic,
                f"{what}, batches of {size}")  # fmt: skip
