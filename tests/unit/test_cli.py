"""``streamjoin validate`` and ``streamjoin plan``: what they print and their exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamjoin.cli import main
from streamjoin.core.plans import PROJECT_HOME

SEED = str(PROJECT_HOME / "include/pipelines/clicks_per_region.yaml")


def test_validate_lists_every_problem_of_every_spec_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: Bad-Name\nkafka: {partitions: 0}\ninputs: {}\njoin: {shape: nope}\ndead_letter_topic: d\n")
    assert main(["validate", SEED, str(bad), str(tmp_path / "missing.yaml")]) == 1
    out = capsys.readouterr().out
    assert f"ok: {SEED}" in out
    assert f"{bad}: name: got 'Bad-Name'" in out and f"{bad}: kafka.partitions: got 0" in out
    assert f"{bad}: join.shape: got 'nope'" in out
    assert "missing.yaml: <root>: got None; expected an existing pipeline spec file" in out
    assert out.rstrip().endswith("3 specs, 2 invalid")


def test_validate_reports_every_cross_field_rule(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    spec = tmp_path / "x.yaml"
    spec.write_text(
        "name: x\ninputs: {a: {topic: a, role: stream}, b: {topic: b, role: stream}}\n"
        "join: {shape: stream-table, kind: outer, left: a, right: b, grace: 5s}\ndead_letter_topic: d\n"
    )
    assert main(["validate", str(spec)]) == 1
    out = capsys.readouterr().out
    for path in ("inputs.b.role", "join.kind", "inputs.b.versioned", "output"):
        assert f"{spec}: {path}: got" in out, path


def test_validate_passes_the_shipped_specs(capsys: pytest.CaptureFixture) -> None:
    specs = sorted(str(p) for p in (PROJECT_HOME / "include/pipelines").glob("*.yaml"))
    assert main(["validate", *specs]) == 0
    assert capsys.readouterr().out.rstrip().endswith(f"{len(specs)} specs, 0 invalid")


def test_plan_lists_the_topics_and_the_copartitioning_rule(capsys: pytest.CaptureFixture) -> None:
    assert main(["plan", SEED]) == 0
    out = capsys.readouterr().out
    assert "planned  user-regions (input-table, 4 partitions, RF 1, cleanup.policy=compact)" in out
    assert "co-partitioned (clicks_per_region:join): user-clicks, user-regions" in out
    assert out.rstrip().endswith("co-partitioning: ok")
