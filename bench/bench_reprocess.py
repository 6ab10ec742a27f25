"""Time to reprocess one day of the seed pipeline (clicks x regions, per-region sum, Parquet day partitions)
from Kafka.

``--mode dag`` (the default): **trigger to published**, as a user gets it. The shipped ``streamjoin_reprocess``
DAG of a checkout (``--home``, default this one) runs once with ``dag.test()`` in a fresh Python process, on a
pipeline with a quality suite: validate, reprocess (spark-submit), check (GX 1.x) and publish, whichever way
that checkout does them (before issue 35: the check in the Airflow task, with a Spark session and GX context of
its own; after: inside the reprocessing application). Measured: the run (``dag.test()`` from its creation to
its end), each task's time, the process's wall (Python and Airflow start, DAG parse) and the application's own
compute and check times when the checkout records them. The day must come out published and not quarantined,
its check passed and its content right, else FAILED and exit 1::

    .venv/bin/python bench/bench_reprocess.py --clicks 20 --users 5             # a small day
    .venv/bin/python bench/bench_reprocess.py --clicks 1000000 --users 100000   # a day of 1 M records
    .venv/bin/python bench/bench_reprocess.py --home /tmp/sj-old --clicks 20 --users 5  # another checkout

``--mode spark``: the Spark part only, in this process (``reprocess_day`` without the check), next to a baseline
measured in the same run: the same day's records read by the same offset ranges and written as Parquet with
no join (what this bench measured before it measured the whole flow)::

    .venv/bin/python bench/bench_reprocess.py --mode spark --clicks 1000000 --users 100000

The day's enriched output is checked against the answer the generator computed (one enriched click per
click, per-region sums of their clicks, ``UNKNOWN`` for users without a region): a wrong day prints FAILED
with expected and got, reports no rate and exits 1.

Appends a JSON line to bench/reprocess_results.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_join import make_topics
from produce_clicks import REGIONS, UNKNOWN, Produced, produce
from streamjoin.core.backfill import day_start_ms, plan_day
from streamjoin.core.spec import load_spec, parse_spec

HOME = Path(__file__).resolve().parents[1]


def on_bench_topics(data: dict[str, Any], suffix: str, out: Path) -> None:
    """The seed spec's data moved to the bench's topics (``suffix``) and its files under ``out``."""
    for spec_input in data["inputs"].values():
        spec_input["topic"] += suffix
    for sink in (data["output"], data["aggregate"]["output"]):
        sink["topic"] += suffix
        sink["files"]["path"] = str(out / sink["topic"])
    data["dead_letter_topic"] += suffix


def day_spec(suffix: str, out: Path) -> object:
    data = load_spec(HOME / "include/pipelines/clicks_per_region.yaml").model_dump(mode="json", by_alias=True)
    on_bench_topics(data, suffix, out)
    data["quality"] = None
    return parse_spec(data, "bench")


def check_day(spark: object, path: str | None, expected: Produced) -> list[str]:
    """What is wrong with the published enriched day at ``path`` (empty: all correct)."""
    from pyspark.sql import functions as F

    if path is None:
        return ["no enriched day was published"]
    rows = (
        spark.read.parquet(path)  # type: ignore[attr-defined]
        .groupBy(F.col("value.region").alias("region"))
        .agg(F.count("*").alias("n"), F.sum("value.clicks").alias("clicks"))
        .collect()
    )
    count, sums = sum(r["n"] for r in rows), {r["region"]: r["clicks"] for r in rows}
    problems = []
    if count != expected.clicks:
        problems.append(f"enriched clicks: expected {expected.clicks}, got {count}")
    if sums != expected.totals:
        problems.append(f"per-region sums: expected {expected.totals}, got {sums}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser()
    modes = "dag: trigger to published through the shipped DAG; spark: the Spark part only"
    parser.add_argument("--mode", choices=["dag", "spark"], default="dag", help=modes)
    parser.add_argument("--bootstrap", default="127.0.0.1:19092")
    parser.add_argument("--clicks", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--home", type=Path, default=HOME, help="(dag) the checkout whose DAG and code run")
    parser.add_argument("--spark-master", default="local[2]", help="(dag) the Spark connection's master")
    parser.add_argument("--driver-memory", default="6g",
                        help="(dag) spark.driver.memory of every Spark JVM of the run (spark-defaults.conf); '': "
                             "Spark's default")  # fmt: skip
    args = parser.parse_args()
    suffix = "-reproc-" + uuid.uuid4().hex[:6]
    day = datetime.now(UTC).date() - timedelta(days=1)
    with tempfile.TemporaryDirectory() as tmp:
        if args.mode == "dag":
            line = through_the_dag(args, suffix, day, Path(tmp))
        else:
            line = spark_only(args, suffix, day, Path(tmp))
    if line is None:
        return 1
    print(json.dumps(line))
    with open(Path(__file__).with_name("reprocess_results.jsonl"), "a") as out:
        out.write(json.dumps(line) + "\n")
    return 0


def spark_only(args: argparse.Namespace, suffix: str, day: date, tmp: Path) -> dict[str, Any] | None:
    """The Spark part in this process, next to a read-and-write baseline."""
    spec = day_spec(suffix, tmp)
    topics = {spec.left.topic: False, spec.right.topic: True}  # type: ignore[attr-defined]
    make_topics(args.bootstrap, topics, args.partitions)
    expected = produce(args.bootstrap, spec.left.topic, spec.right.topic, args.users, args.clicks,  # type: ignore[attr-defined]
                       base=day_start_ms(day) + 3_600_000)  # fmt: skip
    from streamjoin.spark.reprocess import read_ranges, reprocess_day, topic_ranges
    from streamjoin.spark.session import build_session

    spark = build_session("streamjoin-bench-reprocess", master="local[2]", shuffle_partitions=args.partitions,
                          extra_conf={"spark.ui.enabled": "false", "spark.driver.memory": "6g"})  # fmt: skip
    plan = plan_day(spec, day)  # type: ignore[arg-type]
    started = time.monotonic()
    raw = read_ranges(spark, args.bootstrap, topic_ranges(plan, args.bootstrap))
    raw.write.mode("overwrite").parquet(f"{tmp}/baseline")
    baseline = time.monotonic() - started
    result = reprocess_day(spark, spec, plan, args.bootstrap, home=tmp)  # type: ignore[arg-type]
    problems = check_day(spark, result.paths.get("enriched"), expected)
    if problems:
        print(f"FAILED reprocess of {day}: " + "; ".join(problems))
        return None
    print(f"content checked: {expected.clicks} enriched clicks, per-region sums {expected.totals}")
    records = args.clicks + args.users
    line = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "mode": "spark", "day": str(day),
            "input_rows": result.input_rows, "results": result.results, "aggregates": result.aggregates,
            "seconds": round(result.seconds, 1), "rows_per_s": round(result.input_rows / result.seconds),
            "baseline_seconds": round(baseline, 1), "baseline_rows_per_s": round(records / baseline),
            "content_checked": True}  # fmt: skip
    print(f"ratio reprocess/baseline: {line['rows_per_s'] / line['baseline_rows_per_s']:.3f}")
    return line


#: ``dag.test()`` of the checkout's reprocess DAG: what the run did, its tasks' times, the day's files
RUN_DAG = """
import json, sys, time
t0 = time.monotonic()
from airflow.dag_processing.dagbag import DagBag
dag = DagBag(sys.argv[1]).get_dag("streamjoin_reprocess")
parsed = time.monotonic()
run = dag.test(run_conf=json.loads(sys.argv[2]))
ended = time.monotonic()
tasks = {f"{ti.task_id}[{ti.map_index}]": {"state": str(ti.state), "seconds": round(
         (ti.end_date - ti.start_date).total_seconds(), 2) if ti.start_date and ti.end_date else None}
         for ti in run.get_task_instances()}
