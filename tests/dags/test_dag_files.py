"""DAG files: they parse in Airflow without importing pyspark, every demo DAG wires the same tasks, the seed's
demo DAG runs to success for real (``dag.test()``: two spark-submit runs and an in-task check), and every
other demo pipeline writes what the semantics imply when its DAG's tasks run in-process (the two Spark tasks as
the code their jobs run, in the test's SparkSession: the end-to-end path is the seed's)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from job_modules import job_module
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.spec import Format

PARSE = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(sys.argv[1])
wiring = {d: {t.task_id: [type(t).__name__, sorted(t.downstream_task_ids)] for t in bag.get_dag(d).tasks}
          for d in bag.dag_ids if d.endswith("_demo")}
docs = {d: [bag.get_dag(d).description or "", bag.get_dag(d).doc_md or ""] for d in bag.dag_ids}
print(json.dumps({"errors": {k: str(v) for k, v in bag.import_errors.items()}, "dags": sorted(bag.dag_ids),
                  "wiring": wiring, "pyspark": sorted(m for m in sys.modules if m.split(".")[0] == "pyspark"),
                  "docs": docs}))
"""

SEED = "clicks_per_region"
#: every demo DAG's tasks, in the order they run (a chain), and their operators
DEMO_OPERATORS = {
    "reset_demo": "_PythonDecoratedOperator",
    "provision_topics": "ProvisionTopicsOperator",
    "produce_sample": "_PythonDecoratedOperator",
    "run_join": "StreamJoinJobOperator",
    "reprocess_day": "ReprocessDayOperator",
    "check_quality": "CheckAndPublishDayOperator",
    "report": "_PythonDecoratedOperator",
}
DEMO_TASKS = list(DEMO_OPERATORS)
#: task -> [operator, downstream tasks], as the DAG's parse gives it
DEMO_WIRING = {task: [kind, DEMO_TASKS[n + 1 : n + 2]] for n, (task, kind) in enumerate(DEMO_OPERATORS.items())}

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
    # every demo DAG wires the seed's tasks: the seed's runs end to end below, the others' tasks in-process
    assert out["wiring"] == {f"streamjoin_{name}_demo": DEMO_WIRING for name in REFERENCE_FUNCTIONS}
    # each DAG says in the DAG list what it does and whether to unpause it, and in its docs why
    for dag_id, (description, doc) in out["docs"].items():
        wanted = "Demo only" if dag_id.endswith("_demo") else "Keep unpaused" if dag_id in (
            "streamjoin_reprocess", "streamjoin_stop_redeploy") else "Unpause to"  # fmt: skip
        assert description.startswith(wanted), (dag_id, description)
        assert ("unpause" in doc.lower()) and len(doc) > 200, (dag_id, doc)
    chain = "`clicks` left-stream-table `regions`, then left-stream-globaltable `categories` from"
    for dag_id in ("streamjoin_clicks_per_region_category", "streamjoin_clicks_per_region_category_demo"):
        assert chain in out["docs"][dag_id][1], out["docs"][dag_id]  # a chain's docs name every stage


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
    # seed 000 on Avro values (a click without page gets the reader schema's default) and an Avro output
    "clicks_per_region_avro": {
        "joiner": lambda k, left, right: {
            "region": right["region"] if right is not None else "UNKNOWN",
            "clicks": left["clicks"],
            "page": left.get("page", "home"),
        },
        "group_by": lambda k, v: v["region"],
        "value": lambda k, v: v["clicks"],
    },
    # two join stages: clicks left-join regions (with_region), then left-join the product's category
    "clicks_per_region_category": {
        "joiner": lambda k, left, right: _region_or_category(left, right),
        "key_selector": lambda k, v: v["product"],
        "group_by": lambda k, v: f"{v['region']}/{v['category']}",
        "value": lambda k, v: v["clicks"],
    },
}


def _region_or_category(left: dict[str, Any], right: str | None) -> dict[str, Any]:
    """Both stages' joiners of clicks_per_region_category (the reference engine takes one ``joiner`` for every
    stage): stage 1's left is a click (no region yet), stage 2's is stage 1's result."""
    if "region" not in left:
        return {"product": left["product"], "clicks": left["clicks"], "region": "UNKNOWN" if right is None else right}
    return {"region": left["region"], "category": "OTHER" if right is None else right, "product": left["product"],
            "clicks": left["clicks"]}  # fmt: skip


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


