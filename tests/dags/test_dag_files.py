"""DAG files: they parse in Airflow without importing pyspark, and the demo DAG runs to success for real."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from streamjoin.core.plans import PROJECT_HOME

PARSE = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(sys.argv[1])
print(json.dumps({"errors": {k: str(v) for k, v in bag.import_errors.items()}, "dags": sorted(bag.dag_ids),
                  "pyspark": sorted(m for m in sys.modules if m.split(".")[0] == "pyspark")}))
"""

RUN = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
dag = DagBag(sys.argv[1]).get_dag(sys.argv[2])
run = dag.test()
print("RESULT " + json.dumps({"state": str(run.state),
      "tasks": {ti.task_id: str(ti.state) for ti in run.get_task_instances()}}))
"""


def _python(code: str, *args: str, timeout: int = 120, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})}, cwd=PROJECT_HOME,
    )  # fmt: skip
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.airflow
def test_dag_files_parse_without_pyspark() -> None:
    out = json.loads(_python(PARSE, str(PROJECT_HOME / "dags")).strip().splitlines()[-1])
    assert out["errors"] == {}
    assert "streamjoin_clicks_per_region_demo" in out["dags"]
    assert "streamjoin_clicks_per_region" in out["dags"]  # generated from include/pipelines/
    assert out["pyspark"] == [], f"parsing the DAGs imported {out['pyspark']}"


@pytest.mark.airflow
@pytest.mark.kafka
@pytest.mark.spark
def test_demo_dag_runs_to_success_and_produces_the_expected_totals(kafka_bootstrap: str) -> None:
    from streamjoin.core.codec import decode
    from streamjoin.core.spec import Format
    from streamjoin.demo.sample import EXPECTED_TOTALS
    from streamjoin.kafka.clients import consume_all

    host, port = kafka_bootstrap.split(":")
    conn = json.dumps({"conn_type": "streamjoin_kafka", "host": host, "port": int(port)})
    out = _python(
        RUN, str(PROJECT_HOME / "dags"), "streamjoin_clicks_per_region_demo", timeout=900,
        env={"AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT": conn},
    )  # fmt: skip
    result = json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[7:])
    assert result["state"] == "success", result
    assert set(result["tasks"].values()) == {"success"}, result["tasks"]
    totals: dict[str, int] = {}
    for record in consume_all(kafka_bootstrap, "clicks-per-region", timeout=30):
        assert record.key is not None
        totals[record.key.decode()] = decode(record.value, Format.LONG)
    assert totals == EXPECTED_TOTALS
    dead = consume_all(kafka_bootstrap, "clicks-per-region-dlq", timeout=30)
    assert [dict(r.headers)["reason"] for r in dead] == [b"null-value"]


PLUGINS = """
import json, sys
from airflow import plugins_manager
plugins, errors = plugins_manager._get_plugins()
print(json.dumps({"plugins": [p.name for p in plugins], "errors": {str(k): str(v) for k, v in errors.items()},
                  "pyspark": sorted(m for m in sys.modules if m.split(".")[0] == "pyspark")}))
"""


@pytest.mark.airflow
def test_the_ui_plugin_loads_once_without_import_errors_or_pyspark() -> None:
    out = json.loads(_python(PLUGINS).strip().splitlines()[-1])
    assert out["errors"] == {}
    assert out["plugins"].count("streamjoin") == 1
    assert out["pyspark"] == []