print("RESULT " + json.dumps({"state": str(run.state), "tasks": tasks, "run_seconds": round(ended - parsed, 2),
                              "start_seconds": round(parsed - t0, 2)}), flush=True)
"""


def pipeline_files(suffix: str, out: Path, partitions: int = 4) -> tuple[str, Path, dict[str, Any]]:
    """(name, pipelines folder, spec data) of the seed pipeline on the bench's topics and files, with the seed's
    suite but the generator's regions (it makes ``oceania`` too)."""
    name = "bench_" + suffix.rsplit("-", 1)[-1]
    data = yaml.safe_load((HOME / "include/pipelines/clicks_per_region.yaml").read_text())
    data["name"] = name
    data["kafka"]["partitions"] = partitions
    on_bench_topics(data, suffix, out)
    suite = yaml.safe_load((HOME / "include/expectations/clicks_per_region.yaml").read_text())
    suite["pipeline"] = name
    regions = [*REGIONS, UNKNOWN]
    suite["enriched"]["values"]["value.region"]["in_set"] = regions
    suite["aggregate"]["values"]["key"]["in_set"] = regions
    pipelines = out / "pipelines"
    pipelines.mkdir(parents=True)
    (out / "suite.yaml").write_text(yaml.safe_dump(suite))
    data["quality"] = {"suite": str(out / "suite.yaml")}
    (pipelines / f"{name}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return name, pipelines, data


def through_the_dag(args: argparse.Namespace, suffix: str, day: date, tmp: Path) -> dict[str, Any] | None:
    """Trigger to published: the checkout's reprocess DAG on a produced day, in a fresh process."""
    home = args.home.resolve()
    name, pipelines, data = pipeline_files(suffix, tmp, args.partitions)
    clicks_topic, regions_topic = data["inputs"]["clicks"]["topic"], data["inputs"]["regions"]["topic"]
    make_topics(args.bootstrap, {clicks_topic: False, regions_topic: True}, args.partitions)
    # clicks over the day's 23rd hour: the newest within the suite's freshness of the day's end
    expected = produce(args.bootstrap, clicks_topic, regions_topic, args.users, args.clicks,
                       base=day_start_ms(day) + 22 * 3_600_000)  # fmt: skip
    airflow_home = home / "var" / "bench-airflow"
    host, port = args.bootstrap.split(":")
    env = {
        **os.environ, "STREAMJOIN_HOME": str(home), "PYTHONPATH": str(home / "plugins"),
        "STREAMJOIN_PIPELINES_DIR": str(pipelines), "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{airflow_home}/airflow.db",
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"), "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT": json.dumps({"conn_type": "streamjoin_kafka", "host": host,
                                                             "port": int(port)}),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": args.spark_master}),
    }  # fmt: skip
    if args.driver_memory:  # spark-submit's and pyspark's JVMs alike (the --mode spark bench used 6g)
        conf_dir = tmp / "spark-conf"
        conf_dir.mkdir()
        (conf_dir / "spark-defaults.conf").write_text(f"spark.driver.memory {args.driver_memory}\n")
        env["SPARK_CONF_DIR"] = str(conf_dir)
    if not (airflow_home / "airflow.db").exists():  # once, outside the measurement
        airflow_home.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=env, cwd=home, check=True,
                       capture_output=True)  # fmt: skip
    conf = {"pipeline": name, "start": day.isoformat(), "end": day.isoformat()}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", RUN_DAG, str(home / "dags" / "streamjoin_reprocess.py"),
                           json.dumps(conf)], env=env, cwd=home, capture_output=True, text=True)  # fmt: skip
    wall = time.monotonic() - started
    found = [line[7:] for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    log = tmp.parent / f"bench_reprocess_{name}.log"
    log.write_text(done.stdout + done.stderr)
    if not found:
        print(f"FAILED: the DAG run did not end (exit {done.returncode}); its log: {log}")
        return None
    run = json.loads(found[-1])
    enriched = Path(data["output"]["files"]["path"]) / "daily" / f"date={day.isoformat()}"
    problems = [] if run["state"] == "success" else [f"run {run['state']}: {run['tasks']} (log: {log})"]
    problems += published_problems(enriched, expected)
    if problems:
        print(f"FAILED reprocess of {day} through {home}'s DAG: " + "; ".join(problems))
        return None
    print(f"published and checked: {expected.clicks} enriched clicks, per-region sums {expected.totals}")
    tasks = {task.split("[")[0].removeprefix("day."): t["seconds"] for task, t in run["tasks"].items()}
    outcome = read_json(enriched.parent / "_staging" / f"date={day.isoformat()}.outcome.json")
    line = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"), "mode": "dag", "home": str(home), "commit": commit(home),
        "day": str(day), "records": args.clicks + args.users, "clicks": args.clicks,
        "trigger_to_published_s": run["run_seconds"], "process_wall_s": round(wall, 1),
        "process_start_s": run["start_seconds"], "tasks_s": tasks,
        "app_compute_s": outcome.get("seconds") if outcome else None,
        "app_check_s": outcome.get("check_seconds") if outcome else None, "content_checked": True,
    }  # fmt: skip
    print(f"trigger to published: {line['trigger_to_published_s']}s (tasks {tasks}); process {line['process_wall_s']}s")
    return line


