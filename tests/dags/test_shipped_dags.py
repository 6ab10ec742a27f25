"""The shipped DAGs run for real (``dag.test()`` in a subprocess, the test broker, loopback alert sinks).

* ``streamjoin_backfill_<pipeline>`` on a day that breaks an expectation: the sensor passes on the topics'
  watermark, the day is reprocessed (staged), ``check_quality`` fails (the match rate, and completeness: the
  check counted the day's clicks on the topic, one of which is a dead letter), the pipeline's webhook and SMTP
  destinations (its spec's ``alerts:``) each get the alert, the day is quarantined (its enriched and its
  aggregate output alike), no asset event; ``streamjoin_reprocess`` with the status page's conf: still
  quarantined, the same files in both outputs, alerted again, no asset event; with ``force``: both published,
  ``_FORCED.json`` records it, the asset event says ``forced``. Each day is checked and published inside its
  reprocessing application (the job's ``streamjoin check`` lines in ``reprocess_day``'s log; no Spark session
  nor GX in the Airflow process), ``check_quality`` reports the recorded outcome.
  Cost: three spark-submit runs in one Python process (~2 min on 2 cores).
* ``streamjoin_stop_redeploy``: the stop marker it writes stops a running driver (a stand-in process that
  honours the marker as the job does between batches); the intent is recorded. No Spark (~20 s).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from streamjoin.core.backfill import DAY_MS, day_start_ms
from streamjoin.core.partitioner import partition_for
from streamjoin.core.plans import PROJECT_HOME

sys.path.insert(0, str(PROJECT_HOME / "tests" / "quality"))
sys.path.insert(0, str(PROJECT_HOME / "tests" / "backfill"))
from backfill_data import write_seed_spec
from quality_sinks import SmtpSink, http_sink, smtp_sink

BASE_URL = "http://airflow.test:8080"
LOGS = PROJECT_HOME / "var" / "test-logs"  # the runs' whole logs, kept after the test (pytest's tmp dirs rotate)
DAY = datetime.now(UTC).date() - timedelta(days=3)  # recent: within the broker's retention
USERS = [f"u{n:02d}" for n in range(12)]
#: the blocking checks the bad day fails
FAILED = ["match_rate", "left_records_complete"]

RUN = """
import json, os, sys
from datetime import datetime
from pathlib import Path
from airflow.dag_processing.dagbag import DagBag
from airflow.models.asset import AssetEvent
from airflow.utils.session import create_session

def look(path):  # a day directory's file names and its quarantine marker (None, None: no such directory)
    day = Path(path) if path else None
    if day is None or not day.is_dir():
        return None, None
    marker = day / "_QUARANTINED"
    return sorted(p.name for p in day.iterdir()), json.loads(marker.read_text()) if marker.exists() else None

dags, steps = sys.argv[1], json.loads(sys.argv[2])
bags = {}
for step in steps:
    bag = bags.setdefault(step["file"], DagBag(f"{dags}/{step['file']}"))
    dag = bag.get_dag(step["dag_id"])
    kwargs = {"run_conf": step.get("conf")}
    if step.get("logical_date"):
        kwargs["logical_date"] = datetime.fromisoformat(step["logical_date"])
    run = dag.test(**kwargs)
    with create_session() as session:
        events = session.query(AssetEvent).filter(AssetEvent.source_run_id == run.run_id).all()
        extras = [{"asset": e.asset.name, **(e.extra or {})} for e in events]
    files, quarantine = look(step.get("day_path"))
    aggregate_files, aggregate_quarantine = look(step.get("aggregate_path"))
    tasks = {f"{ti.task_id}[{ti.map_index}]": str(ti.state) for ti in run.get_task_instances()}
    in_process = sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "great_expectations"))
    print("STEP " + json.dumps({"dag_id": dag.dag_id, "run_id": run.run_id, "state": str(run.state),
                                "tasks": tasks, "events": extras, "files": files, "quarantine": quarantine,
                                "aggregate_files": aggregate_files, "aggregate_quarantine": aggregate_quarantine,
                                "in_process": in_process[:5]}), flush=True)
