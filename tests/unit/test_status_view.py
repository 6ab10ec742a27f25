"""The status page's view model (:func:`streamjoin.core.status_view.job_view`), without FastAPI: the records a
job and its owner wrote, the owner's policy and the time -> what the page shows; and the page's HTML of it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from streamjoin.airflow.status_page import JobPage, render_job, render_jobs
from streamjoin.core.job_files import (
    Assessment,
    BatchCounts,
    DriverRecord,
    HistoryEntry,
    JobFailure,
    JobStatus,
    PipelineFiles,
    SupervisorRecord,
)
from streamjoin.core.status_view import JobView, job_view
from streamjoin.core.supervision import Policy

NOW = 1_800_000_000.0
STARTED = NOW - 3600
DRIVER = DriverRecord(pid=4242, pgid=4242, started_at=STARTED, log="/ck/driver.log", name="clicks")
OWNER = Policy(stale_after=60, lag_threshold=1_000)


def _status(written_at: float, end: int = 100, batch_id: int = 12) -> JobStatus:
    return JobStatus(
        pipeline="clicks", query_id="q", run_id="r", batch_id=batch_id, written_at=written_at,
        last_batch_time="2027-01-15T07:59:00.000+00:00",
        counts=BatchCounts(input_records=20, output_records=18, dead_letters=1, state_bytes=2048),
        input_rps=4.0, processed_rps=40.0, duration_ms=500, end_offsets={"clicks": {"0": end}},
        totals=BatchCounts(input_records=200, output_records=180, dead_letters=3),
    )  # fmt: skip


def _view(**given: Any) -> JobView:
    inputs: dict[str, Any] = {
        "status": _status(NOW - 10), "driver": DRIVER, "supervisor": SupervisorRecord(restarts=[NOW - 1800]),
        "failure": None, "history": [HistoryEntry(t=NOW - 10, run_id="r", batch_id=12, input_records=20)],
        "alive": True, "stopped": False, "latest": {"clicks": {0: 100}}, "planned": None, "policy": OWNER,
        "now": NOW,
    }  # fmt: skip
    return job_view("clicks", **{**inputs, **given})


def test_healthy() -> None:
    view = _view()
    assert (view.state, view.reason) == ("healthy", "batch 12, lag 0")
    assert view.lag == {"clicks": 0} and view.batch_id == 12 and view.failure is None
    assert view.last_batch.output_records == 18 and view.totals.dead_letters == 3 and view.duration_ms == 500
    assert view.restarts == (NOW - 1800,) and view.recent_text.startswith("0.1 rows/s over the last 5 min")
    assert view.to_json()["lag"] == {"clicks": 0} and view.to_json()["restarts"] == 1
    row = render_jobs([view], "/streamjoin/jobs")
    assert "<td class='state healthy' title='batch 12, lag 0'>healthy</td>" in row


def test_a_batch_in_progress_is_named_while_the_job_runs() -> None:
    view = _view(history=[], planned=(13, NOW - 90))
    assert view.in_progress == (13, 90.0) and view.recent_text == "batch 13 running for 90 s"


def test_stale_by_the_owner_s_policy_not_the_defaults() -> None:
    # caught up, no heartbeat for 90 s: beyond the owner's 60 s (the default policy would still say healthy)
    view = _view(status=_status(NOW - 90))
    assert (view.state, view.reason) == ("stale", "last progress 90s ago")
    assert _view(status=_status(NOW - 90), policy=Policy()).state == "healthy"
    lagging = _view(latest={"clicks": {0: 5_000}})
    assert lagging.state == "lagging" and lagging.reason == "lag 4900 > 1000" and lagging.total_lag == 4_900


def test_hung_alive_no_progress_while_input_waits() -> None:
    history = [HistoryEntry(t=NOW - 320, run_id="r", batch_id=12, input_records=20)]
    view = _view(status=_status(NOW - 320), history=history, latest={"clicks": {0: 130}}, planned=(13, NOW - 315))
    assert view.state == "hung" and view.reason == "last progress 320s ago while 30 records wait"
    assert view.in_progress == (13, 315.0)  # the batch it is stuck in
    assert view.recent_text == "batch 13 running for 5 min, last batch 5 min ago"
    page = render_job(JobPage(view=view, history=history, now=NOW, links=[], jobs_url="/j", csrf=""))
    assert "<span class='state hung'>hung</span> (last progress 320s ago while 30 records wait)" in page


def test_failed_on_a_terminal_error_names_the_cause() -> None:
    failure = JobFailure("KafkaAuthenticationError", "SASL authentication failed for user 'app'", False, NOW - 5)
    view = _view(alive=False, failure=failure)
    assert view.state == "failed"
    assert view.reason == "stopped on an error a restart cannot fix: KafkaAuthenticationError: SASL " \
        "authentication failed for user 'app'"  # fmt: skip
    assert view.failure == "KafkaAuthenticationError: SASL authentication failed for user 'app'"
    assert view.lag == {"clicks": 0} and view.in_progress is None
    page = render_job(JobPage(view=view, history=[], now=NOW, links=[], jobs_url="/j", csrf=""))
    assert ("<tr id='summary-failure'><th>Why it stopped</th><td>KafkaAuthenticationError: SASL authentication "
            "failed for user &#x27;app&#x27;</td></tr>") in page  # fmt: skip
    # a failure of an earlier run (before this driver started) is not this run's cause: just dead
    earlier = _view(alive=False, failure=JobFailure("KafkaAuthenticationError", "x", False, STARTED - 1))
    assert (earlier.state, earlier.failure) == ("dead", None)
    # a transient failure: dead (the owner restarts it), its cause shown
    transient = _view(alive=False, failure=JobFailure("KafkaUnavailableError", "broker away", True, NOW - 5))
    assert (transient.state, transient.failure) == ("dead", "KafkaUnavailableError: broker away")


def test_given_up_after_a_crash_loop() -> None:
    supervisor = SupervisorRecord(
        restarts=[NOW - 300, NOW - 200, NOW - 100], gave_up_at=NOW - 50,
        last=Assessment("failed", "crash loop", {}, NOW - 50),
    )  # fmt: skip
    view = _view(alive=False, supervisor=supervisor)
    assert (view.state, view.reason, view.failure) == ("failed", "crash loop", "crash loop")
    assert len(view.restarts) == 3 and view.gave_up_at == NOW - 50
    assert "<td class='restarts'>3</td>" in render_jobs([view], "/j")
    # asked to stop: stopped, not failed or dead
    assert _view(alive=False, stopped=True).state == "stopped"


def test_never_started_and_starting() -> None:
    never = _view(status=None, driver=None, supervisor=SupervisorRecord(), history=[], alive=False)
    assert (never.state, never.reason, never.lag, never.recent_text) == (
        "not started", "the job was never started", {}, "not started"
    )  # fmt: skip
    starting = _view(status=None, driver=DriverRecord(pid=1, started_at=NOW - 20))
    assert (starting.state, starting.reason) == ("starting", "no batch committed yet")


def test_files_of_the_previous_release(tmp_path: Path) -> None:
    """The files an earlier release wrote (old names, no policy in supervisor.json, history lines of then) make
    the same view: the page keeps working across an upgrade with the job still running."""
    files = PipelineFiles(tmp_path)
    (tmp_path / "status.json").write_text(json.dumps({
        "pipeline": "clicks", "query_id": "q", "run_id": "r", "batch_id": 12, "num_input_rows": 20,
        "input_rows_per_second": 4.0, "processed_rows_per_second": 40.0, "batch_duration_ms": 500,
        "end_offsets": {"clicks": {"0": 100}}, "last_batch_time": "2027-01-15T07:59:00.000+00:00",
        "written_at": NOW - 10, "pid": 4242, "watermarks": {}, "watermark_ms": None, "dead_lettered": 1,
        "join_results": 18, "state_bytes": 2048, "spark_ui": None,
        "totals": {"input_records": 200, "dead_lettered": 3, "join_results": 180},
    }))  # fmt: skip
    (tmp_path / "driver.json").write_text(json.dumps({"pid": 4242, "pgid": 4242, "started_at": STARTED,
                                                      "log": "/ck/driver.log", "name": "clicks"}))  # fmt: skip
    old_supervisor = {"restarts": [NOW - 1800], "lagging_since": None, "last": {"state": "healthy", "at": 1}}
    (tmp_path / "supervisor.json").write_text(json.dumps(old_supervisor))
    old_line = {"t": NOW - 10, "batch_id": 12, "run_id": "r", "input_records": 20, "dead_lettered": 1}
    (tmp_path / "history.jsonl").write_text(json.dumps(old_line) + "\n")
    supervisor = files.supervisor()
    view = job_view(
        "clicks", status=files.status(), driver=files.driver(), supervisor=supervisor, failure=files.failure(),
        history=files.history.read(), alive=True, stopped=False, latest={"clicks": {0: 100}}, planned=None,
        policy=Policy.from_json(supervisor.policy, OWNER), now=NOW,
    )  # fmt: skip
    assert view == _view()
    assert view.last_batch == BatchCounts(input_records=20, output_records=18, dead_letters=1, state_bytes=2048)
    assert view.totals == BatchCounts(input_records=200, output_records=180, dead_letters=3)
    page = render_job(JobPage(view=view, history=files.history.read(), now=NOW, links=[], jobs_url="/j", csrf=""))
    assert "1 in the last batch, 3 since the query started" in page
    assert "18 in the last batch, 180 since the query started" in page
