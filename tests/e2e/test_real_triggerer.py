"""The owner's trigger served by a real ``airflow triggerer`` process (issue 26 item 4): the api-server, the
scheduler (LocalExecutor) and the triggerer of ``test_status_page``'s fixture, each its own process on a copy
of the test metadata DB. The scheduler runs the shipped pipeline DAG (``streamjoin_<name>``, its ``own_job``
task as ``dags/streamjoin_pipelines.py`` builds it: poll 10 s); the owner starts the job and defers, and only
the triggerer runs the trigger from then on (nothing here calls ``run()``):

* healthy: the task instance is ``deferred`` while the job commits batches; its trigger row is assigned to the
  triggerer's job (a ``TriggererJob`` running since this test started its triggerer), and that triggerer
  wrote the trigger's log (the file beside the task's log named with its job id: the trigger started);
* the driver killed (SIGKILL, its pid from ``driver.json``): the triggerer fires, the scheduler resumes the
  same task instance (same try; its log shows the ``dead`` event), the owner restarts the driver from its
  checkpoint (a new pid, one restart counted) and defers again to a new trigger row; the new driver commits
  batches (every row once in the files);
* stopped by the shipped ``streamjoin_stop_redeploy`` DAG (triggered through the REST API, run by the
  scheduler): the triggerer fires ``stopped`` (the trigger's log says so), the owner's task succeeds (its
  result says ``stopped``), the driver is gone, and the next continuous run's owner waits (deferred) without
  starting it.

Timing is never asserted: each step is polled with generous timeouts (10 s polls, 2 shared cores)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from test_status_page import api_server, runs_by_id, tasks  # noqa: F401 (api_server: a fixture)
from test_supervision import cleanup, output_coordinates, produce_clicks, provision, wait_for, write_spec  # noqa: F401

from api_server import ApiServer
from streamjoin.airflow.operators.supervise import pipeline_files
from streamjoin.core.spec import load_spec

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.airflow, pytest.mark.e2e]
TRIGGER = "streamjoin.airflow.triggers.StreamJobTrigger"
OWNER = "own_job"


def owner_ti(server: ApiServer, dag_id: str, run_id: str) -> dict[str, Any]:
    """The owner's task instance as Airflow's REST API returns it (state, try, its trigger row); ``{}`` while
    the run has none yet."""
    status, body = server.get(f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{OWNER}",
                              "admin")  # fmt: skip
    if status == 404:
        return {}
    assert status == 200, body
    return dict(json.loads(body))


def served_trigger(server: ApiServer, dag_id: str, run_id: str) -> dict[str, Any] | None:
    """The owner's trigger once the task instance is deferred and a triggerer took the trigger, else None."""
    ti = owner_ti(server, dag_id, run_id)
    trigger = ti.get("trigger") or {}
    if ti.get("state") != "deferred" or trigger.get("triggerer_id") is None:
        return None
    return {**trigger, "try_number": ti["try_number"]}


def running_triggerers(server: ApiServer) -> dict[int, dict[str, Any]]:
    status, body = server.get("/api/v2/jobs?job_type=TriggererJob&limit=100", "admin")
    assert status == 200, body
    return {job["id"]: job for job in json.loads(body)["jobs"] if job["state"] == "running"}


