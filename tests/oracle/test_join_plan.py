"""The join plan that crosses the Python/JVM border (``core/join_plan.py`` -> the kernel's ``JoinPlan.parse``): both
registries name the same shapes, and a shape, kind, store list, layout or summary format the two sides do not
share stops the start, naming it (read from the kernel itself, in a plain JVM: ``LocalKernel``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kernel_rules import _run_jvm
from matrix_cases import build
from streamjoin.core import join_plan
from streamjoin.core.join_plan import KERNEL_SHAPES, JoinPlan, UnknownShapeError
from streamjoin.core.shapes import SHAPES, Kind, Shape


def _refusals(plans: list[dict[str, Any]]) -> list[str]:
    """What the kernel says when it is handed each plan at a job's start (empty: it takes it), in one JVM."""
    results = _run_jvm([{"plan": p, "lookup": False, "file_order": True, "batches": [], "groups": []} for p in plans])
    return [str(result.get("error", "")) for result in results]


def _plan(shape: Shape = Shape.STREAM_TABLE, kind: Kind = Kind.LEFT) -> dict[str, Any]:
    spec, _ = build(shape, kind, "sum", long_left=False)
    return dict(json.loads(JoinPlan.of(spec).to_json()))


def test_every_shape_has_a_plan_the_kernel_takes() -> None:
    assert set(KERNEL_SHAPES) == set(SHAPES)
    cells = [(s, k) for s, traits in SHAPES.items() for k in traits.kinds]
    refusals = dict(zip(cells, _refusals([_plan(s, k) for s, k in cells]), strict=True))
    assert len(refusals) == 12 and not any(refusals.values()), refusals


def test_a_shape_missing_from_the_drivers_registry_fails_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(join_plan.KERNEL_SHAPES, Shape.TABLE_TABLE_FK, ())
    monkeypatch.delitem(join_plan.KERNEL_SHAPES, Shape.TABLE_TABLE_FK)
    spec, _ = build(Shape.TABLE_TABLE_FK, Kind.LEFT, None, long_left=False)
    with pytest.raises(UnknownShapeError, match="pipeline matrix: the kernel has no join shape 'table-table-fk'"):
        JoinPlan.of(spec)
    assert not UnknownShapeError.transient


CHANGES: list[tuple[dict[str, Any], str]] = [
    ({"shape": "stream-graph"}, "this kernel has no shape stream-graph"),
    ({"kind": "outer"}, "a stream-table join cannot be outer"),
    ({"stores": ["default", "aggregate", "previous"]}, "the driver's stores [default, aggregate, previous]"),
    ({"result_columns": ["key", "value"]}, "the driver's result columns [key, value]"),
    ({"summary_columns": ["topic"]}, "the driver's summary columns [topic]"),
    ({"undecodable_prefix": "bad"}, "the driver's undecodable dead-letter reason prefix [bad]"),
    ({"shapes": [*_plan()["shapes"], "stream-graph"]}, "the driver's join shapes"),
    ({"partitions": 0}, "partitions 0"),
]


def test_the_kernel_refuses_a_plan_it_does_not_share_naming_what_differs() -> None:
    refusals = _refusals([_plan() | change for change, _ in CHANGES])
    for (change, named), refusal in zip(CHANGES, refusals, strict=True):
        assert "pipeline matrix: the kernel cannot run its join plan" in refusal and named in refusal, (change, refusal)
