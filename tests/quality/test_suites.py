"""Suite files and check plans as data: defaults from the spec, tuning from the file, clear errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from quality_cases import DAY, SPEC_PATH, SUITE_PATH

from streamjoin.core.errors import SuiteError
from streamjoin.quality.suites import (
    LEFT_RECORD,
    MATCHED_LEFT,
    Severity,
    Target,
    build_check_plan,
    day_of_partition,
    default_suite_path,
    load_settings,
)

DEFAULT_ENRICHED = [
    "key_not_null",
    "match_rate",
    "no_duplicate_outputs",
    "left_records_complete",
    "ts_in_partition",
    "freshness",
]


def test_seed_plan_has_the_defaults_and_the_declared_values(spec: Any, settings: Any) -> None:
    plan = build_check_plan(spec, settings, day=DAY, left_input_count=200, suite_file=str(SUITE_PATH))
    assert [c.name for c in plan.checks] == [*DEFAULT_ENRICHED, "value_region_in_set", "value_clicks_in_range"]
    assert {c.name for c in plan.checks if not c.blocking} == {"freshness", "value_region_in_set"}
    assert plan.check("match_rate").kwargs == {"column": MATCHED_LEFT, "min_value": 0.85, "max_value": 1.0}
    assert plan.check("left_records_complete").kwargs == {"column": LEFT_RECORD, "min_value": 200, "max_value": 200}
    assert plan.check("no_duplicate_outputs").kwargs["column_list"] == [
        "key",
        "ts",
        "src_topic",
        "src_partition",
        "src_offset",
    ]
    assert plan.check("freshness").kwargs == {"column": "ts_lag_minutes", "max_value": 60.0}
    assert "UNKNOWN" in plan.check("value_region_in_set").kwargs["value_set"]
    assert plan.check("value_clicks_in_range").kwargs == {"column": "value_clicks", "min_value": 0.0}
    assert plan.flatten == {"value.region": "value_region", "value.clicks": "value_clicks"}
    assert plan.left_topic == "user-clicks"
    assert plan.partition_end_ms - plan.partition_start_ms == 86_400_000


def test_completeness_needs_the_left_input_count(spec: Any, settings: Any) -> None:
    plan = build_check_plan(spec, settings, day=DAY)
    assert "left_records_complete" not in [c.name for c in plan.checks]


def test_aggregate_plan(spec: Any, settings: Any) -> None:
    plan = build_check_plan(spec, settings, day=DAY, target=Target.AGGREGATE)
    assert [c.name for c in plan.checks] == [
        "key_not_null",
        "ts_in_partition",
        "freshness",
        "key_in_set",
        "value_in_range",
    ]
    assert plan.left_topic is None and plan.flatten == {}


def test_a_missing_suite_file_gives_the_defaults(spec: Any, tmp_path: Path) -> None:
    settings = load_settings(tmp_path / "absent.yaml", spec.name)
    plan = build_check_plan(spec, settings, day=DAY, left_input_count=5)
    assert [c.name for c in plan.checks] == DEFAULT_ENRICHED


def test_inner_join_has_no_match_rate_or_completeness(spec: Any, settings: Any) -> None:
    inner = spec.model_copy(update={"join": spec.join.model_copy(update={"kind": "inner"})})
    plan = build_check_plan(inner, settings, day=DAY, left_input_count=5)
    names = [c.name for c in plan.checks]
    assert "match_rate" not in names and "left_records_complete" not in names


def test_file_tunes_severity_disables_and_adds_gx_expectations(spec: Any, tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
pipeline: clicks_per_region
enriched:
  match_rate_min: 0.5
  freshness: null
  severity: {match_rate: warning}
  disable: [ts_in_partition]
  expectations:
    - name: clicks_below_1000
      type: expect_column_values_to_be_between
      kwargs: {column: value.clicks, max_value: 1000, mostly: 0.99}
      severity: warning
""",
    )
    plan = build_check_plan(spec, load_settings(path, spec.name), day=DAY, suite_file=str(path))
    assert [c.name for c in plan.checks] == ["key_not_null", "match_rate", "no_duplicate_outputs", "clicks_below_1000"]
    assert plan.check("match_rate").severity is Severity.WARNING
    assert plan.check("match_rate").kwargs["min_value"] == 0.5
    extra = plan.check("clicks_below_1000")
    assert extra.kwargs == {"column": "value_clicks", "max_value": 1000, "mostly": 0.99}
    assert plan.flatten == {"value.clicks": "value_clicks"}


