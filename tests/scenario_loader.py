"""Conformance scenarios: ``tests/scenarios/*.yaml``, shared by the reference-engine and the Spark tests.

A scenario file holds::

    description: what it shows (optional)
    spec: {...}            # an inline pipeline spec, validated with streamjoin.core.spec.parse_spec
    inputs:                # in processing (file) order; partition optional (default 0)
      - {topic: views, key: A, value: view A, ts: 1000, story: "A: the view at 1 s ..."}
    expected:              # the emitted changelog, in order (headers only on dead letters)
      - {topic: joined, key: A, value: {...}, ts: 2000}
    final_table:           # topic -> {key: last value}; tombstones remove keys; dead letters excluded
      joined: {A: {...}}
    counters: {late_dropped: 1}   # optional: counters the engine must report

Every input needs a ``story``. Offsets are the position among the file's records of the same topic and
partition, so ``replay`` (file order) and a batch engine see the same coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from streamjoin.core.records import Emitted, Record, emitted_from_dict, record_from_dict
from streamjoin.core.spec import PipelineSpec, parse_spec

SCENARIO_DIR = Path(__file__).parent / "scenarios"
_TOP_LEVEL = {"description", "spec", "inputs", "expected", "final_table", "counters"}


@dataclass(frozen=True)
class Scenario:
    name: str
    spec: PipelineSpec
    inputs: list[Record]
    expected: list[Emitted]
    final_table: dict[str, dict[Any, Any]]
    counters: dict[str, int] = field(default_factory=dict)
    stories: list[str] = field(default_factory=list)
    description: str = ""
    path: Path | None = None

    def __str__(self) -> str:
        return self.name


class ScenarioError(ValueError):
    """A scenario file is malformed: names the file and the entry."""


def _require(condition: bool, path: Path, where: str, problem: str) -> None:
    if not condition:
        raise ScenarioError(f"{path}: {where}: {problem}")


def load_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    data = yaml.safe_load(path.read_text())
    _require(isinstance(data, dict), path, "<root>", "expected a mapping")
    unknown = set(data) - _TOP_LEVEL
    _require(not unknown, path, "<root>", f"unknown keys {sorted(unknown)}; allowed: {sorted(_TOP_LEVEL)}")
    for name in ("spec", "inputs", "expected", "final_table"):
        _require(name in data, path, name, "missing")
    spec = parse_spec(data["spec"], f"{path}:spec")
    inputs: list[Record] = []
    stories: list[str] = []
    offsets: dict[tuple[str, int], int] = {}
    for index, row in enumerate(data["inputs"]):
        where = f"inputs[{index}]"
        _require(isinstance(row, dict), path, where, "expected a mapping {topic, key, value, ts, story}")
        _require(bool(row.get("story")), path, where, "every input needs a story")
        _require("ts" in row and "topic" in row, path, where, "needs topic and ts")
        record = record_from_dict(row)
        queue = (record.topic, record.partition)
        offset = offsets.get(queue, 0)
        offsets[queue] = offset + 1
        inputs.append(Record(record.topic, record.key, record.value, record.ts, record.partition, offset))
        stories.append(str(row["story"]))
    expected = []
    for index, row in enumerate(data["expected"] or []):
        _require(isinstance(row, dict) and "ts" in row, path, f"expected[{index}]", "needs topic, key, value, ts")
        expected.append(emitted_from_dict(row))
    final_table = data["final_table"] or {}
    _require(isinstance(final_table, dict), path, "final_table", "expected topic -> {key: value}")
    return Scenario(
        name=path.stem,
        spec=spec,
        inputs=inputs,
        expected=expected,
        final_table={topic: dict(rows or {}) for topic, rows in final_table.items()},
        counters=dict(data.get("counters") or {}),
        stories=stories,
        description=str(data.get("description", "")),
        path=path,
    )


def load_scenarios(directory: str | Path = SCENARIO_DIR) -> list[Scenario]:
    """Every ``*.yaml`` scenario of ``directory``, sorted by name."""
    return [load_scenario(path) for path in sorted(Path(directory).glob("*.yaml"))]