def published_problems(day_dir: Path, expected: Produced) -> list[str]:
    """What is wrong with the published enriched day (empty: published, check passed, content right)."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    if not day_dir.is_dir():
        return [f"nothing published at {day_dir}"]
    marker = day_dir / "_QUARANTINED"
    problems = [f"quarantined: {marker.read_text()[:500]}"] if marker.exists() else []
    check = read_json(day_dir / "_CHECK_RESULT.json")
    if check is None or not check.get("success"):
        problems.append(f"its check did not pass: {check and check.get('blocking_failed')}")
    value = ds.dataset(str(day_dir), format="parquet").to_table(columns=["value"]).column("value").combine_chunks()
    regions, clicks = pc.struct_field(value, "region"), pc.struct_field(value, "clicks")
    if len(value) != expected.clicks:
        problems.append(f"enriched clicks: expected {expected.clicks}, got {len(value)}")
    import pyarrow as pa

    sums = pa.table({"region": regions, "clicks": clicks}).group_by("region").aggregate([("clicks", "sum")])
    got = dict(zip(sums.column("region").to_pylist(), sums.column("clicks_sum").to_pylist(), strict=True))
    if got != expected.totals:
        problems.append(f"per-region sums: expected {expected.totals}, got {got}")
    return problems


def read_json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None


def commit(home: Path) -> str | None:
    done = subprocess.run(["git", "-C", str(home), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or None


if __name__ == "__main__":
    raise SystemExit(main())
