"""The seed join as the operator starts it: a fresh ``spark-submit`` of ``jobs/stream_join.py --available-now``
per run, its command line the launcher's (``plan_submit`` and the local cluster manager: the spec's ``spark:``
settings, the driver's class archive when it is built), beside a fresh Kafka Streams JVM on the same input,
runs alternating. Both outputs are checked (one enriched click per click, the per-region sums, no dead letters);
a run with a wrong answer reports no figure.

    .venv/bin/python bench/bench_fresh.py --bootstrap 127.0.0.1:19192 --clicks 5000000 --runs 2 \\
        --modes archive,no-archive --driver-memory 2g

``--modes``: ``archive`` runs the launcher's command as it is, ``no-archive`` the same without the class archive.
Wall is process start to process end (ours), JVM start to the expected output read back (Kafka Streams);
``to_batch0`` is process start to the first batch line. A JSON line goes to ``--results``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import yaml

from bench_join import (
    BATCH_LINE,
    KS_BUILD,
    KS_JAR,
    Checker,
    bench_spec,
    input_topics,
    kafka_streams_child,
    make_topics,
    output_topics,
    ratio_text,
)
from produce_clicks import produce
from streamjoin.core.launch import SparkTarget, cluster_manager
from streamjoin.core.plans import connector_jars, plan_submit


def run_ours(args: argparse.Namespace, suffix: str, out_suffix: str, mode: str, workdir: Path) -> dict[str, Any]:
    """One fresh spark-submit of the join over the whole backlog; its wall and batch lines."""
    spec = bench_spec(suffix, out_suffix, "join", args.max_per_trigger)
    data = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    if args.driver_memory:
        data["spark"] = {"driver_memory": args.driver_memory}
    spec_path = workdir / f"{spec.name}.yaml"
    spec_path.write_text(yaml.safe_dump(data))
    plan = plan_submit(spec, spec_path, ["--bootstrap", args.bootstrap], connector_jars(), available_now=True,
                       home=workdir)  # fmt: skip
    plan = replace(plan, application=str(Path(__file__).resolve().parents[1] / "jobs" / "stream_join.py"))
    if mode == "no-archive":
        plan = replace(plan, driver_java_options=None)
    manager = cluster_manager(SparkTarget(master=args.master))
    started = time.monotonic()
    process = subprocess.Popen(manager.command(plan), env={**os.environ, **manager.env(plan)},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    batches: list[dict[str, Any]] = []
    first_batch = None
    assert process.stdout is not None
    tail: list[str] = []
    for line in process.stdout:
        tail = [*tail[-40:], line]
        if line.startswith(BATCH_LINE):
            batches.append(json.loads(line[len(BATCH_LINE) :]))
            if first_batch is None:
                first_batch = time.monotonic() - started - batches[0]["seconds"]
    code = process.wait()
    wall = time.monotonic() - started
    if code != 0:
        raise RuntimeError(f"spark-submit exit {code}:\n{''.join(tail)}")
    return {"wall": wall, "to_batch0": first_batch, "batches": [b["seconds"] for b in batches]}


def run_theirs(args: argparse.Namespace, suffix: str, out_topic: str, expected: Any) -> dict[str, Any]:
    """One fresh Kafka Streams JVM over the same backlog: JVM start to the expected output read back."""
    started = time.monotonic()
    child = kafka_streams_child(args, suffix, "join", expected, 0)
    try:
        answer, _ = child.ask(f"run fresh {out_topic}")
    finally:
        child.close()
    if not answer.get("done"):
        raise RuntimeError(f"Kafka Streams did not see the expected output ({answer})")
    return {"wall": time.monotonic() - started, "seconds": float(answer["seconds"])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:19092")
    parser.add_argument("--clicks", type=int, default=5_000_000)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--max-per-trigger", type=int, default=1_500_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--modes", default="archive,no-archive")
    parser.add_argument("--driver-memory", default="", help="the spec's spark.driver_memory ('': Spark's default)")
    parser.add_argument("--no-kafka-streams", dest="kafka_streams", action="store_false")
    parser.add_argument("--ks-threads", type=int, default=2)
    parser.add_argument("--ks-commit-interval-ms", type=int, default=1000)
    parser.add_argument("--ks-max-task-idle-ms", type=int, default=None)
    parser.add_argument("--results", default=str(Path(__file__).with_name("fresh_results.jsonl")))
    args = parser.parse_args()
    if args.kafka_streams and not KS_JAR.is_file():
        subprocess.run(["bash", str(KS_BUILD)], check=True)
    suffix = f"-fresh-{uuid.uuid4().hex[:6]}"
    topics = input_topics(suffix)
    make_topics(args.bootstrap, {topics["clicks"]: False, topics["regions"]: True}, args.partitions)
    expected = produce(args.bootstrap, topics["clicks"], topics["regions"], args.users, args.clicks)
    print(f"produced {args.clicks:,} clicks, {args.users:,} users; totals {expected.totals}", flush=True)
    checker = Checker(args.bootstrap, args.partitions)
    modes = args.modes.split(",")
    figures: dict[str, list[float | None]] = {m: [] for m in [*modes, "kafka_streams"]}
    details: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-fresh-") as tmp:
        for run in range(1, args.runs + 1):
            engines = (["kafka_streams"] if args.kafka_streams else []) + modes
            for engine in engines:
                out_suffix = f"{suffix}-{engine}-r{run}"
                out = output_topics("join", out_suffix)
                make_topics(args.bootstrap, {t: False for t in out.values()}, args.partitions)
                try:
                    if engine == "kafka_streams":
                        result = run_theirs(args, suffix, out["enriched"], expected)
                        problems = checker.check("join", {"enriched": out["enriched"]}, expected, 0)
                    else:
                        result = run_ours(args, suffix, out_suffix, engine, Path(tmp))
                        problems = checker.check("join", out, expected, 0)
                except RuntimeError as error:
                    result, problems = {}, [str(error)[-2000:]]
                if problems:
                    print(f"FAILED {engine} run {run}: {'; '.join(problems)}", flush=True)
                    figures[engine].append(None)
                    continue
                figures[engine].append(result["wall"])
                details.append({"engine": engine, "run": run, **result})
                print(f"{engine:>14} run {run}: wall {result['wall']:6.1f}s (content checked) {result}", flush=True)
    ks = [w for w in figures.get("kafka_streams", []) if w is not None]
    print("\n=== fresh start, wall seconds (ratio = Kafka Streams' wall / ours, same run) ===")
    for mode in modes:
        walls = figures[mode]
        ratios = [ratio_text(figures["kafka_streams"][i], w) if args.kafka_streams else "-" for i, w in
                  enumerate(walls)]  # fmt: skip
        print(f"{mode:>14}: walls {walls} ratios {ratios}")
    if ks:
        print(f"{'kafka_streams':>14}: walls {figures['kafka_streams']} (median {statistics.median(ks):.1f}s)")
    record = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "clicks": args.clicks, "users": args.users,
              "max_per_trigger": args.max_per_trigger, "driver_memory": args.driver_memory or None,
              "walls": figures, "runs": details}  # fmt: skip
    with open(args.results, "a") as out_file:
        out_file.write(json.dumps(record) + "\n")
    return 1 if any(w is None for walls in figures.values() for w in walls) else 0


if __name__ == "__main__":
    sys.exit(main())
