"""The owner of a streaming job with real processes: a detached spark-submit job on the test broker, watched
by the owner's trigger (its ``run()`` driven with asyncio, as the triggerer does): healthy, killed with
SIGKILL and restarted from its checkpoint (exactly-once file output), stopped, redeployed, stopped by the
trigger's ``on_kill``; a throttled job's lag alert; through real DAG runs (``dag.test()`` runs the trigger
inline), a crash loop that ends in a failed task and an alert on a real HTTP sink, and a terminal failure (a
corrupt checkpoint) that fails the task and alerts at its first death."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from airflow.sdk.exceptions import TaskDeferred

from streamjoin.airflow.lifecycle import stop_driver
from streamjoin.airflow.operators.supervise import (
    StopStreamJoinOperator,
    StreamJobFailure,
    SuperviseStreamJoinOperator,
    pipeline_files,
)
from streamjoin.airflow.triggers import StreamJobTrigger
from streamjoin.core.job_files import WatchEvent
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.spec import load_spec
from streamjoin.core.supervision import Policy

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.e2e]
SCREENSHOTS = PROJECT_HOME / "var" / "screenshots"


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def write_spec(path: Path, name: str, topic: Callable[[str], str], **trigger: Any) -> tuple[Path, dict[str, str]]:
    topics = {"clicks": topic("sup-clicks"), "regions": topic("sup-regions"), "dlq": topic("sup-dlq")}
    spec = {
        "name": name,
        "kafka": {"partitions": 2, "replication_factor": 1},
        "inputs": {
            "clicks": {
                "topic": topics["clicks"],
                "role": "stream",
                "key": {"format": "string"},
                "value": {"format": "long"},
            },
            "regions": {
                "topic": topics["regions"],
                "role": "table",
                "key": {"format": "string"},
                "value": {"format": "string"},
            },
        },
        "join": {
            "shape": "stream-table",
            "kind": "left",
            "left": "clicks",
            "right": "regions",
            "joiner": {"select": {"region": "coalesce(right, 'UNKNOWN')", "clicks": "left"}},
        },
        "output": {"files": {"path": f"var/test-output/{name}/enriched", "format": "json"}},
        "dead_letter_topic": topics["dlq"],
        "trigger": {"processing_time": "1s", **trigger},
    }
    path.write_text(yaml.safe_dump(spec))
    return path, topics


def provision(bootstrap: str, spec_path: Path) -> None:
    from streamjoin.core.topic_plan import plan_topics
    from streamjoin.kafka.admin import ensure_topics

    ensure_topics({"bootstrap.servers": bootstrap}, plan_topics(load_spec(spec_path)), timeout=30)


def produce_clicks(bootstrap: str, topic: str, start: int, count: int) -> None:
    from streamjoin.kafka.clients import produce_records

    now = int(time.time() * 1000)
    records = [(topic, f"u{i % 12}".encode(), i.to_bytes(8, "big", signed=True), now, None)
               for i in range(start, start + count)]  # fmt: skip
    produce_records(bootstrap, records)


def output_coordinates(spec_path: Path) -> list[tuple[int, int]]:
    """(src_partition, src_offset) of every row in the stream file output."""
    spec = load_spec(spec_path)
    assert spec.output.files is not None
    rows = []
    for part in (PROJECT_HOME / spec.output.files.path / "stream").glob("batch_id=*/date=*/part-*"):
        for line in part.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                rows.append((int(row["src_partition"]), int(row["src_offset"])))
    return rows


@pytest.fixture
def cleanup() -> Iterator[list[Path]]:
    """Specs whose drivers are killed at the end of the test, whatever happened."""
    specs: list[Path] = []
    yield specs
    for path in specs:
        driver = pipeline_files(load_spec(path)).driver()
        if driver and driver.pgid:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(driver.pgid, signal.SIGKILL)


def deferred(call: Callable[[], Any]) -> StreamJobTrigger:
    """What the owner deferred to (it must defer: the task holds no worker slot while the job runs)."""
    with pytest.raises(TaskDeferred) as deferral:
        call()
    assert deferral.value.method_name == "resume"
    trigger = deferral.value.trigger
    assert isinstance(trigger, StreamJobTrigger)
    classpath, kwargs = trigger.serialize()
    assert classpath == "streamjoin.airflow.triggers.StreamJobTrigger" and json.loads(json.dumps(kwargs)) == kwargs
    return trigger


def fire(trigger: StreamJobTrigger, timeout: float, copies: int = 1) -> WatchEvent:
    """Run the trigger's ``run()`` as the triggerer does (``copies`` at once, as when a triggerer hands it
    over: they must agree) until its event; the event's payload, a :class:`WatchEvent` (exactly one: the
    payload is its ``to_json()``, nothing more or less)."""

    async def first(copy: StreamJobTrigger) -> WatchEvent:
        async for event in copy.run():
            payload = dict(event.payload)
            watched = WatchEvent.from_json(payload)
            assert watched.to_json() == payload, payload
            return watched
        raise AssertionError("the trigger ended without an event")

    async def all_copies() -> list[WatchEvent]:
        runs = [first(StreamJobTrigger(**trigger.serialize()[1])) for _ in range(copies)]
        return await asyncio.wait_for(asyncio.gather(*runs), timeout)

    events = asyncio.run(all_copies())
    assert len({e.event for e in events}) == 1, events
    return events[0]


def test_owner_restarts_a_killed_driver_exactly_once_then_stop_and_redeploy(
    kafka_bootstrap: str, topic_factory: Callable[[str], str], tmp_path: Path, cleanup: list[Path]
) -> None:
    from streamjoin.kafka.clients import end_offsets

    name = f"sup_{topic_factory('n').rsplit('-', 1)[1]}"
    spec_path, topics = write_spec(tmp_path / "spec.yaml", name, topic_factory, max_offsets_per_trigger=80)
    cleanup.append(spec_path)
    provision(kafka_bootstrap, spec_path)
    produce_clicks(kafka_bootstrap, topics["clicks"], 0, 200)
    files = pipeline_files(load_spec(spec_path))
    policy = Policy(stale_after=90, lag_threshold=10**9, max_restarts=2, window=600)
    owner = SuperviseStreamJoinOperator(task_id="own_job", spec_path=str(spec_path), policy=policy, watch=30, poll=1)

    # healthy: launched, then the watch ends with nothing to do
    trigger = deferred(lambda: owner.execute({}))
    first = files.driver()
    assert first is not None and files.driver_alive()
    wait_for(lambda: len(output_coordinates(spec_path)) >= 200, 150, "the first 200 rows in the file output")
    event = fire(trigger, 60)
    assert event.event == "watched" and event.state == "healthy", event
    assert owner.resume({}, event.to_json())["alive"] is True

    # dead -> restart: the next run adopts the running driver; a SIGKILL mid-stream is seen by the trigger
    trigger = deferred(lambda: owner.execute({}))
    assert files.driver() == first  # adopted, not launched again
    produce_clicks(kafka_bootstrap, topics["clicks"], 200, 400)  # 5+ throttled batches
    before = files.status()
    assert before is not None and before.batch_id is not None
    wait_for(lambda: (s := files.status()) and (s.batch_id or -1) > before.batch_id, 60, "a batch of the 2nd chunk")
    # frozen wherever it is (maybe between a batch's files and its commit), then given records it cannot have
    # read: the kill leaves work behind by construction, however fast the job ran until now
    os.killpg(first.pgid, signal.SIGSTOP)
    produce_clicks(kafka_bootstrap, topics["clicks"], 600, 100)
    processed = len(set(output_coordinates(spec_path)))
    os.killpg(first.pgid, signal.SIGKILL)
    killed = time.time()
    event = fire(trigger, 30, copies=2)
    assert event.event == "dead", event
    trigger = deferred(lambda: owner.resume({}, event.to_json()))  # restarted, watched again
    second = files.driver()
    assert second is not None and second.pid != first.pid and files.driver_alive()
    assert len(files.supervisor().restarts) == 1
    resumed = wait_for(
        lambda: (s := files.status()) and (s.written_at or 0) > killed and s.counts.input_records > 0 and s,
        150,
        "the first batch after the restart",
    )
    seconds = resumed.written_at - killed
    expected = {(int(p), o) for p, end in end_offsets(kafka_bootstrap, topics["clicks"]).items() for o in range(end)}
    assert len(expected) == 700
    wait_for(lambda: set(output_coordinates(spec_path)) >= expected, 150, "all 700 rows after the restart")
    rows = output_coordinates(spec_path)
    assert len(rows) == 700 and set(rows) == expected, "loss or duplicates in the file output"
    print(f"kill -> resumed output: {seconds:.1f}s ({processed} of 700 rows written before the kill)")

    # stop: the owner leaves it stopped, and its next run waits without starting it
    assert StopStreamJoinOperator(task_id="stop", spec_path=str(spec_path), timeout=60).execute({})["was_running"]
    assert not files.driver_alive()
    event = fire(trigger, 30)
    assert event.event == "stopped", event
    assert owner.resume({}, event.to_json())["state"] == "stopped"
    waiting = deferred(lambda: owner.execute({}))
    assert waiting.waiting and not files.driver_alive() and files.driver() == second

    # redeploy: the stop DAG asks, the owner (its waiting trigger) starts the current code again
    stop = StopStreamJoinOperator(task_id="stop", spec_path=str(spec_path), redeploy=True, timeout=60)
    assert stop.execute({})["intent"] == "redeploy"
    event = fire(waiting, 30)
    assert event.event == "redeploy", event
    trigger = deferred(lambda: owner.resume({}, event.to_json()))
    third = files.driver()
    assert third is not None and third.pid != second.pid and files.intent() == "run"
    run_before = status.run_id if (status := files.status()) else None
    wait_for(lambda: (st := files.status()) and (st.written_at or 0) > (third.started_at or 0)
             and st.run_id != run_before, 150, "a heartbeat of the redeployed driver")  # fmt: skip
    assert len(files.supervisor().restarts) == 1  # a redeploy is not a restart

    # killing the owning task (the trigger's on_kill) stops the job it owns; the lease is released
    asyncio.run(trigger.on_kill())
    assert not files.driver_alive()
    assert not (files.checkpoint / "lease.json").exists()


def test_owner_alerts_when_lag_stays_above_the_threshold(
    kafka_bootstrap: str, topic_factory: Callable[[str], str], tmp_path: Path, cleanup: list[Path]
) -> None:
    """Batches of at most 100 records; the driver is frozen (SIGSTOP: alive, its status still fresh) once it
    committed one, so the lag stands still whatever the machine's speed: the event's lag is what the committed
    offsets leave, the alert comes only after the grace by the trigger's own clock, and the job is not killed."""
    name = f"lag_{topic_factory('n').rsplit('-', 1)[1]}"
    spec_path, topics = write_spec(
        tmp_path / "spec.yaml", name, topic_factory, max_offsets_per_trigger=100, processing_time="60s"
    )
    cleanup.append(spec_path)
    provision(kafka_bootstrap, spec_path)
    produce_clicks(kafka_bootstrap, topics["clicks"], 0, 1000)
    files = pipeline_files(load_spec(spec_path))
    policy = Policy(stale_after=600, lag_threshold=500, lag_grace=3)
    owner = SuperviseStreamJoinOperator(task_id="own_job", spec_path=str(spec_path), policy=policy, watch=600, poll=1)
    trigger = deferred(lambda: owner.execute({}))
    driver = files.driver()
    assert driver is not None
    wait_for(lambda: (s := files.status()) and s.batch_id is not None, 150, "the first throttled batch")
    os.killpg(driver.pgid, signal.SIGSTOP)
    try:
        status = files.status()  # frozen from here on: written atomically, by the stopped driver only
        assert status is not None and status.batch_id is not None
        committed = {int(p): o for p, o in status.end_offsets[topics["clicks"]].items()}
        read = sum(committed.values())
        assert 0 < read <= 100 * (status.batch_id + 1), status  # at most 100 records a batch
        rows = set(output_coordinates(spec_path))  # every committed record has its row in the files
        assert {(p, o) for p, end in committed.items() for o in range(end)} <= rows
        event = fire(trigger, 120)
        assert event.event == "lagging" and event.state == "lagging", event
        assert event.lag == {topics["clicks"]: 1000 - read, topics["regions"]: 0}
        # the alert waited for the grace, by the trigger's own record of when lag crossed the threshold
        assert event.lagging_since is not None and event.at - event.lagging_since >= policy.lag_grace, event
        with pytest.raises(StreamJobFailure, match=f"lag {1000 - read} above 500"):
            owner.resume({}, event.to_json())
        assert files.driver_alive() and files.driver() == driver  # an alert, not a kill, nor a restart
        assert files.supervisor().restarts == []
    finally:
        os.killpg(driver.pgid, signal.SIGCONT)
    stop_driver(files, timeout=30)


