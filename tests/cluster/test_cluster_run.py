"""Cluster mode for real: a Spark standalone master + worker on loopback, jobs submitted through the same
operator as in local mode (only the ``spark_default`` connection changes), outputs equal local mode's.

The local-mode and cluster-mode runs each get fresh topics, the seed-style sample of
:mod:`streamjoin.demo.sample`, their own checkpoint and file outputs; their topic contents (as sets) and
file rows must match, and the aggregate's final table must be the sample's expected totals.
"""

from __future__ import annotations

import datetime as dt
import json
import re
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
TIMINGS_FILE = PROJECT_HOME / "var" / "cluster-timings.jsonl"


@pytest.fixture(scope="module")
def spark_cluster() -> Iterator[SparkStandaloneCluster]:
    home = PROJECT_HOME / ".local" / f"spark-cluster-test-{uuid.uuid4().hex[:8]}"
    cluster = SparkStandaloneCluster(home, free_port(), free_port(), cores=1, memory="2g")
    cluster.start(timeout=90)
    yield cluster
    cluster.stop()
    shutil.rmtree(home, ignore_errors=True)


def _spec_copy(tmp_path: Path, mode: str, topic: Callable[[str], str], checked: bool = False) -> Path:
    """The seed spec with this run's own name (so its own checkpoint), topics and output folders; ``checked``:
    with the seed's quality suite (a copy naming the pipeline), else none."""
    raw = yaml.safe_load(SEED_SPEC.read_text())
    raw["name"] = f"clicks_per_region_{mode}_{uuid.uuid4().hex[:6]}"
    for side in raw["inputs"].values():
        side["topic"] = topic(f"{side['topic']}-{mode}")
    raw["output"]["topic"] = topic(f"enriched-clicks-{mode}")
    raw["output"]["files"]["path"] = str(tmp_path / mode / "enriched_clicks")
    raw["aggregate"]["output"]["topic"] = topic(f"clicks-per-region-{mode}")
    raw["aggregate"]["output"]["files"]["path"] = str(tmp_path / mode / "clicks_per_region")
    raw["dead_letter_topic"] = topic(f"clicks-per-region-dlq-{mode}")
    raw.pop("quality", None)
    if checked:
        suite = yaml.safe_load((SEED_SPEC.parents[1] / "expectations" / "clicks_per_region.yaml").read_text())
        suite["pipeline"] = raw["name"]
        suite_path = tmp_path / f"{raw['name']}.expectations.yaml"
        suite_path.write_text(yaml.safe_dump(suite))
        raw["quality"] = {"suite": str(suite_path)}
    path = tmp_path / f"{raw['name']}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _sample_day() -> tuple[str, int]:
    """Yesterday (UTC) and noon of it in epoch ms: the sample's fixed base time in both modes."""
    import datetime as dt

    day = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)
    noon = dt.datetime(day.year, day.month, day.day, 12, tzinfo=dt.UTC)
    return day.isoformat(), int(noon.timestamp() * 1000)


def _provision_and_produce(spec_path: Path, bootstrap: str, base: int) -> None:
    from streamjoin.core.codec import encode
    from streamjoin.core.spec import load_spec
    from streamjoin.core.topic_plan import plan_topics
    from streamjoin.demo.sample import sample_records
    from streamjoin.kafka.admin import ensure_topics
    from streamjoin.kafka.clients import produce_records

    spec = load_spec(spec_path)
    ensure_topics({"bootstrap.servers": bootstrap}, plan_topics(spec), timeout=60)
    rows = []
    for record in sample_records(spec.left.topic, spec.right.topic):
        _, spec_input = spec.input_by_topic(record.topic)
        key = None if record.key is None else record.key.encode()
        rows.append((record.topic, key, encode(record.value, spec_input.value.format), base + record.offset_ms, []))
    assert produce_records(bootstrap, rows) == len(rows)


