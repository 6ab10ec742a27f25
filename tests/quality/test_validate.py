"""GX 1.x validation of Spark DataFrames: a clean day passes, each defect fails exactly its expectation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import quality_cases as cases
from quality_cases import AGGREGATE_SCHEMA, DAY, N_CLICKS, START_MS

from streamjoin.quality.results import CheckResult, data_docs_file, read_check_result, write_check_result
from streamjoin.quality.suites import Target, build_check_plan

pytestmark = pytest.mark.spark


@pytest.fixture
def check(spec: Any, settings: Any, enriched_frame: Callable[..., Any], tmp_path: Path) -> Callable[..., CheckResult]:
    from streamjoin.quality.validate import validate_dataframe

    def run(rows: list[Any], left_input_count: int | None = N_CLICKS) -> CheckResult:
        plan = build_check_plan(spec, settings, day=DAY, left_input_count=left_input_count, suite_file="seed")
        return validate_dataframe(enriched_frame(rows), plan, docs_dir=tmp_path / "docs", run_id="test-run")

    return run


def _failed(result: CheckResult) -> set[str]:
    return {e.name for e in result.expectations if not e.success}


def test_clean_day_passes_with_observed_values_and_data_docs(check: Callable[..., CheckResult], tmp_path: Path) -> None:
    result = check(cases.clean_rows())
    assert _failed(result) == set(), [(e.name, e.observed_text()) for e in result.failed]
    assert result.success and result.blocking_failed == [] and result.warnings == []
    assert result.row_count == N_CLICKS
    assert result.outcome("match_rate").observed == pytest.approx(0.96)
    assert result.outcome("left_records_complete").observed == N_CLICKS
    assert result.outcome("freshness").observed == pytest.approx(10.0)
    assert result.outcome("key_not_null").observed["unexpected_count"] == 0
    # Data Docs of this run: the site index and the validation page the result links to
    docs = tmp_path / "docs"
    assert (docs / "index.html").exists() and (docs / "suite.json").exists()
    assert result.data_docs_url and result.data_docs_url.startswith(docs.resolve().as_uri())
    page = data_docs_file(result.data_docs_url)
    assert page is not None and page.exists() and "clicks_per_region.enriched" in page.read_text()


DEFECTS = [
    # (defect, the one failing expectation, blocking?, what it observed)
    (cases.null_key, "key_not_null", True, {"unexpected_count": 1}),
    (cases.right_side_dropped, "match_rate", True, 0.76),
    (cases.duplicated, "no_duplicate_outputs", True, {"unexpected_count": 20}),
    (cases.negative_count, "value_clicks_in_range", True, {"unexpected_count": 1, "sample": [-3]}),
    (cases.stale, "freshness", False, None),
    (cases.incomplete, "left_records_complete", True, N_CLICKS - 3),
]


@pytest.mark.parametrize(("defect", "expected", "blocking", "observed"), DEFECTS, ids=[d[1] for d in DEFECTS])
def test_each_defect_fails_exactly_its_expectation(
    check: Callable[..., CheckResult], defect: Callable[..., Any], expected: str, blocking: bool, observed: Any
) -> None:
    result = check(defect(cases.clean_rows()))
    assert _failed(result) == {expected}, [(e.name, e.observed_text()) for e in result.failed]
    outcome = result.outcome(expected)
    assert outcome.blocking is blocking
    assert result.success is not blocking
    assert (result.blocking_failed, result.warnings) == (([expected], []) if blocking else ([], [expected]))
    if isinstance(observed, dict):
        assert {k: outcome.observed[k] for k in observed} == observed
    elif isinstance(observed, float):
        assert outcome.observed == pytest.approx(observed)
    elif observed is not None:
        assert outcome.observed == observed


def test_stale_day_reports_how_old_the_newest_row_is(check: Callable[..., CheckResult]) -> None:
    outcome = check(cases.stale(cases.clean_rows())).outcome("freshness")
    assert outcome.observed > 60 * 7  # minutes between the newest ts and midnight
    assert "min before the partition end" in outcome.description


def test_rows_outside_the_day_fail_ts_in_partition(check: Callable[..., CheckResult]) -> None:
    rows = cases.clean_rows()
    rows[0][2] = START_MS - 1
    result = check(rows)
    assert _failed(result) == {"ts_in_partition"}


def test_result_json_round_trips_next_to_the_partition(check: Callable[..., CheckResult], tmp_path: Path) -> None:
    result = check(cases.null_key(cases.clean_rows()))
    partition = tmp_path / "enriched" / "date=2026-01-02"
    write_check_result(result, partition)
    loaded = read_check_result(partition)
    assert loaded == result
    assert loaded is not None and loaded.outcome("key_not_null").observed_text().startswith("1 unexpected rows")


def test_aggregate_output(spec: Any, settings: Any, spark: Any, tmp_path: Path) -> None:
    from streamjoin.quality.validate import validate_dataframe

    end = START_MS + 86_400_000
    rows = [
        ("europe", 10, end - 120_000), ("americas", 7, end - 60_000),
        ("UNKNOWN", 2, end - 60_000), ("MARS", -1, START_MS),
    ]  # fmt: skip
    plan = build_check_plan(spec, settings, day=DAY, target=Target.AGGREGATE)
    result = validate_dataframe(spark.createDataFrame(rows, AGGREGATE_SCHEMA), plan, docs_dir=tmp_path / "agg")
    assert _failed(result) == {"key_in_set", "value_in_range"}
    assert (result.blocking_failed, result.warnings) == (["value_in_range"], ["key_in_set"])
    assert result.outcome("freshness").observed == pytest.approx(1.0)