BAD_FILES = [
    ("pipeline: clicks_per_region\nenriched: {match_rate_min: 1.5}\n", "enriched.match_rate_min", 1.5),
    ("pipeline: clicks_per_region\nenriched: {freshness: soon}\n", "enriched.freshness", "soon"),
    ("pipeline: clicks_per_region\nenrichd: {}\n", "enrichd", {}),
    ("pipeline: clicks_per_region\nenriched: {values: {value.clicks: {}}}\n", "enriched.values.value.clicks", {}),
    (
        "pipeline: clicks_per_region\nenriched: {values: {value.clicks: {min: 5, max: 1}}}\n",
        "enriched.values.value.clicks",
        {"min": 5, "max": 1},
    ),
    (
        "pipeline: clicks_per_region\nenriched: {severity: {match_rate: fatal}}\n",
        "enriched.severity.match_rate",
        "fatal",
    ),
    ("pipeline: other_pipeline\n", "pipeline", "other_pipeline"),
    (
        "pipeline: clicks_per_region\nenriched:\n  expectations:\n    - {name: x, type: expect_the_unexpected}\n",
        "enriched.expectations[0].type",
        "expect_the_unexpected",
    ),
    (
        "pipeline: clicks_per_region\nenriched:\n  expectations:\n"
        "    - {name: x, type: expect_column_values_to_be_between, kwargs: {column: ts, min_value: 0, mostly: 3}}\n",
        "enriched.expectations[0].kwargs.mostly",
        3,
    ),
    (
        "pipeline: clicks_per_region\nenriched:\n  expectations:\n    - {name: Bad Name, type: expect_x}\n",
        "enriched.expectations[0].name",
        "Bad Name",
    ),
    ("[just, a, list]\n", "", ["just", "a", "list"]),
    ("pipeline: clicks_per_region\nenriched: {match_rate_min: [0.9\n", "", None),
]


@pytest.mark.parametrize(("text", "field", "value"), BAD_FILES, ids=[f or "root" for _, f, _ in BAD_FILES])
def test_bad_suite_file_names_file_and_field(spec: Any, tmp_path: Path, text: str, field: str, value: Any) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(SuiteError) as caught:
        load_settings(path, spec.name)
    assert caught.value.file == str(path)
    assert caught.value.field == field
    assert caught.value.value == value
    assert str(path) in str(caught.value) and field in str(caught.value)


PLAN_ERRORS = [
    ("enriched: {values: {value.regoin: {in_set: [EU]}}}", "enriched.values.value.regoin", "value.region"),
    ("enriched: {severity: {no_such_check: warning}}", "enriched.severity.no_such_check", "match_rate"),
    ("enriched: {disable: [key_not_null, nope]}", "enriched.disable[1]", "key_not_null"),
    ("aggregate: {values: {matched: {in_set: [true]}}}", "aggregate.values.matched", "key"),
    (
        "enriched:\n  expectations:\n    - {name: match_rate, type: expect_column_to_exist, kwargs: {column: key}}",
        "enriched.expectations[0].name",
        "not used",
    ),
]


@pytest.mark.parametrize(("text", "field", "hint"), PLAN_ERRORS, ids=[f for _, f, _ in PLAN_ERRORS])
def test_suite_that_does_not_fit_the_spec_names_file_and_field(
    spec: Any, tmp_path: Path, text: str, field: str, hint: str
) -> None:
    path = _write(tmp_path, "pipeline: clicks_per_region\n" + text + "\n")
    settings = load_settings(path, spec.name)
    target = Target.AGGREGATE if text.startswith("aggregate") else Target.ENRICHED
    with pytest.raises(SuiteError) as caught:
        build_check_plan(spec, settings, day=DAY, target=target, suite_file=str(path))
    assert (caught.value.file, caught.value.field) == (str(path), field)
    assert hint in caught.value.expected


def test_paths() -> None:
    assert default_suite_path(SPEC_PATH, "clicks_per_region") == SUITE_PATH
    assert day_of_partition("/x/enriched/date=2026-01-02/") == DAY
    assert day_of_partition("/x/enriched") is None


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(text)
    return path


def test_a_chains_checks_follow_its_last_stage() -> None:
    """clicks_per_region_category: the match rate is that of the last stage's left records (stage with_region's
    results, the rows' ``src_topic``) finding a category; no completeness count of the clicks (a chain)."""
    from streamjoin.core.plans import PROJECT_HOME
    from streamjoin.core.spec import load_spec
    from streamjoin.quality.gate import counts_left_records

    spec = load_spec(PROJECT_HOME / "include" / "pipelines" / "clicks_per_region_category.yaml")
    assert spec.quality is not None
    settings = load_settings(PROJECT_HOME / spec.quality.suite, spec.name)
    plan = build_check_plan(spec, settings, day=DAY, suite_file=spec.quality.suite)
    assert plan.left_topic == "<with_region>" and not counts_left_records(spec)
    assert plan.check("match_rate").kwargs == {"column": MATCHED_LEFT, "min_value": 0.8, "max_value": 1.0}
    assert "of stage 'with_region''s results (the last stage's left side) found a value in 'product-categories'" in (
        plan.check("match_rate").description
    )
    assert plan.flatten == {"value.region": "value_region", "value.category": "value_category",
                            "value.clicks": "value_clicks"}  # fmt: skip
