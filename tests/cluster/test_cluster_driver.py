"""A supervised driver in standalone cluster deploy mode, on a real standalone master and worker on loopback.

The owner task runs in a process of its own: it submits the job through the Spark provider's hook (deploy mode
``cluster`` from the connection), records the driver id in ``driver.json`` and exits, as a task whose worker
died would. The driver keeps running on the cluster: the master lists it. Another owner adopts it from
``driver.json`` (no second driver), its trigger finds it healthy through the master, the stop operator stops
it after its current batch (the stop marker), and the master lists it as finished; redeployed, the new driver
is killed through the provider's hook and the master lists it as killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from airflow.sdk.exceptions import TaskDeferred

from streamjoin.core.plans import PROJECT_HOME
from streamjoin.localdev.spark_cluster import SparkStandaloneCluster, free_port

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.airflow, pytest.mark.e2e]


@pytest.fixture(scope="module")
def rest_cluster() -> Iterator[SparkStandaloneCluster]:
    """One master (REST submission server on) and one worker with room for a driver and an executor."""
    home = PROJECT_HOME / ".local" / f"spark-cluster-test-{uuid.uuid4().hex[:8]}"
    cluster = SparkStandaloneCluster(home, free_port(), free_port(), cores=2, memory="2g", rest_port=free_port())
    cluster.start(timeout=90)
    yield cluster
    cluster.stop()
    shutil.rmtree(home, ignore_errors=True)


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(1.0)
    raise AssertionError(f"no {what} within {timeout:.0f}s")


def _drivers(cluster: SparkStandaloneCluster) -> dict[str, str]:
    """Driver id -> state, as the master's JSON lists them (running and completed)."""
    state = cluster.state() or {}
    return {d["id"]: d["state"] for d in state.get("activedrivers", []) + state.get("completeddrivers", [])}


def _write_spec(tmp_path: Path, topic: Callable[[str], str]) -> Path:
    name = f"cluster_driver_{uuid.uuid4().hex[:6]}"
    spec = {
        "name": name,
        "kafka": {"partitions": 2, "replication_factor": 1},
        "inputs": {
            "clicks": {"topic": topic("cd-clicks"), "role": "stream", "key": {"format": "string"},
                       "value": {"format": "long"}},
            "regions": {"topic": topic("cd-regions"), "role": "table", "key": {"format": "string"},
                        "value": {"format": "string"}},
        },
        "join": {"shape": "stream-table", "kind": "left", "left": "clicks", "right": "regions",
                 "joiner": {"select": {"region": "coalesce(right, 'UNKNOWN')", "clicks": "left"}}},
        "output": {"files": {"path": str(tmp_path / "enriched"), "format": "json"}},
        "dead_letter_topic": topic("cd-dlq"),
        "trigger": {"processing_time": "2s"},
    }  # fmt: skip
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _driver_log(cluster: SparkStandaloneCluster, driver_id: str) -> str:
    stderr = cluster.home / "work" / driver_id / "stderr"
    return stderr.read_text(errors="replace")[-4000:] if stderr.exists() else f"<no {stderr}>"


