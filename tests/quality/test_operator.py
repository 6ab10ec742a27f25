"""DataQualityOperator.execute on Parquet partitions, in-process with the shared SparkSession."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import quality_cases as cases
from quality_cases import DAY, N_CLICKS, SPEC_PATH

from streamjoin.quality.results import (
    QUARANTINE_FILE,
    RESULT_FILE,
    is_quarantined,
    latest_check_result,
    read_check_result,
    read_quarantine,
)


def _operator(partition: Path, tmp_path: Path, **kwargs: Any) -> Any:
    from streamjoin.airflow.operators.quality import DataQualityOperator

    return DataQualityOperator(
        task_id="check_enriched",
        spec_path=kwargs.pop("spec_path", str(SPEC_PATH)),
        partition_path=str(partition),
        day=DAY.isoformat(),
        left_input_count=str(N_CLICKS),  # as a rendered template gives it
        data_docs_dir=str(tmp_path / "docs"),
        spark_master="local[1]",
        **kwargs,
    )


def _context(run_id: str = "manual__2026-01-03T00:00:00+00:00", try_number: int = 1) -> dict[str, Any]:
    return {"run_id": run_id, "ti": SimpleNamespace(try_number=try_number)}


@pytest.mark.spark
def test_blocking_failure_quarantines_then_a_passing_recheck_releases(
    spark: Any, write_partition: Callable[..., Path], tmp_path: Path
) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from streamjoin.airflow.operators.quality import QualityCheckFailed

    partition = write_partition(cases.right_side_dropped(cases.clean_rows()))
    with pytest.raises(QualityCheckFailed) as caught:
        _operator(partition, tmp_path).execute(_context())
    assert isinstance(caught.value, AirflowFailException)  # no retries: the data would not change
    result = caught.value.check_result
    assert result.blocking_failed == ["match_rate"] and "match_rate" in str(caught.value)
    assert read_check_result(partition) == result
    marker = read_quarantine(partition)
    assert marker is not None and [f["name"] for f in marker["failed"]] == ["match_rate"]
    assert marker["failed"][0]["observed"] == "0.76"
    assert (partition / RESULT_FILE).exists() and (partition / QUARANTINE_FILE).exists()
    assert spark.read.parquet(str(partition)).count() == N_CLICKS  # readers skip both files

    # a person decides 76% is acceptable for this day: a suite with a lower threshold, checked again
    suite = tmp_path / "lenient.yaml"
    suite.write_text("pipeline: clicks_per_region\nenriched: {match_rate_min: 0.7}\n")
    out = _operator(partition, tmp_path, suite_path=str(suite)).execute(_context(try_number=2))
    assert out["success"] is True and out["warnings"] == []
    assert not is_quarantined(partition)
    assert latest_check_result(partition.parent) == read_check_result(partition)
    assert read_check_result(partition).suite_file == str(suite)  # type: ignore[union-attr]
    runs = sorted(p.name for p in (tmp_path / "docs" / "clicks_per_region" / "enriched" / DAY.isoformat()).iterdir())
    assert runs == ["manual__2026-01-03T00_00_00_00_00-try1", "manual__2026-01-03T00_00_00_00_00-try2"]


@pytest.mark.spark
def test_a_day_written_as_json_is_read_as_json(
    spark: Any, enriched_frame: Callable[[list[Any]], Any], tmp_path: Path
) -> None:
    """A spec whose files are JSON: the check reads the day as JSON (not Parquet) and sees every row."""
    import yaml

    from streamjoin.airflow.operators.quality import QualityCheckFailed

    data = yaml.safe_load(SPEC_PATH.read_text())
    data["output"]["files"]["format"] = "json"
    spec = tmp_path / "clicks_per_region.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    partition = tmp_path / "output" / "enriched" / f"date={DAY.isoformat()}"
    enriched_frame(cases.right_side_dropped(cases.clean_rows())).coalesce(1).write.json(str(partition))
    with pytest.raises(QualityCheckFailed) as caught:
        _operator(partition, tmp_path, spec_path=str(spec)).execute(_context())
    result = caught.value.check_result
    assert result.blocking_failed == ["match_rate"] and result.row_count == N_CLICKS
    assert read_quarantine(partition) is not None


@pytest.mark.spark
def test_warnings_do_not_fail_the_task(write_partition: Callable[..., Path], tmp_path: Path) -> None:
    partition = write_partition(cases.stale(cases.clean_rows()))
    out = _operator(partition, tmp_path, data_docs_base_url="https://docs.example/dq").execute(_context())
    assert out["warnings"] == ["freshness"]
    assert not is_quarantined(partition)
    assert out["data_docs_url"].startswith("https://docs.example/dq/clicks_per_region/enriched/2026-01-02/")
    result = read_check_result(partition)
    assert result is not None and result.success and result.warnings == ["freshness"]


def test_missing_partition_is_an_ordinary_failure(tmp_path: Path) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    with pytest.raises(FileNotFoundError) as caught:
        _operator(tmp_path / "nowhere" / "date=2026-01-02", tmp_path).execute(_context())
    assert not isinstance(caught.value, AirflowFailException)  # retries may help: the job may be late
    assert "has the join job written 2026-01-02" in str(caught.value)


def test_alert_connections_become_failure_callbacks() -> None:
    from streamjoin.airflow.notifiers import QualitySmtpNotifier, WebhookNotifier

    own = object()
    op = _operator(
        Path("/x/date=2026-01-02"),
        Path("/tmp"),
        smtp_conn_id="smtp",
        alert_to="a@example.org",
        webhook_conn_id="hook",
        on_failure_callback=own,
    )
    callbacks = op.on_failure_callback
    assert callbacks[0] is own
    assert [type(c) for c in callbacks[1:]] == [QualitySmtpNotifier, WebhookNotifier]
    assert {"partition_path", "day", "left_input_count", "data_docs_dir"} <= set(op.template_fields)
    with pytest.raises(ValueError, match="needs alert_to"):
        _operator(Path("/x"), Path("/tmp"), smtp_conn_id="smtp")


def test_importing_the_operator_imports_neither_spark_nor_gx() -> None:
    code = (
        "import sys, streamjoin.airflow.operators.quality, streamjoin.airflow.notifiers;"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'great_expectations'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_the_reprocessing_application_s_check_imports_no_airflow() -> None:
    """The job ring (``jobs/reprocess_day.py`` and the gate it checks and publishes with, GX and pyspark included)
    runs in spark-submit's driver: no Airflow there. The report operator imports neither Spark nor GX."""
    job = Path(__file__).resolve().parents[2] / "jobs" / "reprocess_day.py"
    code = (
        "import runpy, sys, streamjoin.quality.gate, streamjoin.quality.validate;"
        f"runpy.run_path({str(job)!r}, run_name='not_main');"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'airflow', 'pyspark', 'great_expectations'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "['great_expectations', 'pyspark']"
    code = (
        "import sys, streamjoin.airflow.operators.publish_day;"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'great_expectations'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"
