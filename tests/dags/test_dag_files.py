"""DAG files: they parse in Airflow without importing pyspark, and every demo DAG runs to success for real."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.spec import Format

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
    assert {f"streamjoin_{name}_demo" for name in REFERENCE_FUNCTIONS} <= set(out["dags"])
    assert "streamjoin_clicks_per_region" in out["dags"]  # generated from include/pipelines/
    assert out["pyspark"] == [], f"parsing the DAGs imported {out['pyspark']}"


#: Python stand-ins for the Spark SQL projections of the example specs: the reference engine computes
#: what each demo must write (it cannot run Spark SQL)
REFERENCE_FUNCTIONS: dict[str, dict[str, Any]] = {
    "clicks_per_region": {
        "joiner": lambda k, left, right: {"region": right if right is not None else "UNKNOWN", "clicks": left},
        "group_by": lambda k, v: v["region"],
        "value": lambda k, v: v["clicks"],
    },
    "page_views_profiles": {
        "joiner": lambda k, left, right: {"page": left, "region": right if right is not None else "<unknown>"},
    },
    "ad_views_clicks": {},
    "orders_products": {
        "joiner": lambda k, left, right: {"product": left["product"], "name": right, "qty": left["qty"]},
        "foreign_key": lambda k, v: v["product"],
    },
}


def _expected_outputs(spec: Any) -> list[Any]:
    """What the reference engine emits for the demo sample as the job sees it: every record already on the
    broker, each on the partition Kafka's partitioner gives its key."""
    from streamjoin.core.codec import encode
    from streamjoin.core.partitioner import partition_for
    from streamjoin.core.records import Record
    from streamjoin.core.reference import ReferenceEngine
    from streamjoin.demo.sample import demo_records

    records = []
    for sample in demo_records(spec):
        key_format = spec.input_by_topic(sample.topic)[1].key.format
        partition = partition_for(encode(sample.key, key_format), spec.kafka.partitions)
        records.append(Record(sample.topic, sample.key, sample.value, sample.offset_ms, partition))
    return ReferenceEngine(spec, REFERENCE_FUNCTIONS[spec.name]).replay_batch(records)


def _per_key(rows: list[tuple[str, Any, Any, int]]) -> dict[tuple[str, Any], list[tuple[Any, int]]]:
    grouped: dict[tuple[str, Any], list[tuple[Any, int]]] = {}
    for topic, key, value, ts in rows:
        grouped.setdefault((topic, key), []).append((value, ts))
    return grouped


def _assert_lineage(lineage_file: Path, spec: Any, bootstrap: str, day: str) -> None:
    """The OpenLineage provider's file transport got, for the join job and the reprocessed day, a START and a
    COMPLETE event naming the spec's topics and files, and the join as a job facet."""
    from streamjoin.core.plans import resolve

    events = [json.loads(line) for line in lineage_file.read_text().splitlines() if line.strip()]
    by_task: dict[str, dict[str, Any]] = {}
    for event in events:
        task = event["job"]["name"].rsplit(".", 1)[-1]
        by_task.setdefault(task, {})[event["eventType"]] = event
    kafka = f"kafka://{bootstrap}"
    topics = {(kafka, inp.topic) for inp in spec.inputs.values()}
    files = resolve(spec.output.files.path)
    for task, outputs in {
        "run_join": {(kafka, str(spec.output.topic)), (kafka, spec.dead_letter_topic), ("file", str(files))},
        "reprocess_day": {("file", str(files / "daily" / f"date={day}"))},
    }.items():
        assert {"START", "COMPLETE"} <= set(by_task.get(task, {})), (task, sorted(by_task))
        complete = by_task[task]["COMPLETE"]
        assert {(d["namespace"], d["name"]) for d in complete["inputs"]} == topics
        assert outputs <= {(d["namespace"], d["name"]) for d in complete["outputs"]}
        facet = complete["job"]["facets"]["streamjoin_join"]
        declared = (spec.name, spec.join.shape.value, spec.join.kind.value)
        assert (facet["pipeline"], facet["shape"], facet["kind"]) == declared
        assert facet["join"]["left"]["topic"] == spec.left.topic and facet["join"]["right"]["topic"] == spec.right.topic
    assert by_task["run_join"]["COMPLETE"]["job"]["facets"]["streamjoin_join"]["processing"] == "streaming"
    assert by_task["reprocess_day"]["COMPLETE"]["job"]["facets"]["streamjoin_join"]["processing"] == "batch"


@pytest.mark.airflow
@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.e2e
@pytest.mark.parametrize("pipeline", list(REFERENCE_FUNCTIONS))
def test_demo_dag_writes_what_the_semantics_imply_and_its_day_passes_its_quality_check(
    pipeline: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    from streamjoin.core.backfill import DAY_MS, day_start_ms
    from streamjoin.core.codec import decode
    from streamjoin.core.spec import load_spec
    from streamjoin.demo.report import latest_check
    from streamjoin.demo.sample import DEMO_BEFORE_DAY_END_MS, EXPECTED_TOTALS
    from streamjoin.kafka.clients import consume_all
    from streamjoin.quality.results import data_docs_file

    spec = load_spec(PROJECT_HOME / "include" / "pipelines" / f"{pipeline}.yaml")
    host, port = kafka_bootstrap.split(":")
    conn = json.dumps({"conn_type": "streamjoin_kafka", "host": host, "port": int(port)})
    lineage_file = tmp_path / "openlineage.jsonl"
    transport = json.dumps({"type": "file", "log_file_path": str(lineage_file), "append": True})
    out = _python(
        RUN, str(PROJECT_HOME / "dags"), f"streamjoin_{pipeline}_demo", timeout=900,
        env={"AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT": conn, "AIRFLOW__OPENLINEAGE__TRANSPORT": transport,
             "AIRFLOW__OPENLINEAGE__NAMESPACE": "streamjoin-test"},
    )  # fmt: skip
    result = json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[7:])
    assert result["state"] == "success", result
    assert result["tasks"] == dict.fromkeys(
        ["reset_demo", "provision_topics", "produce_sample", "run_join", "reprocess_day", "check_quality", "report"],
        "success",
    )

    check = latest_check(spec)
    assert check is not None and check.success, check and check.summary()
    assert check.row_count and check.row_count > 0
    docs = data_docs_file(check.data_docs_url)
    assert docs is not None and docs.is_file()

    base = day_start_ms(date.fromisoformat(check.day)) + DAY_MS - DEMO_BEFORE_DAY_END_MS
    sinks = [spec.output] + ([spec.aggregate.output] if spec.aggregate else [])
    got = []
    for sink in sinks:
        for record in consume_all(kafka_bootstrap, str(sink.topic), timeout=30):
            ts = int(dict(record.headers)["ts"]) - base
            got.append((sink.topic, decode(record.key, Format.STRING), decode(record.value, sink.value_format), ts))
    expected = [(e.topic, e.key, e.value, e.ts) for e in _expected_outputs(spec) if e.topic != spec.dead_letter_topic]
    assert expected and _per_key(got) == _per_key(expected), f"expected {expected}\n   got {got}"
    _assert_lineage(lineage_file, spec, kafka_bootstrap, check.day)
    if pipeline == "clicks_per_region":
        assert {k: v[-1][0] for (t, k), v in _per_key(got).items() if t == "clicks-per-region"} == EXPECTED_TOTALS
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