def test_a_cluster_mode_driver_outlives_its_launcher_and_is_adopted_watched_and_stopped(
    rest_cluster: SparkStandaloneCluster,
    kafka_bootstrap: str,
    topic_factory: Callable[[str], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from streamjoin.airflow.lifecycle import StandaloneDriver, adopt, driver_alive
    from streamjoin.airflow.operators.supervise import (
        StopStreamJoinOperator,
        SuperviseStreamJoinOperator,
        pipeline_files,
    )
    from streamjoin.airflow.triggers import StreamJobTrigger
    from streamjoin.core.spec import load_spec
    from streamjoin.core.topic_plan import plan_topics
    from streamjoin.kafka.admin import ensure_topics
    from streamjoin.kafka.clients import produce_records

    spec_path = _write_spec(tmp_path, topic_factory)
    spec = load_spec(spec_path)
    ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan_topics(spec), timeout=30)
    now = int(time.time() * 1000)
    produce_records(kafka_bootstrap, [(spec.left.topic, f"u{i % 5}".encode(), i.to_bytes(8, "big"), now, None)
                                      for i in range(50)])  # fmt: skip
    host, port = kafka_bootstrap.split(":")
    spark_conn = {"conn_type": "spark", "host": rest_cluster.master_url,
                  "extra": {"deploy-mode": "cluster", "rest-port": rest_cluster.rest_port}}  # fmt: skip
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(spark_conn))
    monkeypatch.setenv("AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT",
                       json.dumps({"conn_type": "streamjoin_kafka", "host": host, "port": int(port)}))  # fmt: skip
    files = pipeline_files(spec)
    driver_id: str | None = None
    try:
        # the launching owner: a process of its own, gone once it returns (as a task whose worker died)
        launch = (
            "import json\n"
            "from streamjoin.airflow.operators.supervise import SuperviseStreamJoinOperator\n"
            f"owner = SuperviseStreamJoinOperator(task_id='own_job', spec_path={str(spec_path)!r}, watch=0)\n"
            "print('REPORT', json.dumps(owner.execute(context={}), default=str))\n"
        )
        launched = subprocess.run([sys.executable, "-c", launch], env=os.environ.copy(), capture_output=True,
                                  text=True, timeout=600)  # fmt: skip
        assert launched.returncode == 0, launched.stdout[-3000:] + launched.stderr[-3000:]
        record = files.driver()
        assert record is not None and record.driver_id and record.pid is None, record
        first: str = record.driver_id
        driver_id = first
        assert record.master == rest_cluster.master_url and record.conn_id == "spark_default"

        # the master knows the driver, and it runs there (on the worker: no pid of this host)
        assert first in _drivers(rest_cluster), _drivers(rest_cluster)
        wait_for(lambda: _drivers(rest_cluster).get(first) == "RUNNING", 120, f"RUNNING {first} on the master")
        status = wait_for(lambda: files.status(), 300, "status.json of the job on the cluster: "
                          + _driver_log(rest_cluster, first))  # fmt: skip
        assert status.batch_id is not None

        # adopted from driver.json by another task: alive through the master
        driver = adopt(files)
        assert isinstance(driver, StandaloneDriver) and driver.status() == "RUNNING" and driver.alive()
        assert driver_alive(files)

        # the next owner adopts it (no second submission) and its trigger finds it healthy through the master
        owner = SuperviseStreamJoinOperator(task_id="own_job", spec_path=str(spec_path), watch=15, poll=2)
        with pytest.raises(TaskDeferred) as deferral:
            owner.execute({})
        after = files.driver()
        assert after is not None and after.driver_id == driver_id
        trigger = deferral.value.trigger
        assert isinstance(trigger, StreamJobTrigger)
        event = _fire(trigger, 120)
        assert event["event"] == "watched" and event["state"] == "healthy", event
        assert [d for d, s in _drivers(rest_cluster).items() if s == "RUNNING"] == [driver_id]

        # the stop DAG's operator stops it (after its current batch: the stop marker): gone on the master and
        # for the owner
        result = StopStreamJoinOperator(task_id="stop", spec_path=str(spec_path), timeout=120).execute({})
        assert result["was_running"] is True
        assert _drivers(rest_cluster)[driver_id] == "FINISHED", _drivers(rest_cluster)
        assert not adopt(files).alive() and not driver_alive(files)

        # redeployed by the owner: a new driver on the cluster; the master kills it when asked through the hook
        files.set_intent("redeploy")
        report = SuperviseStreamJoinOperator(task_id="own_job", spec_path=str(spec_path), watch=0).execute({})
        second = report["driver_id"]
        assert second and second != driver_id and report["driver_pid"] is None, report
        driver_id = second
        wait_for(lambda: _drivers(rest_cluster).get(second) == "RUNNING", 120, f"RUNNING {second} on the master")
        adopt(files).kill()
        wait_for(lambda: _drivers(rest_cluster).get(second) == "KILLED", 60, f"{second} KILLED on the master")
        assert not driver_alive(files)
    finally:
        if driver_id and _drivers(rest_cluster).get(driver_id) in ("SUBMITTED", "RUNNING", "RELAUNCHING"):
            with contextlib.suppress(Exception):
                adopt(files).kill()
        shutil.rmtree(files.checkpoint, ignore_errors=True)


def _fire(trigger: Any, timeout: float) -> dict[str, Any]:
    """The trigger's first event, its ``run()`` driven as the triggerer does."""
    import asyncio

    async def first() -> dict[str, Any]:
        async for event in trigger.run():
            return dict(event.payload)
        raise AssertionError("the trigger ended without an event")

    return asyncio.run(asyncio.wait_for(first(), timeout))
