"""State stays where it runs, on a standalone cluster of two one-core workers (issue 36): the seed join over a
backlog in several batches, exactly once, submitted as the operator submits it.

Each batch's ``streamjoin batch {...}`` line says which executor ran each stateful task (``tasks``: store/partition
-> executor) and which stores an executor had to load from the checkpoint's files (``store_loads``). While both
executors live, a partition's task stays on its executor and no store is loaded after the first batch. Then one
worker dies (SIGKILL, its executor with it) mid-run: its partitions move to the other executor, are loaded there
once, and stay; the output topic's content is the reference engine's, each record once (read committed).
"""

from __future__ import annotations

import json
import logging
import shutil
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from streamjoin.core.plans import PROJECT_HOME, checkpoint_dir
from streamjoin.localdev.spark_cluster import SparkStandaloneCluster, free_port

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.airflow, pytest.mark.e2e]

SEED_SPEC = PROJECT_HOME / "include" / "pipelines" / "clicks_per_region.yaml"
REGIONS = ["europe", "asia", "americas", "africa"]
USERS, CLICKS, PER_BATCH = 400, 3000, 500
#: the batch whose line makes the test kill a worker (the next one is running or about to)
KILL_AFTER = 2
BATCH_LINE = "job: streamjoin batch "


@pytest.fixture(scope="module")
def two_workers() -> Iterator[SparkStandaloneCluster]:
    home = PROJECT_HOME / ".local" / f"spark-cluster-test-{uuid.uuid4().hex[:8]}"
    cluster = SparkStandaloneCluster(home, free_port(), free_port(), cores=1, memory="1g", workers=2)
    cluster.start(timeout=90)
    yield cluster
    cluster.stop()
    shutil.rmtree(home, ignore_errors=True)


def _spec(tmp_path: Path, topic: Callable[[str], str]) -> Path:
    """The seed spec, exactly once, in batches of ``PER_BATCH`` offsets, with its own name, topics and folders."""
    raw = yaml.safe_load(SEED_SPEC.read_text())
    raw["name"] = f"clicks_per_region_two_workers_{uuid.uuid4().hex[:6]}"
    for side in raw["inputs"].values():
        side["topic"] = topic(side["topic"])
    raw["output"]["topic"] = topic("enriched-clicks")
    raw["output"]["delivery"] = "exactly_once"
    raw["aggregate"]["output"]["topic"] = topic("clicks-per-region")
    raw["dead_letter_topic"] = topic("clicks-per-region-dlq")
    for sink in (raw["output"], raw["aggregate"]["output"]):
        sink["files"]["path"] = str(tmp_path / Path(sink["files"]["path"]).name)
    raw["trigger"] = {"processing_time": 0, "max_offsets_per_trigger": PER_BATCH}
    raw.pop("quality", None)
    path = tmp_path / f"{raw['name']}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _backlog(base: int) -> list[tuple[str, str, Any, int]]:
    """(input, key, value, ts): every user's region first, then the clicks, a few from users without one."""
    records: list[tuple[str, str, Any, int]] = [("regions", f"u{i}", REGIONS[i % 4], base + i) for i in range(USERS)]
    for i in range(CLICKS):
        records.append(("clicks", f"u{(i * 37) % (USERS + 20)}", 1 + i % 7, base + 10_000 + i))
    return records


def _produce(spec_path: Path, bootstrap: str, records: list[tuple[str, str, Any, int]]) -> None:
    from streamjoin.core.codec import encode
    from streamjoin.core.spec import load_spec
    from streamjoin.core.topic_plan import plan_topics
    from streamjoin.kafka.admin import ensure_topics
    from streamjoin.kafka.clients import produce_records

    spec = load_spec(spec_path)
    ensure_topics({"bootstrap.servers": bootstrap}, plan_topics(spec), timeout=60)
    rows: list[tuple[str, bytes | None, bytes | None, int, list[Any]]] = [
        (spec.inputs[name].topic, key.encode(), encode(value, spec.inputs[name].value.format), ts, [])
        for name, key, value, ts in records
    ]
    assert produce_records(bootstrap, rows) == len(rows)


def _reference(spec_path: Path, records: list[tuple[str, str, Any, int]]) -> Counter[tuple[str, str]]:
    """The reference engine's join results, as (key, value JSON) with their counts (the seed's projections in
    Python: the reference engine does not evaluate Spark SQL)."""
    from streamjoin.core.records import Record
    from streamjoin.core.reference import ReferenceEngine
    from streamjoin.core.spec import load_spec

    spec = load_spec(spec_path)
    functions: dict[str, Callable[..., Any]] = {
        "joiner": lambda key, left, right: {"region": "UNKNOWN" if right is None else right, "clicks": left},
        "group_by": lambda key, value: value["region"],
        "value": lambda key, value: value["clicks"],
    }
    in_time = sorted(records, key=lambda r: r[3])
    emitted = ReferenceEngine(spec, functions).replay(
        [Record(spec.inputs[name].topic, key, value, ts) for name, key, value, ts in in_time]
    )
    return Counter((e.key, json.dumps(e.value, sort_keys=True)) for e in emitted if e.topic == spec.output.topic)