"""


def _steps(
    steps: list[dict[str, Any]], env: dict[str, str], log_file: Path, timeout: int = 1500
) -> tuple[list[dict[str, Any]], str]:
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(PROJECT_HOME / "dags"), json.dumps(steps)],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, **env}, cwd=PROJECT_HOME,
    )  # fmt: skip
    log = done.stdout + done.stderr
    log_file.parent.mkdir(parents=True, exist_ok=True)
    log_file.write_text(log)  # the whole log of the runs, kept with the test's files
    found = [json.loads(line[5:]) for line in done.stdout.splitlines() if line.startswith("STEP ")]
    assert len(found) == len(steps), f"exit {done.returncode}, {len(found)} of {len(steps)} steps\n{log[-5000:]}"
    return found, log


def _kafka_conn(bootstrap: str) -> str:
    host, port = bootstrap.split(":")
    return json.dumps({"conn_type": "streamjoin_kafka", "host": host, "port": int(port)})


@pytest.fixture
def pipeline(tmp_path: Path, topic_factory: Callable[[str], str]) -> Iterator[tuple[Any, Path]]:
    """The seed pipeline under a unique name and topics, with its suite and ``alerts:`` naming the test's
    connections; its checkpoint folder (the sensor reads it) is removed afterwards."""
    from streamjoin.core.plans import checkpoint_dir
    from streamjoin.core.spec import load_spec

    name = f"flows_{uuid.uuid4().hex[:8]}"
    pipelines = tmp_path / "pipelines"
    path = write_seed_spec(pipelines, topic_factory, name=name)
    suite = yaml.safe_load((PROJECT_HOME / "include" / "expectations" / "clicks_per_region.yaml").read_text())
    suite["pipeline"] = name
    suite_path = tmp_path / "expectations" / f"{name}.yaml"
    suite_path.parent.mkdir()
    suite_path.write_text(yaml.safe_dump(suite))
    data = yaml.safe_load(path.read_text())
    data["quality"] = {"suite": str(suite_path)}
    data["alerts"] = {"webhook_conn_id": "flows_webhook", "smtp_conn_id": "flows_smtp", "to": ["oncall@example.org"]}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    spec = load_spec(path)
    yield spec, pipelines
    import shutil

    shutil.rmtree(checkpoint_dir(spec), ignore_errors=True)


def _produce_bad_day(spec: Any, bootstrap: str) -> None:
    """A day whose region table knows 2 of 12 users (match rate ~0.17, the suite wants 0.85), 48 clicks and a
    49th that cannot be read (a dead letter: the day's output lacks it, so it is not complete), then a click
    of every user two hours after the day (every partition's watermark past day end + 1 h lateness)."""
    from streamjoin.core.codec import encode
    from streamjoin.core.spec import Format
    from streamjoin.kafka.admin import ensure_topics
    from streamjoin.kafka.clients import produce_records
    from streamjoin.kafka.topics import plan_topics

    ensure_topics({"bootstrap.servers": bootstrap}, plan_topics(spec))
    assert {partition_for(u.encode(), spec.kafka.partitions) for u in USERS} == set(range(spec.kafka.partitions))
    start = day_start_ms(DAY)
    rows = [(spec.right.topic, u.encode(), encode("europe", Format.STRING), start - 60_000, []) for u in USERS[:2]]
    for n in range(48):  # a click every 30 min
        rows.append((spec.left.topic, USERS[n % 12].encode(), encode(1, Format.LONG), start + n * 1_800_000, []))
    rows.append((spec.left.topic, USERS[0].encode(), b"\x01\x02\x03", start + 1_000, []))  # not an 8-byte long
    for u in USERS:
        rows.append((spec.left.topic, u.encode(), encode(1, Format.LONG), start + DAY_MS + 7_200_000, []))
    produce_records(bootstrap, rows)


@pytest.mark.airflow
@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.timeout(1800)  # three spark-submit runs and three checks: minutes on a machine shared with others
def test_a_day_that_breaks_an_expectation_is_quarantined_alerted_and_published_only_with_force(
    pipeline: tuple[Any, Path], kafka_bootstrap: str
) -> None:
    from streamjoin.core.backfill import partition_path
    from streamjoin.core.publish import read_forced
    from streamjoin.core.storage import LocalStorage
    from streamjoin.quality.results import read_check_result, read_quarantine

    spec, pipelines = pipeline
    _produce_bad_day(spec, kafka_bootstrap)
    day = str(partition_path(spec.output.files.path, DAY))
    aggregate = str(partition_path(spec.aggregate.output.files.path, DAY))  # the day's other output
    next_midnight = datetime(DAY.year, DAY.month, DAY.day, tzinfo=UTC) + timedelta(days=1)
    # what the status page's "Reprocess day" sends (streamjoin.airflow.actions.action_request)
    page_conf = {"pipeline": spec.name, "start": DAY.isoformat(), "end": DAY.isoformat(), "overwrite": True,
                 "dry_run": False}  # fmt: skip
    steps = [
        # the scheduled run of the day: its data interval [DAY, DAY + 1) ends at the next midnight
        {"file": "streamjoin_backfill.py", "dag_id": f"streamjoin_backfill_{spec.name}", "day_path": day,
         "aggregate_path": aggregate, "logical_date": next_midnight.isoformat()},
        {"file": "streamjoin_reprocess.py", "dag_id": "streamjoin_reprocess", "conf": page_conf, "day_path": day,
         "aggregate_path": aggregate},
        {"file": "streamjoin_reprocess.py", "dag_id": "streamjoin_reprocess",
         "conf": {**page_conf, "force": True, "reason": REASON}, "day_path": day, "aggregate_path": aggregate,
},
    ]  # fmt: skip
    with smtp_sink() as smtp, http_sink() as http:
        env = {
            "STREAMJOIN_PIPELINES_DIR": str(pipelines),
            "AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT": _kafka_conn(kafka_bootstrap),
            "AIRFLOW_CONN_FLOWS_WEBHOOK": json.dumps(http.connection("/alerts")),
            "AIRFLOW_CONN_FLOWS_SMTP": json.dumps(smtp.connection()),
            "AIRFLOW__API__BASE_URL": BASE_URL,
        }
        (backfill, again, forced), log = _steps(steps, env, LOGS / "backfill_quarantine_force.log")
    context = f"\n{log[-6000:]}\n(whole log: {LOGS / 'backfill_quarantine_force.log'})"

    # each day was checked and published in its reprocessing application: no Spark nor GX in Airflow's process,
    # the job's check lines (and its Data Docs link) in reprocess_day's log, one outcome record per run
    assert [step["in_process"] for step in (backfill, again, forced)] == [[], [], []], context
    assert log.count("job: streamjoin check {") == 3, context
    assert f"job: streamjoin check: {spec.name} enriched {DAY}: FAILED; blocking: match_rate" in log, context
    assert f"Data Docs: {BASE_URL}/" in log, context

    # the backfill: sensor and reprocessing pass, the check fails; quarantined, no asset event
    assert backfill["tasks"] == {"wait_for_watermark[-1]": "success", "reprocess_day[-1]": "success",
                                 "check_quality[-1]": "failed"}, context  # fmt: skip
    assert backfill["state"] == "failed" and backfill["events"] == []
    assert backfill["files"] is not None, context
    assert "_QUARANTINED" in backfill["files"] and any(f.endswith(".parquet") for f in backfill["files"])
    marker = backfill["quarantine"]
    assert marker is not None and marker["reason"] == "blocking checks failed: match_rate, left_records_complete"
    assert f"stream watermark {DAY + timedelta(days=1)} 02:00:00 UTC" in log, context
    # the day's aggregate is quarantined with it: swapped in only beside the same marker
    assert backfill["aggregate_files"] is not None, context
    assert any(f.endswith(".parquet") for f in backfill["aggregate_files"])
    assert backfill["aggregate_quarantine"] == marker, backfill["aggregate_files"]

    # reprocessed from the page's conf: still quarantined, the same files, no asset event
    assert again["tasks"]["day.check_quality[0]"] == "failed" and again["state"] == "failed", context
    assert again["files"] == backfill["files"] and again["events"] == []
    assert again["quarantine"] is not None and "_FORCED.json" not in again["files"]
    assert again["aggregate_files"] == backfill["aggregate_files"] and again["aggregate_quarantine"] == marker

    # with force: published, recorded, the asset event says so
    assert forced["tasks"]["day.check_quality[0]"] == "success" and forced["state"] == "success", context
    assert "_QUARANTINED" not in forced["files"] and "_FORCED.json" in forced["files"] and read_quarantine(day) is None
    assert forced["aggregate_quarantine"] is None and "_QUARANTINED" not in forced["aggregate_files"]
    assert any(f.endswith(".parquet") for f in forced["aggregate_files"]), forced["aggregate_files"]
    assert forced["aggregate_files"] != backfill["aggregate_files"]  # the new computation, swapped in with it
    record = read_forced(LocalStorage(), day)
    assert record is not None and record["failed"] == FAILED and record["dag_id"] == "streamjoin_reprocess"
    assert record["run_id"] == forced["run_id"] and record["reason"] == REASON
    # the pages say the day was published over its failed check, with who and why
    from streamjoin.airflow.quality_status import FORCED as PUBLISHED_WITH_FORCE
    from streamjoin.airflow.quality_status import quality_status
    from streamjoin.core.plans import resolve

    shown = quality_status(resolve(spec.output.files.path))
    assert shown is not None and shown.verdict == PUBLISHED_WITH_FORCE and shown.day == DAY.isoformat()
    assert "published with force over the failed check by " in shown.text and shown.text.endswith(REASON)
    assert forced["events"] == [{"asset": f"streamjoin_{spec.name}_daily", "pipeline": spec.name,
                                 "day": DAY.isoformat(), "path": day, "forced": True}]  # fmt: skip
    result = read_check_result(day)
    assert result is not None and not result.success and result.partition_path == day
    # completeness: the check counted the day's 49 clicks on the topic; 48 have their output
    complete = result.outcome("left_records_complete")
    assert not complete.success and complete.observed == 48 and "the 49 left input records" in complete.description

    # one alert per failed check on each destination: the backfill's and the reprocess run's, none after force
    assert [(r["json"]["dag_id"], r["json"]["event"]) for r in http.requests] == [
        (f"streamjoin_backfill_{spec.name}", "streamjoin.quality_failed"),
        ("streamjoin_reprocess", "streamjoin.quality_failed"),
    ]
    first, second = (r["json"] for r in http.requests)
    assert first["blocking_failed"] == FAILED and first["day"] == DAY.isoformat()
    assert first["outcome"].startswith("day quarantined at ") and "nothing republished" in second["outcome"]
    assert first["log_url"].startswith(f"{BASE_URL}/dags/streamjoin_backfill_{spec.name}/runs/")
    assert len(smtp.messages) == 2 and {e[1][0] for e in smtp.envelopes} == {"oncall@example.org"}
    assert all(f"quality check failed ({', '.join(FAILED)})" in str(m["Subject"]) for m in smtp.messages)
    assert "streamjoin_reprocess" in SmtpSink.body(smtp.messages[1])


#: why the forced run publishes the day (the reprocess form's ``reason``)
REASON = "the regions topic was late today; the sales team accepts the day as it is"

STAND_IN_DRIVER = """
import sys, time
from pathlib import Path
stop = Path(sys.argv[1]) / "stop"
print("running", flush=True)
while not stop.exists():  # as the job does between batches
    time.sleep(0.1)
print("stopped by the marker", flush=True)
"""


@pytest.mark.airflow
def test_stop_redeploy_dag_stops_a_running_driver_and_records_the_intent(tmp_path: Path) -> None:
    from streamjoin.core.job_files import PipelineFiles
    from streamjoin.core.plans import checkpoint_dir
    from streamjoin.core.spec import load_spec

    name = f"flows_{uuid.uuid4().hex[:8]}"
    pipelines = tmp_path / "pipelines"
    data = yaml.safe_load((PROJECT_HOME / "include" / "pipelines" / "clicks_per_region.yaml").read_text())
    data["name"] = name
    pipelines.mkdir()
    (pipelines / f"{name}.yaml").write_text(yaml.safe_dump(data))
    spec = load_spec(pipelines / f"{name}.yaml")
    files = PipelineFiles(checkpoint_dir(spec))
    files.checkpoint.mkdir(parents=True, exist_ok=True)
    driver = subprocess.Popen(
        [sys.executable, "-c", STAND_IN_DRIVER, str(files.checkpoint)], stdout=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        # the child's command line is read once it runs: Popen returns during its exec, before Linux has set it
        assert driver.stdout is not None and driver.stdout.readline().strip() == "running"
        # the name guards against pid reuse: it must be in the command line
        files.record_driver(driver.pid, driver.pid, str(tmp_path / "driver.log"), str(files.checkpoint))
        assert files.driver_alive()
        step = {"file": "streamjoin_stop_redeploy.py", "dag_id": "streamjoin_stop_redeploy",
                "conf": {"pipeline": name, "redeploy": False}}  # fmt: skip
        (run,), log = _steps(
            [step], {"STREAMJOIN_PIPELINES_DIR": str(pipelines)}, tmp_path / "dag-test.log", timeout=300
        )
        assert run["state"] == "success", f"{run['tasks']}\n{log[-4000:]}"
        assert run["tasks"] == {"pipeline_spec_path[-1]": "success", "stop_or_redeploy[-1]": "success"}
        assert driver.wait(timeout=30) == 0 and driver.stdout is not None
        assert driver.stdout.read().strip() == "stopped by the marker"  # it honoured the marker, no signal
        assert files.intent() == "stop" and not files.stop_requested()
    finally:
        if driver.poll() is None:
            driver.kill()
        import shutil

        shutil.rmtree(files.checkpoint, ignore_errors=True)