def request_retried(server: ApiServer, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """A REST call as admin, retried while the scheduler holds SQLite's write lock (Airflow answers 503)."""

    def attempt() -> dict[str, Any] | None:
        status, text = server.request(method, path, "admin", json_body=body)
        if status == 503:
            return None
        assert status in (200, 201), (status, text)
        return dict(json.loads(text))

    return wait_for(attempt, 120, f"{method} {path} between the scheduler's SQLite writes", interval=2)


def ti_log(tmp_path: Path, dag_id: str, run_id: str, try_number: int, suffix: str = "") -> Path:
    """The owner's log file under the fixture's AIRFLOW_HOME (Airflow's default log name template); a trigger's
    log is that name + ``.trigger.<triggerer job id>.log``, written by the triggerer that ran it."""
    folder = tmp_path / "airflow" / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={OWNER}"
    return folder / f"attempt={try_number}.log{suffix}"


def read(path: Path) -> str:
    return path.read_text() if path.exists() else f"({path} does not exist)"


def owner_result(server: ApiServer, dag_id: str, run_id: str) -> dict[str, Any]:
    """What the owner's task returned (its XCom), through the REST API."""
    path = f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{OWNER}/xcomEntries/return_value"
    status, body = server.get(path, "admin")
    assert status == 200, body
    value = json.loads(body)["value"]
    return dict(json.loads(value) if isinstance(value, str) else value)


@pytest.mark.timeout(1500)  # four Airflow processes and a Spark driver on 2 cores shared with other work
def test_the_owner_defers_to_a_real_triggerer_healthy_killed_restarted_stopped(
    kafka_bootstrap: str,
    topic_factory: Callable[[str], str],
    tmp_path: Path,
    cleanup: list[Path],  # noqa: F811 (the fixtures imported above)
    api_server: Callable[..., ApiServer],  # noqa: F811
) -> None:
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    name = f"trig_{topic_factory('n').rsplit('-', 1)[1]}"
    spec_path, topics = write_spec(pipelines / f"{name}.yaml", name, topic_factory, max_offsets_per_trigger=80)
    cleanup.append(spec_path)
    provision(kafka_bootstrap, spec_path)
    produce_clicks(kafka_bootstrap, topics["clicks"], 0, 100)
    files = pipeline_files(load_spec(spec_path))
    dag_id = f"streamjoin_{name}"
    launched = datetime.now(UTC)
    server = api_server(pipelines)
    started = time.time()

    # the pipeline's DAG unpaused: the scheduler runs provision_topics, then the owner, which starts the job
    request_retried(server, "PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
    ((run_id, _),) = wait_for(lambda: runs_by_id(server, dag_id), 300, "the scheduler's first run of the pipeline")

    # healthy: deferred, its trigger taken by the triggerer process, while the job commits batches
    first_trigger = wait_for(lambda: served_trigger(server, dag_id, run_id), 600, "the owner deferred to a triggerer")
    assert first_trigger["classpath"] == TRIGGER, first_trigger
    triggerers = running_triggerers(server)
    job = triggerers.get(first_trigger["triggerer_id"])
    assert job is not None, (first_trigger, triggerers)  # a triggerer this Airflow runs now...
    assert job["job_type"] == "TriggererJob" and datetime.fromisoformat(job["start_date"]) >= launched, job
    first = files.driver()
    assert first is not None and first.pid is not None and files.driver_alive()
    wait_for(lambda: len(output_coordinates(spec_path)) >= 100, 300, "the first 100 rows in the file output")
    produce_clicks(kafka_bootstrap, topics["clicks"], 100, 60)
    wait_for(lambda: len(output_coordinates(spec_path)) >= 160, 300, "60 more rows while the owner is deferred")
    # nothing to act on while the job is healthy: still the same deferral, the same trigger, the same driver
    assert served_trigger(server, dag_id, run_id) == first_trigger
    assert files.driver() == first and files.driver_alive()
    # the triggerer of that job wrote the trigger's log beside the task's (its job id in the file's name)
    trigger_log = ti_log(tmp_path, dag_id, run_id, first_trigger["try_number"], f".trigger.{job['id']}.log")
    starting = f"trigger {dag_id}/{run_id}/{OWNER}/-1/{first_trigger['try_number']} (ID {first_trigger['id']}) starting"
    wait_for(lambda: starting in read(trigger_log), 60, f"{starting!r} in {trigger_log}")

    # the driver killed: the triggerer fires, the scheduler resumes the owner, which restarts the driver
    before = files.status()
    assert before is not None and before.run_id is not None
    os.killpg(first.pgid, signal.SIGKILL)
    killed = time.time()
    produce_clicks(kafka_bootstrap, topics["clicks"], 160, 40)  # input only the restarted driver can read

    def redeferred() -> dict[str, Any] | None:  # a new trigger row (SQLite may give it the fired one's id)
        trigger = served_trigger(server, dag_id, run_id)
        return trigger if trigger and trigger["created_date"] != first_trigger["created_date"] else None

    second_trigger = wait_for(redeferred, 600, "the owner resumed, restarting the driver, deferred again")
    assert second_trigger["classpath"] == TRIGGER and second_trigger["try_number"] == first_trigger["try_number"]
    assert second_trigger["triggerer_id"] in running_triggerers(server), second_trigger
    second = files.driver()
    assert second is not None and second.pid != first.pid and (second.started_at or 0) > killed
    assert files.driver_alive() and len(files.supervisor().restarts) == 1
    resumed = wait_for(lambda: (s := files.status()) and (s.written_at or 0) > killed and s.counts.input_records > 0
                       and s, 300, "a batch committed by the restarted driver")  # fmt: skip
    assert resumed.run_id != before.run_id  # the new driver's run
    wait_for(lambda: len(set(output_coordinates(spec_path))) >= 200, 300, "all 200 rows after the restart")
    rows = output_coordinates(spec_path)
    assert len(rows) == len(set(rows)) == 200, "loss or duplicates in the file output"
    # the owner's task log (its worker): resumed on the triggerer's "dead" event, restarted from the checkpoint
    task_log = read(ti_log(tmp_path, dag_id, run_id, first_trigger["try_number"]))
    assert f"{name}: dead (" in task_log and f"{name}: restarting from checkpoint" in task_log, task_log[-3000:]

    # stopped by the shipped stop DAG (run by the scheduler): the trigger fires, the owner's task succeeds
    stop = request_retried(server, "POST", "/api/v2/dags/streamjoin_stop_redeploy/dagRuns",
                           {"logical_date": None, "conf": {"pipeline": name, "redeploy": False}})  # fmt: skip
    wait_for(lambda: dict(runs_by_id(server, "streamjoin_stop_redeploy")).get(stop["dag_run_id"]) == "success", 600,
             "the stop run, executed by the scheduler")  # fmt: skip
    assert files.intent() == "stop" and not files.driver_alive()
    wait_for(lambda: owner_ti(server, dag_id, run_id).get("state") in ("success", "failed"), 600, "the owner's end")
    assert tasks(server, dag_id, run_id) == {"provision_topics[-1]": "success", f"{OWNER}[-1]": "success"}
    result = owner_result(server, dag_id, run_id)
    assert result["state"] == "stopped" and result["alive"] is False and result["restarts"] == 1, result
    assert result["driver_pid"] == second.pid
    assert not files.driver_alive() and files.driver() == second
    # the second trigger's log, by the same triggerer: started, saw the stop, fired
    log = read(trigger_log)
    starting = (
        f"trigger {dag_id}/{run_id}/{OWNER}/-1/{second_trigger['try_number']} (ID {second_trigger['id']}) starting"
    )
    assert starting in log and f"{files.checkpoint}: stopped (" in log and "Trigger fired event" in log, log[-3000:]

    # the next continuous run's owner waits (deferred, meant down): no driver started
    def next_run_waiting() -> str | None:
        later = [r for r, _ in runs_by_id(server, dag_id) if r != run_id]
        return later[0] if later and served_trigger(server, dag_id, later[0]) else None

    wait_for(next_run_waiting, 600, "the next run's owner deferred, waiting")
    assert files.driver() == second and not files.driver_alive()
    print(
        f"triggerer job {job['id']} (started {job['start_date']}), triggers {first_trigger['id']} -> "
        f"{second_trigger['id']}; kill -> resumed batch {resumed.written_at - killed:.0f}s; "
        f"whole test {time.time() - started:.0f}s"
    )
