"""Supervision with real processes: a detached spark-submit job on the test broker, killed with SIGKILL
and restarted from its checkpoint (exactly-once file output), a throttled job's lag, a crash loop that
ends in a failed task and an alert on a real HTTP sink."""

from __future__ import annotations

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

from streamjoin.airflow.operators.supervise import (
    StopStreamJoinOperator,
    SuperviseStreamJoinOperator,
    pipeline_files,
    stop_job,
)
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.spec import load_spec
from streamjoin.core.supervision import Policy

pytestmark = [pytest.mark.kafka, pytest.mark.spark]
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
        if driver:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(driver["pgid"]), signal.SIGKILL)


def test_launch_healthy_kill_restart_exactly_once_and_stop(
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
    supervise = SuperviseStreamJoinOperator(task_id="supervise", spec_path=str(spec_path), policy=policy)

    assert supervise.execute({})["state"] == "dead"  # nothing ran yet: launched now
    wait_for(lambda: len(output_coordinates(spec_path)) >= 200, 150, "the first 200 rows in the file output")
    caught_up = {topics["clicks"]: 0, topics["regions"]: 0}
    # the heartbeat of a batch is written after its output: poll until it reports the last batch
    report = wait_for(lambda: (r := supervise.execute({}))["lag"] == caught_up and r, 30, "a heartbeat with no lag")
    assert report["state"] == "healthy", report

    produce_clicks(kafka_bootstrap, topics["clicks"], 200, 400)  # 5+ throttled batches
    before = files.status()
    wait_for(lambda: (files.status() or {}).get("batch_id", -1) > before["batch_id"], 60, "a batch of the 2nd chunk")
    driver = files.driver()
    assert driver is not None
    os.killpg(int(driver["pgid"]), signal.SIGKILL)
    killed = time.time()
    processed = len(set(output_coordinates(spec_path)))
    assert processed < 600, "the job finished before the kill; the test needs a mid-stream kill"
    produce_clicks(kafka_bootstrap, topics["clicks"], 600, 100)
    wait_for(lambda: not files.driver_alive(), 30, "the killed driver to be gone")

    assert supervise.execute({})["state"] == "dead"  # and restarted from the checkpoint
    assert len(files.supervisor()["restarts"]) == 1
    resumed = wait_for(
        lambda: (s := files.status()) and s["written_at"] > killed and s["num_input_rows"] > 0 and s,
        150,
        "the first batch after the restart",
    )
    seconds = resumed["written_at"] - killed
    expected = {(int(p), o) for p, end in end_offsets(kafka_bootstrap, topics["clicks"]).items() for o in range(end)}
    assert len(expected) == 700
    wait_for(lambda: set(output_coordinates(spec_path)) >= expected, 150, "all 700 rows after the restart")
    rows = output_coordinates(spec_path)
    assert len(rows) == 700 and set(rows) == expected, "loss or duplicates in the file output"
    (PROJECT_HOME / "var" / "test-output").mkdir(parents=True, exist_ok=True)
    (PROJECT_HOME / "var" / "test-output" / "kill_to_resumed.json").write_text(
        json.dumps({"kill_to_resumed_output_s": round(seconds, 1), "rows_before_kill": processed}))  # fmt: skip
    print(f"kill -> resumed output: {seconds:.1f}s ({processed} of 600 rows written before the kill)")

    stop = StopStreamJoinOperator(task_id="stop", spec_path=str(spec_path), timeout=60)
    assert stop.execute({})["was_running"] is True
    assert not files.driver_alive()
    assert supervise.execute({})["state"] == "stopped"  # stopped on purpose: not restarted
    assert len(files.supervisor()["restarts"]) == 1


def test_throttled_job_reports_the_right_lag(
    kafka_bootstrap: str, topic_factory: Callable[[str], str], tmp_path: Path, cleanup: list[Path]
) -> None:
    name = f"lag_{topic_factory('n').rsplit('-', 1)[1]}"
    # one batch of at most 100 records, then a minute before the next: the lag stands still to be measured
    spec_path, topics = write_spec(
        tmp_path / "spec.yaml", name, topic_factory, max_offsets_per_trigger=100, processing_time="60s"
    )
    cleanup.append(spec_path)
    provision(kafka_bootstrap, spec_path)
    produce_clicks(kafka_bootstrap, topics["clicks"], 0, 1000)
    files = pipeline_files(load_spec(spec_path))
    policy = Policy(stale_after=120, lag_threshold=500, lag_grace=3600)
    supervise = SuperviseStreamJoinOperator(task_id="supervise", spec_path=str(spec_path), policy=policy)
    supervise.execute({})
    wait_for(lambda: (files.status() or {}).get("batch_id", -1) >= 0, 150, "the first throttled batch")
    report = supervise.execute({})
    processed = len(output_coordinates(spec_path))
    assert 0 < processed <= 100
    assert report["state"] == "lagging", report
    assert report["lag"] == {topics["clicks"]: 1000 - processed, topics["regions"]: 0}
    assert files.supervisor()["lagging_since"] is not None
    stop_job(load_spec(spec_path), supervise.log, timeout=30)


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
        task_id="supervise", spec_path=SPEC, watch=240, poll=2, retries=0,
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


def test_crash_loop_stops_restarting_fails_and_alerts(
    kafka_bootstrap: str, topic_factory: Callable[[str], str], tmp_path: Path, cleanup: list[Path]
) -> None:
    name = f"crash_{topic_factory('n').rsplit('-', 1)[1]}"
    spec_path, _ = write_spec(tmp_path / "spec.yaml", name, topic_factory)
    cleanup.append(spec_path)
    provision(kafka_bootstrap, spec_path)
    files = pipeline_files(load_spec(spec_path))
    (files.checkpoint / "query").mkdir(parents=True)
    (files.checkpoint / "query" / "metadata").write_text("not json\n")  # the query fails at every start
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
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
        server.shutdown()
    result = next((line for line in done.stdout.splitlines() if line.startswith("RESULT ")), None)
    assert result is not None, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert json.loads(result[7:]) == {"supervise": "failed"}
    assert len(files.supervisor()["restarts"]) == 1  # launched once, restarted once, then given up
    assert not files.driver_alive()
    assert len(_Sink.received) == 1, _Sink.received
    alert = _Sink.received[0]
    assert alert["event"] == "streamjoin.task_failed" and alert["task_id"] == "supervise"
    assert "not restarting" in alert["error"]
