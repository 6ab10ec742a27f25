"""The operator in a real Airflow DAG (``dag.test()`` on a fresh SQLite metadata DB, in a subprocess).

A quarantined day fails the task once, sends exactly one alert to each sink (a real SMTP server and a
real HTTP server on loopback), leaves the quarantine marker and does not update the downstream asset;
the clean day passes, updates the asset and queues the downstream DAG.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import quality_cases as cases
from quality_cases import DAY, N_CLICKS, PROJECT, SPEC_PATH
from quality_sinks import SmtpSink, http_sink, smtp_sink, wait_for

from streamjoin.quality.results import data_docs_file, is_quarantined, read_check_result, read_quarantine

pytestmark = [pytest.mark.spark, pytest.mark.airflow, pytest.mark.e2e]

BASE_URL = "http://airflow.test:8080"
CASE_DAG = Path(__file__).with_name("quality_case_dag.py")


def _airflow_env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(home / "dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION="False",  # the consumer DAG takes queued asset events
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home / 'airflow.db'}",
        AIRFLOW__API__BASE_URL=BASE_URL,
        STREAMJOIN_HOME=str(PROJECT),
        PYSPARK_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        **extra,
    )
    return env


def _run(cmd: list[str], env: dict[str, str], cwd: Path, timeout: int) -> str:
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}; last lines:\n{tail}")
    return proc.stdout


def test_quarantined_day_alerts_once_per_sink_and_does_not_update_the_asset(
    write_partition: Callable[..., Path], tmp_path: Path
) -> None:
    bad = write_partition(cases.null_key(cases.clean_rows()), name="enriched_bad")
    good = write_partition(cases.clean_rows(), name="enriched_good")
    home = tmp_path / "airflow"
    (home / "dags").mkdir(parents=True)
    shutil.copy(CASE_DAG, home / "dags" / CASE_DAG.name)
    docs = tmp_path / "docs"
    runs = [
        {
            "day": DAY.isoformat(),
            "partition": str(bad),
            "left_count": N_CLICKS,
            "logical_date": "2026-01-03T00:00:00+00:00",
        },
        {
            "day": DAY.isoformat(),
            "partition": str(good),
            "left_count": N_CLICKS,
            "logical_date": "2026-01-03T01:00:00+00:00",
        },
    ]
    case = {
        "spec_path": str(SPEC_PATH),
        "docs_dir": str(docs),
        "asset_uri": "file:///streamjoin/clicks_per_region/enriched",
        "runs": runs,
    }

    with smtp_sink() as smtp, http_sink() as http:
        env = _airflow_env(
            home,
            {
                "QUALITY_CASE": json.dumps(case),
                "AIRFLOW_CONN_QUALITY_SMTP": json.dumps(smtp.connection()),
                "AIRFLOW_CONN_QUALITY_WEBHOOK": json.dumps(http.connection("/alerts")),
            },
        )
        _run([str(Path(sys.executable).with_name("airflow")), "db", "migrate"], env, tmp_path, timeout=300)
        out = _run([sys.executable, str(home / "dags" / CASE_DAG.name)], env, tmp_path, timeout=600)
        wait_for(lambda: len(smtp.messages) >= 1, "1 alert e-mail on the SMTP sink", last=lambda: smtp.messages)
        wait_for(lambda: len(http.requests) >= 1, "1 alert POST on the HTTP sink", last=lambda: http.requests)

    line = next(line for line in out.splitlines() if line.startswith("QUALITY_CASE_RESULT "))
    failed_run, clean_run = json.loads(line.removeprefix("QUALITY_CASE_RESULT "))

    # the failing day: task failed, nothing published, the partition quarantined with the reason
    assert failed_run["task_states"] == {"check_enriched": "failed"}
    assert (failed_run["asset_events"], failed_run["queued_downstream"]) == (0, 0)
    assert is_quarantined(bad)
    marker = read_quarantine(bad)
    assert marker is not None and marker["reason"] == "blocking checks failed: key_not_null"
    result = read_check_result(bad)
    assert result is not None and result.blocking_failed == ["key_not_null"] and not result.success

    # the clean day: passed, the asset updated once, the downstream DAG queued, no marker
    assert clean_run["task_states"] == {"check_enriched": "success"}
    assert (clean_run["asset_events"], clean_run["queued_downstream"]) == (1, 1)
    assert not is_quarantined(good)
    clean = read_check_result(good)
    assert clean is not None and clean.success

    # Data Docs kept per run
    runs_dir = docs / "clicks_per_region" / "enriched" / DAY.isoformat()
    assert len([p for p in runs_dir.iterdir() if (p / "index.html").exists()]) == 2

    # exactly one alert per sink, for the failed run only, with what a person needs
    assert len(smtp.messages) == 1 and len(http.requests) == 1
    _assert_email(smtp, smtp.messages[0], result.data_docs_url, failed_run["run_id"])
    _assert_webhook(http.requests[0], result.data_docs_url, failed_run["run_id"])


def _assert_email(smtp: SmtpSink, message: Any, docs_url: str | None, run_id: str) -> None:
    assert smtp.envelopes[0] == ("streamjoin@example.org", ["oncall@example.org"])
    subject = str(message["Subject"])
    assert "clicks_per_region" in subject and DAY.isoformat() in subject and "key_not_null" in subject
    body = SmtpSink.body(message)
    assert "Pipeline: clicks_per_region" in body and f"Day: {DAY.isoformat()}" in body
    assert "key_not_null (blocking): observed 1 unexpected rows (0.5%), e.g. [null]" in body
    # a Data Docs page outside the served directory has no link people could open: its file:// URL is text
    assert docs_url is not None and f"Data Docs: {html.escape(docs_url)}" in body and 'href="file:' not in body
    assert f"{BASE_URL}/dags/quality_case/runs/" in body and "/tasks/check_enriched" in body


def _assert_webhook(request: dict[str, Any], docs_url: str | None, run_id: str) -> None:
    assert request["path"] == "/alerts" and request["content_type"] == "application/json"
    payload = request["json"]
    assert payload["event"] == "streamjoin.quality_failed"
    assert (payload["pipeline"], payload["day"], payload["target"]) == (
        "clicks_per_region",
        DAY.isoformat(),
        "enriched",
    )
    assert payload["blocking_failed"] == ["key_not_null"]
    assert [(f["name"], f["observed"]["unexpected_count"]) for f in payload["failed"]] == [("key_not_null", 1)]
    assert payload["data_docs_url"] == docs_url
    assert (page := data_docs_file(docs_url)) is not None and page.exists()
    assert payload["run_id"] == run_id and payload["dag_id"] == "quality_case"
    assert payload["log_url"].startswith(f"{BASE_URL}/dags/quality_case/runs/")