def _lineage_events(lineage_file: Path) -> dict[str, dict[str, Any]]:
    """task id -> event type -> the event, as the OpenLineage provider's file transport wrote them."""
    by_task: dict[str, dict[str, Any]] = {}
    for line in lineage_file.read_text().splitlines():
        if line.strip():
            event = json.loads(line)
            by_task.setdefault(event["job"]["name"].rsplit(".", 1)[-1], {})[event["eventType"]] = event
    return by_task


def _operator_lineage_events(tasks: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The same shape from what the operators give the OpenLineage provider when their task starts and
    completes (``get_openlineage_facets_on_start`` / ``_on_complete``), for tasks run without Airflow."""
    import attr

    def event(lineage: Any) -> dict[str, Any]:
        return {
            "inputs": [{"namespace": d.namespace, "name": d.name} for d in lineage.inputs],
            "outputs": [{"namespace": d.namespace, "name": d.name} for d in lineage.outputs],
            "job": {"facets": {k: attr.asdict(f) for k, f in lineage.job_facets.items()}},
        }

    return {
        task: {"START": event(op.get_openlineage_facets_on_start()),
               "COMPLETE": event(op.get_openlineage_facets_on_complete(None))}
        for task, op in tasks.items()
    }  # fmt: skip


def _assert_lineage(by_task: dict[str, dict[str, Any]], spec: Any, bootstrap: str, day: str) -> None:
    """For the join job and the reprocessed day, a START and a COMPLETE event naming the spec's topics and
    files, and the join as a job facet."""
    from streamjoin.core.plans import resolve

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
        assert facet["join"]["right"]["topic"] == spec.right.topic  # the last stage's right input
        stages = facet["join"].get("stages", [facet["join"]])  # a chain lists every stage, the first's left input
        assert [s["right"]["topic"] for s in stages] == [spec.inputs[s.right].topic for s in spec.stages]
        assert stages[0]["left"]["topic"] == spec.left.topic
    assert by_task["run_join"]["COMPLETE"]["job"]["facets"]["streamjoin_join"]["processing"] == "streaming"
    assert by_task["reprocess_day"]["COMPLETE"]["job"]["facets"]["streamjoin_join"]["processing"] == "batch"


def _kafka_conn(bootstrap: str) -> str:
    host, port = bootstrap.split(":")
    return json.dumps({"conn_type": "streamjoin_kafka", "host": host, "port": int(port)})


def _served_data_docs(url: str | None) -> Path:
    """The local page behind a Data Docs link: a link people can open (under ``[api] base_url``, the plugin's
    route), whose path names the file under the served directory."""
    from urllib.parse import unquote, urlsplit

    from streamjoin.airflow.ui_paths import DATA_DOCS_DIR, DATA_DOCS_PATH
    from streamjoin.core.plans import resolve

    assert url is not None and url.startswith(("http://", "https://")) and f"{DATA_DOCS_PATH}/" in url, url
    return Path(resolve(DATA_DOCS_DIR), unquote(urlsplit(url).path.split(f"{DATA_DOCS_PATH}/", 1)[1]))


def _assert_day_and_outputs(spec: Any, kafka_bootstrap: str) -> tuple[str, list[tuple[str, Any, Any, int]]]:
    """The demo's day passed its check (rows, Data Docs; a left join of a stream on a table: completeness, the
    check having counted the sample's left records with a value on the topic), and the output topics hold what
    the reference engine emits for the sample (per key, in order, with the records' times). Returns the day and
    the records."""
    from streamjoin.core.avro import decode_wire
    from streamjoin.core.backfill import DAY_MS, day_start_ms
    from streamjoin.core.codec import decode
    from streamjoin.demo.report import latest_check
    from streamjoin.demo.sample import DEMO_BEFORE_DAY_END_MS, demo_records
    from streamjoin.kafka.clients import consume_all
    from streamjoin.kafka.schema_registry import registry_config, writer_schema
    from streamjoin.quality.gate import counts_left_records

    check = latest_check(spec)
    assert check is not None and check.success, check and check.summary()
    assert check.row_count and check.row_count > 0
    docs = _served_data_docs(check.data_docs_url)
    assert docs.is_file(), docs
    if counts_left_records(spec):
        left = [r for r in demo_records(spec) if r.topic == spec.left.topic and r.value is not None]
        complete = check.outcome("left_records_complete")
        assert complete.success and complete.observed == len(left) > 0, complete

    base = day_start_ms(date.fromisoformat(check.day)) + DAY_MS - DEMO_BEFORE_DAY_END_MS
    sinks = [spec.output] + ([spec.aggregate.output] if spec.aggregate else [])
    got = []
    for sink in sinks:
        for record in consume_all(kafka_bootstrap, str(sink.topic), timeout=30):
            ts = int(dict(record.headers)["ts"]) - base
            if sink.value_format is Format.AVRO:  # the output's registered schema, by the id in each record
                config = registry_config(sink.registry_conn_id)
                value = decode_wire(record.value, lambda i, config=config: writer_schema(config, i))
            else:
                value = decode(record.value, sink.value_format)
            got.append((sink.topic, decode(record.key, Format.STRING), value, ts))
    expected = [(e.topic, e.key, e.value, e.ts) for e in _expected_outputs(spec) if e.topic != spec.dead_letter_topic]
    assert expected and _per_key(got) == _per_key(expected), f"expected {expected}\n   got {got}"
    return check.day, got


@pytest.mark.airflow
@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.e2e
def test_seed_demo_dag_writes_what_the_semantics_imply_and_its_day_passes_its_quality_check(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """``streamjoin_clicks_per_region_demo`` through Airflow (``dag.test()``), spark-submit and all."""
    from streamjoin.core.spec import load_spec
    from streamjoin.demo.sample import EXPECTED_TOTALS
    from streamjoin.kafka.clients import consume_all

    pipeline = SEED
    spec = load_spec(PROJECT_HOME / "include" / "pipelines" / f"{pipeline}.yaml")
    conn = _kafka_conn(kafka_bootstrap)
    lineage_file = tmp_path / "openlineage.jsonl"
    transport = json.dumps({"type": "file", "log_file_path": str(lineage_file), "append": True})
    out = _python(
        RUN, str(PROJECT_HOME / "dags"), f"streamjoin_{pipeline}_demo", timeout=900,
        env={"AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT": conn, "AIRFLOW__OPENLINEAGE__TRANSPORT": transport,
             "AIRFLOW__OPENLINEAGE__NAMESPACE": "streamjoin-test"},
    )  # fmt: skip
    result = json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[7:])
    assert result["state"] == "success", result
    assert result["tasks"] == dict.fromkeys(DEMO_TASKS, "success")

    day, got = _assert_day_and_outputs(spec, kafka_bootstrap)
    _assert_lineage(_lineage_events(lineage_file), spec, kafka_bootstrap, day)
    assert {k: v[-1][0] for (t, k), v in _per_key(got).items() if t == "clicks-per-region"} == EXPECTED_TOTALS
    dead = consume_all(kafka_bootstrap, "clicks-per-region-dlq", timeout=30)
    assert [dict(r.headers)["reason"] for r in dead] == [b"null-value"]


@pytest.fixture
def session_settings(spark: Any) -> Iterator[Any]:
    """The shared SparkSession, its runtime settings put back afterwards (the check task's ``build_session``
    sets its own on the session it gets, which here is the shared one)."""
    before = dict(spark.conf.getAll)
    yield spark
    for key, value in dict(spark.conf.getAll).items():
        if before.get(key) != value:
            with contextlib.suppress(Exception):  # a static setting cannot change anyway
                spark.conf.set(key, before[key]) if key in before else spark.conf.unset(key)


@pytest.fixture
def demo_registry(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """For a demo pipeline with Avro inputs: a local schema registry (Apicurio, as `make registry-start` runs
    it) as the demo's connection ``schema_registry_default``, stopped after the test; nothing for the others."""
    from streamjoin.core.spec import load_spec
    from streamjoin.kafka import schema_registry
    from streamjoin.localdev.schema_registry import SchemaRegistry

    spec = load_spec(PROJECT_HOME / "include" / "pipelines" / f"{request.node.callspec.params['pipeline']}.yaml")
    if not any(i.value.format is Format.AVRO for i in spec.inputs.values()):
        yield
        return
    port = int(os.environ.get("STREAMJOIN_TEST_KAFKA_PORT", "19092")) + 34  # beside test_avro_topics' (+33)
    registry = SchemaRegistry(tmp_path_factory.mktemp("registry"), port)
    registry.start(timeout=90)
    conn = {"conn_type": "http", "host": "127.0.0.1", "port": port, "schema": "apis/ccompat/v6"}
    monkeypatch.setenv("AIRFLOW_CONN_SCHEMA_REGISTRY_DEFAULT", json.dumps(conn))
    schema_registry.registry_config.cache_clear()
    try:
        yield
    finally:
        registry.stop()
        schema_registry.registry_config.cache_clear()


@pytest.mark.airflow
@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.parametrize("pipeline", [name for name in REFERENCE_FUNCTIONS if name != SEED])
def test_demo_pipeline_writes_what_the_semantics_imply_and_its_day_passes_its_quality_check(
    pipeline: str, kafka_bootstrap: str, session_settings: Any, monkeypatch: pytest.MonkeyPatch, demo_registry: None
) -> None:
    """The pipeline's demo DAG's own tasks, run in this process in the DAG's order: its Python tasks, topic
    provisioning and the check's report (``execute``); its two spark-submit tasks as what their jobs run
    (``jobs/stream_join.py --available-now``: ``run_stream``; ``jobs/reprocess_day.py --check``:
    ``reprocess_day`` staged, then the job's ``check_day`` in the same session). Then the same outputs, check
    and lineage as the seed's run through Airflow."""
    from streamjoin.airflow.dag_factory import KAFKA_CONN_ID
    from streamjoin.airflow.demo_dag import demo_dag
    from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook
    from streamjoin.core.backfill import parse_day, plan_day
    from streamjoin.core.plans import checkpoint_dir
    from streamjoin.core.spec import load_spec
    from streamjoin.spark.job import JobSettings, run_stream
    from streamjoin.spark.reprocess import reprocess_day

    spark = session_settings
    monkeypatch.setenv("AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT", _kafka_conn(kafka_bootstrap))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    spec_path = f"include/pipelines/{pipeline}.yaml"  # as the DAG file names it (dag_factory.spec_paths)
    spec = load_spec(PROJECT_HOME / spec_path)
    dag = demo_dag(spec_path)
    assert dag.dag_id == f"streamjoin_{pipeline}_demo"
    tasks: dict[str, Any] = dict(dag.task_dict)
    assert {t: [type(op).__name__, sorted(op.downstream_task_ids)] for t, op in tasks.items()} == DEMO_WIRING

    tasks["reset_demo"].python_callable(spec_path)
    tasks["provision_topics"].execute({})
    sample = tasks["produce_sample"].python_callable(spec_path)
    day = sample["day"]
    for task in ("reprocess_day", "check_quality"):  # their template: the day produce_sample returned
        tasks[task].day = day
    kafka = StreamJoinKafkaHook(KAFKA_CONN_ID).checked_config()  # what both Spark tasks hand their job
    settings = JobSettings(kafka, str(checkpoint_dir(spec)), available_now=True, home=str(PROJECT_HOME))
    assert run_stream(spark, spec, settings) >= 1
    staged = reprocess_day(spark, spec, plan_day(spec, parse_day(day)), kafka, home=PROJECT_HOME, stage=True)
    assert staged.input_rows > 0 and staged.results > 0, staged
    # the same application checks and publishes the staged day, with the arguments the operator gives the job
    job = job_module("reprocess_day")
    args = job.parse_args(["--spec", spec_path, "--bootstrap", kafka_bootstrap, "--day", day,
                           *tasks["reprocess_day"]._check_args({"run_id": "manual__in_process"})])  # fmt: skip
    outcome = job.check_day(spark, spec, parse_day(day), kafka, args, PROJECT_HOME, staged)
    assert outcome.action == "publish" and outcome.input_rows == staged.input_rows, outcome
    published = tasks["check_quality"].execute({"run_id": "manual__in_process"})
    assert published["day"] == day and not published["forced"], published
    report = tasks["report"].python_callable(spec_path)
    assert report["quality"] == {"day": day, "success": True, "data_docs_url": published["data_docs_url"]}

    checked, got = _assert_day_and_outputs(spec, kafka_bootstrap)
    assert checked == day
    final = {k: v[-1][0] for (t, k), v in _per_key(got).items() if t == report["topic"] and v[-1][0] is not None}
    assert report["table"] == final  # the report reads back the output's final table
    _assert_lineage(_operator_lineage_events({t: tasks[t] for t in ("run_join", "reprocess_day")}),
                    spec, kafka_bootstrap, day)  # fmt: skip


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