def _written(spec_path: Path, bootstrap: str) -> Counter[tuple[str, str]]:
    from streamjoin.core.spec import load_spec
    from streamjoin.kafka.clients import consume_all

    topic = load_spec(spec_path).output.topic
    assert topic is not None
    return Counter(
        (r.key.decode(), json.dumps(json.loads(r.value), sort_keys=True))
        for r in consume_all(bootstrap, topic, timeout=30) if r.key is not None and r.value is not None
    )  # fmt: skip


def _worker_of(cluster: SparkStandaloneCluster, executor: str) -> str:
    """The worker that runs ``executor`` of the cluster's application (its ``<work>/<app>/<executor>`` folder)."""
    found = [w for w in cluster.workers if any(cluster.work_dir(w).glob(f"app-*/{executor}"))]
    assert len(found) == 1, f"executor {executor} in {found} of {cluster.workers}"
    return found[0]


class _Batches(logging.Handler):
    """Collects the job's batch lines as the launcher relays them; kills the worker of the executor that ran
    ``default/0`` once batch ``KILL_AFTER``'s line arrives."""

    def __init__(self, cluster: SparkStandaloneCluster) -> None:
        super().__init__(logging.INFO)
        self.cluster = cluster
        self.lines: dict[int, dict[str, Any]] = {}
        self.killed: tuple[str, str] | None = None  # (worker, executor)

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if not message.startswith(BATCH_LINE):
            return
        line = json.loads(message.removeprefix(BATCH_LINE))
        self.lines[line["batch_id"]] = line
        if line["batch_id"] == KILL_AFTER and self.killed is None:
            executor = line["tasks"]["default/0"]
            worker = _worker_of(self.cluster, executor)
            self.cluster.kill_worker(worker)
            self.killed = (worker, executor)


def test_tasks_stay_with_their_stores_and_a_dead_workers_partitions_move_exactly(
    two_workers: SparkStandaloneCluster,
    kafka_bootstrap: str,
    topic_factory: Callable[[str], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from streamjoin.airflow.operators.stream_join import StreamJoinJobOperator
    from streamjoin.core.spec import load_spec

    spec_path = _spec(tmp_path, topic_factory)
    records = _backlog(base=int(time.time() * 1000) - 3_600_000)  # recent: the topics' retention keeps them
    _produce(spec_path, kafka_bootstrap, records)
    # the application waits for both executors before its first batch (standalone counts spark.cores.max)
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        "spark.cores.max 2\nspark.scheduler.minRegisteredResourcesRatio 1.0\n"
        "spark.scheduler.maxRegisteredResourcesWaitingTime 60s\n"
    )
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    host, port = kafka_bootstrap.split(":")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": two_workers.master_url}))
    monkeypatch.setenv("AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT",
                       json.dumps({"conn_type": "streamjoin_kafka", "host": host, "port": int(port)}))  # fmt: skip
    monkeypatch.setenv("PYSPARK_PYTHON", str(PROJECT_HOME / ".venv" / "bin" / "python"))
    operator = StreamJoinJobOperator(task_id="run_join", spec_path=str(spec_path), available_now=True)
    batches = _Batches(two_workers)
    job_log = logging.getLogger(f"test.two_workers.{uuid.uuid4().hex[:6]}")
    job_log.setLevel(logging.INFO)
    job_log.addHandler(batches)
    # the launcher relays the job's lines to the operator's log (Airflow's task logger, cached per operator)
    monkeypatch.setattr(operator, "_cached_logger", job_log)
    try:
        operator.execute(context={})
    finally:
        shutil.rmtree(checkpoint_dir(load_spec(spec_path)), ignore_errors=True)

    lines = [batches.lines[b] for b in sorted(batches.lines)]
    report = "\n".join(f"{b['batch_id']}: {b['tasks']} loads {b['store_loads']}" for b in lines)
    assert batches.killed is not None and len(lines) >= KILL_AFTER + 4, report  # some batches after the move
    worker, dead = batches.killed
    # both executors live: every stateful task of a batch on its store's executor of the batch before
    first = lines[0]["tasks"]
    assert sorted(Counter(first.values()).values()) == [4, 4], report  # the first batch spreads the 8 stores evenly
    for line in lines[1 : KILL_AFTER + 1]:
        assert line["tasks"] == first and line["store_loads"] == [], report
    # one dead: its partitions ran on the other executor, loaded there (in the batch that was running, or the
    # next), and stayed: no load after, nothing on the dead one
    moved = sorted(name for name, executor in first.items() if executor == dead)
    after = lines[KILL_AFTER + 1 :]
    loaded = {name for line in after[:2] for name in line["store_loads"]}
    assert set(moved) <= loaded, report
    for line in after[2:]:
        assert set(line["tasks"].values()) == set(first.values()) - {dead} and line["store_loads"] == [], report
    # exact: the enriched topic holds the reference's results, each once (the dead executor's open transactions
    # are fenced by their retries)
    written, expected = _written(spec_path, kafka_bootstrap), _reference(spec_path, records)
    assert written == expected, report
    print(f"killed {worker} (executor {dead}); per batch:\n{report}")
