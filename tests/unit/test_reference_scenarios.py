"""Every conformance scenario (tests/scenarios/*.yaml) through the reference engine, record by record."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scenario_loader import SCENARIO_DIR, Scenario, load_scenarios
from streamjoin.core.records import Emitted, final_tables
from streamjoin.core.reference import ReferenceEngine
from streamjoin.core.spec import Shape

SCENARIOS = load_scenarios()


def _show(rows: list[Emitted]) -> str:
    return "\n".join(f"  {json.dumps(row.as_dict())}" for row in rows) or "  (nothing)"


def _first_difference(expected: list[Emitted], got: list[Emitted]) -> str:
    for index, (want, have) in enumerate(zip(expected, got, strict=False)):
        if want != have:
            return f"first difference at #{index}: expected {want.as_dict()}, got {have.as_dict()}"
    return f"lengths differ: expected {len(expected)}, got {len(got)}"


def assert_changelog(scenario: Scenario, got: list[Emitted]) -> None:
    assert got == scenario.expected, (
        f"{scenario.name}: changelog differs; {_first_difference(scenario.expected, got)}\n"
        f"expected:\n{_show(scenario.expected)}\ngot:\n{_show(got)}"
    )


def assert_final_table(scenario: Scenario, got: list[Emitted]) -> None:
    table: dict[str, dict[Any, Any]] = final_tables(got, exclude=[scenario.spec.dead_letter_topic])
    assert table == scenario.final_table, (
        f"{scenario.name}: final table differs\nexpected: {scenario.final_table}\ngot:      {table}"
    )


def test_the_scenario_set_covers_every_shape_and_kind() -> None:
    covered = {(s.spec.join.shape, s.spec.join.kind.value) for s in SCENARIOS}
    wanted = {
        *((Shape.STREAM_STREAM, kind) for kind in ("inner", "left", "outer")),
        *((Shape.TABLE_TABLE, kind) for kind in ("inner", "left", "outer")),
        *((shape, kind) for shape in (Shape.STREAM_TABLE, Shape.STREAM_GLOBALTABLE) for kind in ("inner", "left")),
        *((Shape.TABLE_TABLE_FK, kind) for kind in ("inner", "left")),
    }
    assert wanted <= covered, f"missing scenarios for {sorted(wanted - covered)}"
    assert len(SCENARIOS) == len(list(SCENARIO_DIR.glob("*.yaml")))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_scenario_replay(scenario: Scenario) -> None:
    engine = ReferenceEngine(scenario.spec)
    got = engine.replay(scenario.inputs)
    assert_changelog(scenario, got)
    assert_final_table(scenario, got)
    for name, value in scenario.counters.items():
        assert engine.counters[name] == value, f"{scenario.name}: counter {name}: {engine.counters}"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_scenario_tells_every_step(scenario: Scenario) -> None:
    assert len(scenario.stories) == len(scenario.inputs)
    assert all(len(story) > 10 for story in scenario.stories), scenario.name
    assert scenario.description, f"{scenario.name}: give the scenario a description"
