"""Alert notifiers against real sinks on loopback (no Spark): content, links (http(s) under Airflow's base URL),
connections, one message per call, and no alert for a user's refused request."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from quality_sinks import SmtpSink, http_sink, smtp_sink, wait_for

from streamjoin.airflow.notifiers import (
    PipelineAlertNotifier,
    QualitySmtpNotifier,
    RequestRefused,
    WebhookNotifier,
    build_alert,
    webhook_url,
)
from streamjoin.airflow.operators.quality import QualityCheckFailed
from streamjoin.airflow.ui_paths import pipeline_page_url
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.quality.results import CheckResult, ExpectationOutcome

LOG_URL = "http://airflow.test:8080/dags/d/runs/r/tasks/check_enriched?try_number=1"
#: what a check in the DAGs links: the plugin's route under Airflow's base URL
DOCS_URL = "http://airflow.test:8080/streamjoin/data-docs/clicks_per_region/enriched/2026-01-02/r/validations/x.html"


def _result() -> CheckResult:
    return CheckResult.from_outcomes(
        pipeline="clicks_per_region",
        target="enriched",
        day="2026-01-02",
        expectations=[
            ExpectationOutcome(
                "key_not_null",
                "expect_column_values_to_not_be_null",
                True,
                {"unexpected_count": 0},
                True,
                "every output row has its join key",
            ),
            ExpectationOutcome(
                "match_rate",
                "expect_column_mean_to_be_between",
                False,
                0.76,
                True,
                "at least 90% of the left records found a value",
            ),
            ExpectationOutcome(
                "freshness",
                "expect_column_min_to_be_between",
                False,
                432.5,
                False,
                "the newest row is at most 60 min before the partition end",
            ),
        ],
        run_id="r",
        row_count=200,
        data_docs_url=DOCS_URL,
        partition_path="/var/output/enriched/date=2026-01-02",
    )


def _context(exception: BaseException) -> dict[str, Any]:
    ti = SimpleNamespace(dag_id="d", task_id="check_enriched", run_id="r", log_url=LOG_URL)
    return {"exception": exception, "ti": ti, "run_id": "r"}


def _quality_failure() -> BaseException:
    return QualityCheckFailed(_result())


def test_alert_names_pipeline_day_failures_observed_values_and_links() -> None:
    alert = build_alert(_context(_quality_failure()))
    assert alert.subject == (
        "[streamjoin] clicks_per_region enriched 2026-01-02: quality check failed (match_rate); day quarantined"
    )
    assert "  - match_rate (blocking): observed 0.76 -- at least 90% of the left records found a value" in alert.text
    assert "  - freshness (warning): observed 432.5" in alert.text
    assert "key_not_null" not in alert.text  # passed checks are not news
    assert f"Data Docs: {DOCS_URL}" in alert.text and f"Task log: {LOG_URL}" in alert.text
    assert f'<a href="{DOCS_URL}">' in alert.html and "&amp;" not in DOCS_URL
    page = pipeline_page_url("clicks_per_region")
    assert page.startswith("http") and page.endswith("/plugin/stream-jobs/streamjoin/jobs/clicks_per_region")
    assert f"Pipeline page: {page}" in alert.text and alert.payload["pipeline_url"] == page
    # a link that is not http(s) (a check writing elsewhere than the plugin serves) is not made a link
    local = build_alert(_context(QualityCheckFailed(dataclasses.replace(_result(), data_docs_url="file:///x.html"))))
    assert "file:///x.html" in local.text and 'href="file:' not in local.html
    assert alert.payload["blocking_failed"] == ["match_rate"] and alert.payload["warnings"] == ["freshness"]
    assert [f["name"] for f in alert.payload["failed"]] == ["match_rate", "freshness"]
    json.dumps(alert.payload)  # serialisable as is


def test_other_failures_get_the_error_and_the_log_link() -> None:
    alert = build_alert(_context(RuntimeError("Spark died")))
    assert alert.payload["event"] == "streamjoin.task_failed" and alert.payload["error"] == "Spark died"
    assert LOG_URL in alert.text


def test_webhook_posts_one_json_alert(monkeypatch: pytest.MonkeyPatch) -> None:
    with http_sink() as http:
        monkeypatch.setenv(
            "AIRFLOW_CONN_DQ_HOOK",
            json.dumps({**http.connection("/hooks/dq"), "login": "bot", "password": "s3cret-token"}),
        )
        WebhookNotifier(http_conn_id="dq_hook")(_context(_quality_failure()))
        wait_for(lambda: len(http.requests) == 1, "1 POST on the HTTP sink", last=lambda: http.requests)
    (request,) = http.requests
    assert request["path"] == "/hooks/dq" and request["content_type"] == "application/json"
    assert request["json"]["pipeline"] == "clicks_per_region" and request["json"]["log_url"] == LOG_URL


def test_smtp_notifier_sends_one_mail_through_the_core_notifier(monkeypatch: pytest.MonkeyPatch) -> None:
    with smtp_sink() as smtp:
        monkeypatch.setenv("AIRFLOW_CONN_DQ_SMTP", json.dumps(smtp.connection()))
        QualitySmtpNotifier(smtp_conn_id="dq_smtp", to=["oncall@example.org", "data@example.org"])(
            _context(_quality_failure())
        )
        wait_for(lambda: len(smtp.messages) == 1, "1 e-mail on the SMTP sink", last=lambda: smtp.messages)
    (message,) = smtp.messages
    assert smtp.envelopes == [("streamjoin@example.org", ["oncall@example.org", "data@example.org"])]
    assert "quality check failed (match_rate)" in str(message["Subject"])
    body = SmtpSink.body(message)
    assert "match_rate (blocking): observed 0.76" in body and f'<a href="{LOG_URL}">' in body.replace("&amp;", "&")


def test_a_refused_request_alerts_no_one_and_a_failed_task_alerts_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed = yaml.safe_load((PROJECT_HOME / "include" / "pipelines" / "clicks_per_region.yaml").read_text())
    spec = tmp_path / "clicks.yaml"
    spec.write_text(yaml.safe_dump({**seed, "alerts": {"webhook_conn_id": "dq_hook"}}))
    with http_sink() as http:
        monkeypatch.setenv("AIRFLOW_CONN_DQ_HOOK", json.dumps(http.connection("/hooks")))
        notifier = PipelineAlertNotifier(spec_path=str(spec))
        notifier(_context(RequestRefused("invalid reprocessing request: end 2026-01-01 is before start 2026-01-02")))
        notifier(_context(RuntimeError("Spark died")))
        wait_for(lambda: len(http.requests) >= 1, "the failed task's POST", last=lambda: http.requests)
    assert [r["json"]["error"] for r in http.requests] == ["Spark died"]
    assert http.requests[0]["json"]["pipeline_url"] == pipeline_page_url("clicks_per_region")


@pytest.mark.parametrize(
    ("host", "schema", "port", "endpoint", "url"),
    [
        ("127.0.0.1", None, 8000, "/alerts", "http://127.0.0.1:8000/alerts"),
        ("hooks.example", "https", None, "dq", "https://hooks.example/dq"),
        ("https://hooks.example/base/", None, None, "/dq", "https://hooks.example/base/dq"),
        ("https://hooks.example/full", None, None, None, "https://hooks.example/full"),
    ],
)
def test_webhook_url(host: str, schema: str | None, port: int | None, endpoint: str | None, url: str) -> None:
    assert webhook_url(host, schema, port, endpoint) == url