def _run(operator: Any, spark_conn: dict[str, Any], bootstrap: str, monkeypatch: pytest.MonkeyPatch) -> float:
    """Run ``operator`` with ``spark_default`` set to ``spark_conn``; seconds it took."""
    host, port = bootstrap.split(":")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(spark_conn))
    kafka_conn = {"conn_type": "streamjoin_kafka", "host": host, "port": int(port)}
    monkeypatch.setenv("AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT", json.dumps(kafka_conn))
    monkeypatch.setenv("PYSPARK_PYTHON", str(PROJECT_HOME / ".venv" / "bin" / "python"))
    started = time.monotonic()
    operator.execute(context={})
    return time.monotonic() - started


#: topic names carry the mode and a per-test suffix (``user-clicks-cluster-3f9a1c2b``); outputs that name
#: their source topic are compared with the base name
_MODE_SUFFIX = re.compile(r"-(local|cluster)-[0-9a-f]{8}")
#: a null-key record lands on a random partition (librdkafka's murmur2_random), so where the dead letter
#: says it came from differs between two produce runs, whatever the Spark master
_RANDOM_PLACEMENT = ("source_partition", "source_offset")


def _same_names(text: str) -> str:
    return _MODE_SUFFIX.sub("", text)


def _file_rows(path: Path) -> list[str]:
    """Every row of the parquet files under ``path`` as sorted JSON, without the partition columns."""
    import pyarrow.dataset as ds

    table = ds.dataset(str(path), format="parquet", partitioning="hive").to_table()
    columns = [c for c in table.column_names if c not in ("batch_id", "date")]
    rows = table.select(columns).to_pylist()
    return sorted(_same_names(json.dumps(row, sort_keys=True, default=str)) for row in rows)


def _outputs(spec_path: Path, bootstrap: str) -> dict[str, Any]:
    """Everything the job wrote: topic contents as bags (a duplicate counts), file rows as sorted lists, the final
    table."""
    from streamjoin.core.codec import decode
    from streamjoin.core.spec import Format, load_spec
    from streamjoin.kafka.clients import consume_all

    spec = load_spec(spec_path)
    assert spec.aggregate is not None and spec.aggregate.output is not None
    topics = {"enriched": spec.output.topic, "aggregate": spec.aggregate.output.topic, "dlq": spec.dead_letter_topic}
    found: dict[str, Any] = {}
    final: dict[str, int] = {}
    for label, topic in topics.items():
        assert topic is not None
        records = consume_all(bootstrap, topic, timeout=30)
        found[label] = Counter(
            (r.key, r.value, tuple(sorted((k, _same_names(v.decode())) for k, v in dict(r.headers).items()
                                          if r.key is not None or k not in _RANDOM_PLACEMENT)))
            for r in records
        )  # fmt: skip
        if label == "aggregate":
            for r in records:
                assert r.key is not None
                final[r.key.decode()] = decode(r.value, Format.LONG)
    found["final"] = final
    for label, sink in (("enriched_files", spec.output.files), ("aggregate_files", spec.aggregate.output.files)):
        assert sink is not None
        found[label] = _file_rows(Path(sink.path))
    return found


def _modes(cluster: SparkStandaloneCluster) -> dict[str, dict[str, Any]]:
    return {
        "local": {"conn_type": "spark", "host": "local[2]"},
        "cluster": {"conn_type": "spark", "host": cluster.master_url},
    }


def _record_timings(what: str, seconds: dict[str, float]) -> None:
    TIMINGS_FILE.parent.mkdir(parents=True, exist_ok=True)
    with TIMINGS_FILE.open("a") as out:
        entry = {"at": time.strftime("%Y-%m-%dT%H:%M:%S"), "run": what, "input": "demo.sample", **seconds}
        out.write(json.dumps(entry) + "\n")
    print(f"{what}, same input: local[2] {seconds['local']:.1f} s, standalone cluster {seconds['cluster']:.1f} s")


def _apps(cluster: SparkStandaloneCluster) -> list[str]:
    state = cluster.state() or {}
    return [a["name"] for a in state.get("completedapps", []) + state.get("activeapps", [])]