def test_a_hung_driver_is_stopped_restarted_from_its_checkpoint_and_alerted(
    kafka_bootstrap: str,
    topic_factory: Callable[[str], str],
    tmp_path: Path,
    cleanup: list[Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A driver frozen (SIGSTOP: alive, no progress) while input waits: after ``stale_after`` the trigger fires
    ``hung``; the owner stops it, restarts it from the checkpoint (a restart of the budget), alerts the
    pipeline's webhook and goes on watching; every input row ends up in the files exactly once."""
    name = f"hung_{topic_factory('n').rsplit('-', 1)[1]}"
    spec_path, topics = write_spec(tmp_path / "spec.yaml", name, topic_factory)
    data = yaml.safe_load(spec_path.read_text())
    data["alerts"] = {"webhook_conn_id": "hung_sink"}
    spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
    cleanup.append(spec_path)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Sink.received = []
    sink = {"conn_type": "http", "host": f"http://127.0.0.1:{server.server_port}/alert"}
    monkeypatch.setenv("AIRFLOW_CONN_HUNG_SINK", json.dumps(sink))
    provision(kafka_bootstrap, spec_path)
    produce_clicks(kafka_bootstrap, topics["clicks"], 0, 50)
    files = pipeline_files(load_spec(spec_path))
    policy = Policy(stale_after=20, lag_threshold=10**9, max_restarts=2, window=600)
    owner = SuperviseStreamJoinOperator(task_id="own_job", spec_path=str(spec_path), policy=policy, watch=300, poll=1)
    try:
        trigger = deferred(lambda: owner.execute({}))
        first = files.driver()
        assert first is not None
        wait_for(lambda: len(output_coordinates(spec_path)) >= 50, 150, "the first 50 rows in the file output")
        wait_for(lambda: (s := files.status()) and (s.written_at or 0) > (first.started_at or 0), 60,
                 "the status of a committed batch (a driver that never committed one is slow, not hung)")  # fmt: skip
        os.killpg(first.pgid, signal.SIGSTOP)  # hung: alive, making no progress
        produce_clicks(kafka_bootstrap, topics["clicks"], 50, 30)  # input waits for it
        event = fire(trigger, 180)
        assert event.event == "hung" and event.total_lag > 0, event
        trigger = deferred(lambda: owner.resume({}, event.to_json()))  # stopped, restarted, watched again
        second = files.driver()
        assert second is not None and second.pid != first.pid and files.driver_alive()
        assert len(files.supervisor().restarts) == 1
        wait_for(lambda: len(set(output_coordinates(spec_path))) >= 80, 150, "the 30 waiting rows after the restart")
        rows = output_coordinates(spec_path)
        assert len(rows) == len(set(rows)) == 80, "loss or duplicates in the file output"
        assert len(_Sink.received) == 1, _Sink.received
        alert = _Sink.received[0]
        assert alert["event"] == "streamjoin.job_hung" and "restarted from its checkpoint" in alert["error"]
        assert name in alert["error"]
    finally:
        server.shutdown()
        stop_driver(files, timeout=30)


class _Sink(http.server.BaseHTTPRequestHandler):
    received: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Sink.received.append(json.loads(body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


DAG_FILE = """
from datetime import datetime
from airflow.sdk import DAG
from streamjoin.airflow.notifiers import WebhookNotifier
from streamjoin.airflow.operators.supervise import SuperviseStreamJoinOperator
from streamjoin.core.supervision import Policy
with DAG("crash_loop", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    SuperviseStreamJoinOperator(
        task_id="supervise", spec_path=SPEC, watch=240, poll=1, retries=0,
        policy=Policy(stale_after=120, max_restarts=1, window=600),
        on_failure_callback=WebhookNotifier(http_conn_id="alert_sink"),
    )
"""
RUN = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
run = DagBag(sys.argv[1]).get_dag("crash_loop").test()
print("RESULT " + json.dumps({ti.task_id: str(ti.state) for ti in run.get_task_instances()}))
"""


def _kill_each_driver(files: Any, stop: threading.Event, killed: list[int]) -> None:
    """SIGKILL the process group of each driver the owner launches, once it has run for a few seconds."""
    while not stop.is_set():
        driver = files.driver()
        if driver and driver.pid is not None and driver.pid not in killed and files.driver_alive():
            time.sleep(3)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(driver.pgid, signal.SIGKILL)
            killed.append(driver.pid)
        stop.wait(0.5)


@pytest.mark.airflow  # the DAG run uses the test Airflow DB
@pytest.mark.parametrize("fault", ["terminal", "crash-loop"])
def test_a_terminal_failure_or_a_crash_loop_fails_the_owner_and_alerts(
    fault: str, kafka_bootstrap: str, topic_factory: Callable[[str], str], tmp_path: Path, cleanup: list[Path]
) -> None:
    """terminal: a corrupt checkpoint; the job records why it failed, and the owner gives up at its first death
    (no restart) with an alert naming the error and what to do. crash-loop: every driver is killed (no error
    recorded: a restart may help); the owner restarts once, then gives up with an alert."""
    name = f"crash_{topic_factory('n').rsplit('-', 1)[1]}"
    spec_path, _ = write_spec(tmp_path / "spec.yaml", name, topic_factory)
    cleanup.append(spec_path)
    provision(kafka_bootstrap, spec_path)
    files = pipeline_files(load_spec(spec_path))
    if fault == "terminal":
        (files.checkpoint / "query").mkdir(parents=True)
        (files.checkpoint / "query" / "metadata").write_text("not json\n")  # the query fails at every start
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Sink.received = []
    stop, killed = threading.Event(), []
    if fault == "crash-loop":
        threading.Thread(target=_kill_each_driver, args=(files, stop, killed), daemon=True).start()
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "crash_loop.py").write_text(f"SPEC = {str(spec_path)!r}\n" + DAG_FILE)
    home = PROJECT_HOME / "var" / "test-airflow"
    env = {
        **os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW_CONN_ALERT_SINK": json.dumps({"conn_type": "http", "host": f"http://127.0.0.1:{server.server_port}/alert"}),
    }  # fmt: skip
    try:
        done = subprocess.run([sys.executable, "-c", RUN, str(dags)], capture_output=True, text=True, timeout=300,
                              env=env, cwd=PROJECT_HOME)  # fmt: skip
    finally:
        stop.set()
        server.shutdown()
    result = next((line for line in done.stdout.splitlines() if line.startswith("RESULT ")), None)
    assert result is not None, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert json.loads(result[7:]) == {"supervise": "failed"}
    assert files.supervisor().gave_up_at is not None  # later runs wait for a redeploy
    assert not files.driver_alive()
    assert len(_Sink.received) == 1, _Sink.received
    alert = _Sink.received[0]
    assert alert["event"] == "streamjoin.task_failed" and alert["task_id"] == "supervise"
    if fault == "terminal":
        assert files.supervisor().restarts == []  # never restarted: a restart cannot fix it
        failure = files.run_failure()
        assert failure is not None and failure.error == "CorruptCheckpointError" and not failure.transient
        assert "a restart cannot fix: CorruptCheckpointError" in alert["error"] and "move it aside" in alert["error"]
        assert "redeploy" in alert["error"]
    else:
        assert len(files.supervisor().restarts) == 1 and len(killed) == 2  # launched, restarted, given up
        assert files.run_failure() is None  # killed: no error recorded
        assert "not restarting" in alert["error"]
