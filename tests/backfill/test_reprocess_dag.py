"""The reprocessing DAG for real (dag.test() in a subprocess): bad input fails in validate and writes
nothing; three days in, three published partitions and three asset events out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from backfill_data import USERS, write_seed_spec

from streamjoin.core.backfill import day_start_ms, partition_path
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.spec import Format, load_spec

pytestmark = [pytest.mark.airflow, pytest.mark.kafka, pytest.mark.spark, pytest.mark.e2e]
FIRST = datetime.now(UTC).date() - timedelta(days=4)  # recent: within the broker's retention

RUN = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
from airflow.models.asset import AssetEvent
from airflow.utils.session import create_session
dag = DagBag(sys.argv[1]).get_dag("streamjoin_reprocess")
run = dag.test(run_conf=json.loads(sys.argv[2]))
with create_session() as session:
    events = session.query(AssetEvent).filter(AssetEvent.source_run_id == run.run_id).all()
    extras = [e.extra for e in events]
tasks = {f"{ti.task_id}[{ti.map_index}]": str(ti.state) for ti in run.get_task_instances()}
print("RESULT " + json.dumps({"state": str(run.state), "tasks": tasks, "events": extras}))
"""


def _run(conf: dict[str, Any], pipelines: Path, bootstrap: str, timeout: int = 600) -> dict[str, Any]:
    host, port = bootstrap.split(":")
    env = {
        **os.environ,
        "STREAMJOIN_PIPELINES_DIR": str(pipelines),
        "AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT": json.dumps(
            {"conn_type": "streamjoin_kafka", "host": host, "port": int(port)}
        ),
    }
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(PROJECT_HOME / "dags" / "streamjoin_reprocess.py"), json.dumps(conf)],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=PROJECT_HOME,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    result = json.loads(lines[-1][7:])
    result["log"] = done.stdout + done.stderr
    return result


def test_reprocess_dag_validates_then_publishes_three_days(
    tmp_path: Path, kafka_bootstrap: str, topic_factory: Callable[[str], str]
) -> None:
    from streamjoin.core.codec import encode
    from streamjoin.kafka.admin import ensure_topics
    from streamjoin.kafka.clients import produce_records
    from streamjoin.kafka.topics import plan_topics

    pipelines = tmp_path / "pipelines"
    spec = load_spec(write_seed_spec(pipelines, topic_factory))
    ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan_topics(spec))
    start = day_start_ms(FIRST)
    rows = [(spec.right.topic, u.encode(), encode("EU", Format.STRING), start - 1000, []) for u in USERS]
    for n in range(3 * 24):  # one click an hour for three days
        rows.append((spec.left.topic, USERS[n % 5].encode(), encode(1, Format.LONG), start + n * 3_600_000, []))
    produce_records(kafka_bootstrap, rows)
    assert spec.output.files is not None
    days = [FIRST + timedelta(days=n) for n in range(3)]

    late, early = (FIRST + timedelta(days=2)).isoformat(), FIRST.isoformat()
    bad = _run({"pipeline": spec.name, "start": late, "end": early}, pipelines, kafka_bootstrap)
    assert bad["state"] == "failed", bad["tasks"]
    assert bad["tasks"]["validate[-1]"] == "failed"
    assert f"end {early} is before start {late}" in bad["log"]
    assert not (Path(spec.output.files.path) / "daily").exists()  # nothing written

    conf = {"pipeline": spec.name, "start": days[0].isoformat(), "end": days[-1].isoformat()}
    good = _run(conf, pipelines, kafka_bootstrap)
    assert good["state"] == "success", (good["tasks"], good["log"][-4000:])
    assert {k: v for k, v in good["tasks"].items() if k.startswith("day.")} == {
        **{f"day.reprocess_day[{n}]": "success" for n in range(3)},
        **{f"day.check_quality[{n}]": "skipped" for n in range(3)},  # no quality suite: published by reprocess_day
    }
    for day in days:
        path = partition_path(spec.output.files.path, day)
        assert len(list(path.glob("*.parquet"))) >= 1, f"{path} was not published"
        assert f"progress: {spec.name} {day} published" in good["log"]
    assert sorted(e["day"] for e in good["events"]) == [d.isoformat() for d in days]
    daily = Path(spec.output.files.path) / "daily"
    # (readers skip names starting with _: _staging holds reprocessing's locks, none left once the runs ended)
    assert sorted(p.name for p in daily.iterdir() if not p.name.startswith("_")) == [f"date={d}" for d in days]
    assert not list((daily / "_staging").iterdir())