def test_stream_join_on_a_standalone_cluster_equals_local_mode(
    spark_cluster: SparkStandaloneCluster,
    kafka_bootstrap: str,
    topic_factory: Callable[[str], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from streamjoin.airflow.operators.stream_join import StreamJoinJobOperator
    from streamjoin.core.spec import load_spec
    from streamjoin.demo.sample import EXPECTED_TOTALS

    _, base = _sample_day()
    results: dict[str, dict[str, Any]] = {}
    seconds: dict[str, float] = {}
    for mode, conn in _modes(spark_cluster).items():
        spec_path = _spec_copy(tmp_path, mode, topic_factory)
        _provision_and_produce(spec_path, kafka_bootstrap, base)
        operator = StreamJoinJobOperator(task_id="run_join", spec_path=str(spec_path), available_now=True)
        try:
            seconds[mode] = _run(operator, conn, kafka_bootstrap, monkeypatch)
            results[mode] = _outputs(spec_path, kafka_bootstrap)
        finally:
            shutil.rmtree(checkpoint_dir(load_spec(spec_path)), ignore_errors=True)
    # the cluster really ran it: the master lists our application
    assert any(name.startswith("streamjoin-clicks_per_region_cluster") for name in _apps(spark_cluster))

    local, cluster = results["local"], results["cluster"]
    assert local["final"] == EXPECTED_TOTALS, local["final"]
    assert local["enriched_files"] and local["aggregate_files"]
    for label in ("enriched", "aggregate", "dlq", "enriched_files", "aggregate_files", "final"):
        assert cluster[label] == local[label], f"{label}: cluster {cluster[label]} != local {local[label]}"
    _record_timings("stream join (available-now)", seconds)


def test_reprocessing_a_day_on_a_standalone_cluster_equals_local_mode(
    spark_cluster: SparkStandaloneCluster,
    kafka_bootstrap: str,
    topic_factory: Callable[[str], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from streamjoin.airflow.operators.reprocess import ReprocessDayOperator
    from streamjoin.core.backfill import partition_location
    from streamjoin.core.spec import load_spec
    from streamjoin.quality.results import read_check_result

    day, base = _sample_day()
    published: dict[str, dict[str, list[str]]] = {}
    verdicts: dict[str, dict[str, Any]] = {}
    seconds: dict[str, float] = {}
    for mode, conn in _modes(spark_cluster).items():
        spec_path = _spec_copy(tmp_path, mode, topic_factory, checked=True)
        _provision_and_produce(spec_path, kafka_bootstrap, base)
        operator = ReprocessDayOperator(task_id="reprocess", spec_path=str(spec_path), day=day,
                                        data_docs_dir=str(tmp_path / "docs"))  # fmt: skip
        seconds[mode] = _run(operator, conn, kafka_bootstrap, monkeypatch)
        spec = load_spec(spec_path)
        assert spec.output.files is not None and spec.aggregate is not None and spec.aggregate.output.files
        # checked by the same application (GX in the cluster's driver and executors), then swapped in
        where = partition_location
        result = read_check_result(where(str(spec.output.files.path), dt.date.fromisoformat(day)))
        assert result is not None and result.success and result.row_count == 9, result and result.summary()
        verdicts[mode] = {e.name: (e.success, e.observed) for e in result.expectations}
        published[mode] = {
            "enriched": _file_rows(Path(where(str(spec.output.files.path), dt.date.fromisoformat(day)))),
            "aggregate": _file_rows(Path(where(str(spec.aggregate.output.files.path), dt.date.fromisoformat(day)))),
        }
    assert any(name.startswith("streamjoin-reprocess-clicks_per_region_cluster") for name in _apps(spark_cluster))
    # the null-value click is dead-lettered
    assert len(published["local"]["enriched"]) == 9, published["local"]["enriched"]
    assert published["local"]["aggregate"]
    assert published["cluster"] == published["local"]
    assert verdicts["cluster"] == verdicts["local"] and verdicts["local"]["left_records_complete"] == (True, 9)
    _record_timings(f"reprocess day {day}", seconds)
