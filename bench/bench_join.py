"""Kafka -> join -> Kafka throughput of the seed's clicks x regions pipeline and of a 10 s windowed
stream-stream join, next to a baseline measured in the same run: the same Spark job shape (Kafka source,
foreachBatch, Kafka sink) that only consumes the clicks and produces them again. Then end-to-end latency
of the stream-table join at a fixed input rate.

    .venv/bin/python bench/bench_join.py --bootstrap 127.0.0.1:19092 --clicks 5000000 --users 100000

Each variant runs in a JVM of its own (a child process of this script: one pipeline per JVM, as a deployed
job runs), ``--runs`` times in a row (default 2) on the same topics, with a fresh checkpoint each time. The
first run pays the JVM's warm-up (JIT compilation of Spark, the Kafka clients and the generated code, about
a minute of one core on 2 cores); the last run is the steady state of a long-running job. Both are
printed; ratios are within a run. (Variants sharing one JVM skew each other: after two baseline runs in
the same JVM the warm join did 143k records/s, alone in its JVM 153-171k.)

Variants: ``baseline``, ``join`` (clicks x regions), ``join+sum`` (per-region sum, one update per click),
``join+sum/batch`` (per-region sum, one update per region and batch), ``stream-stream`` (views x clicks,
10 s window, inner). Rates are input records per second over a backlog (available-now trigger, batches of
``--max-per-trigger``). Latency: Kafka timestamp of the output record (set when Spark's sink sends it)
minus the click's timestamp (set by the producer when it sends it), at ``--latency-rate`` clicks/s.

Prints each figure and the ratios to the baseline; appends a JSON line to bench/results.jsonl.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka.admin import AdminClient, NewTopic

from produce_clicks import REGIONS, _produce, _producer, produce, produce_views
from streamjoin.core.spec import load_spec, parse_spec

HOME = Path(__file__).resolve().parents[1]


def make_topics(bootstrap: str, names: dict[str, bool], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [
        NewTopic(name, partitions, 1, config={"cleanup.policy": "compact"} if compact else {})
        for name, compact in names.items()
    ]
    for future in admin.create_topics(new).values():
        future.result()


def bench_spec(suffix: str, variant: str, max_per_trigger: int) -> object:
    data = load_spec(HOME / "include/pipelines/clicks_per_region.yaml").model_dump(mode="json", by_alias=True)
    for spec_input in data["inputs"].values():
        spec_input["topic"] += suffix
    data["output"]["topic"] += suffix
    data["dead_letter_topic"] += suffix
    data["trigger"]["max_offsets_per_trigger"] = max_per_trigger
    data["output"]["files"] = None
    data["quality"] = None
    if variant.startswith("join+sum"):
        data["aggregate"]["output"]["topic"] += suffix
        data["aggregate"]["output"]["files"] = None
        data["aggregate"]["emit"] = "per_batch" if variant.endswith("/batch") else "every_change"
    else:
        data["aggregate"] = None
    return parse_spec(data, "bench")


def run_query(spark: object, spec: object, bootstrap: str, checkpoint: str) -> float:
    from streamjoin.spark.job import JobSettings, start_query

    started = time.monotonic()
    query = start_query(spark, spec, JobSettings(bootstrap=bootstrap, checkpoint_dir=checkpoint, available_now=True))  # type: ignore[arg-type]
    query.awaitTermination()
    return time.monotonic() - started


def run_baseline(
    spark: object, topic: str, out_topic: str, bootstrap: str, checkpoint: str, max_per_trigger: int
) -> float:
    """Consume + produce with no join, through the same Kafka source/sink, options and foreachBatch path."""
    from pyspark.sql import functions as F

    from streamjoin.spark.sinks import CONSUMER_OPTIONS, write_kafka

    def copy(batch, batch_id):  # type: ignore[no-untyped-def]
        write_kafka(batch.select("key", "value", F.lit(out_topic).alias("topic")), bootstrap)

    started = time.monotonic()
    query = (
        spark.readStream.format("kafka")  # type: ignore[attr-defined]
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_per_trigger))
        .options(**CONSUMER_OPTIONS)
        .load()
        .writeStream.option("checkpointLocation", checkpoint)
        .foreachBatch(copy)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return time.monotonic() - started


def stream_stream_spec(suffix: str, partitions: int, max_per_trigger: int) -> object:
    return parse_spec(
        {
            "name": "bench_views_clicks",
            "kafka": {"partitions": partitions},
            "inputs": {
                "views": {"topic": "user-views" + suffix, "role": "stream", "value": {"format": "string"}},
                "clicks": {"topic": "user-clicks" + suffix, "role": "stream", "value": {"format": "long"}},
            },
            "join": {
                "shape": "stream-stream",
                "kind": "inner",
                "left": "views",
                "right": "clicks",
                "window": {"before": "10s", "after": "10s"},
            },
            "output": {"topic": "views-with-clicks" + suffix},
            "dead_letter_topic": "clicks-per-region-dlq" + suffix,
            "trigger": {"max_offsets_per_trigger": max_per_trigger},
        },
        "bench",
    )


def measure_latency(spark: object, args: argparse.Namespace, checkpoint: str) -> dict[str, float]:
    """Fresh topics; regions first, then clicks at a fixed rate for a while with the job running."""
    from streamjoin.kafka.clients import consume_all, end_offsets
    from streamjoin.spark.job import JobSettings, start_query

    suffix = "-lat-" + uuid.uuid4().hex[:6]
    make_topics(args.bootstrap, {"user-clicks" + suffix: False, "user-regions" + suffix: True,
                                 "enriched-clicks" + suffix: False, "clicks-per-region-dlq" + suffix: False},
                args.partitions)  # fmt: skip
    producer = _producer(args.bootstrap)
    for i in range(args.users):
        _produce(producer, "user-regions" + suffix, f"user{i}".encode(), REGIONS[i % len(REGIONS)].encode(), 0)
    producer.flush(60)
    spec = bench_spec(suffix, "join", args.max_per_trigger)
    spec = spec.model_copy(update={"trigger": spec.trigger.model_copy(update={"processing_time": 200})})
    query = start_query(spark, spec, JobSettings(bootstrap=args.bootstrap, checkpoint_dir=checkpoint))  # type: ignore[arg-type]
    while (query.lastProgress or {}).get("numInputRows", 0) == 0:  # the regions are in the table
        time.sleep(0.5)
    sent = 0

    def paced() -> None:
        nonlocal sent
        started = time.monotonic()
        while (elapsed := time.monotonic() - started) < args.latency_seconds:
            due = int(elapsed * args.latency_rate)
            now = int(time.time() * 1000)
            for _ in range(due - sent):
                _produce(producer, "user-clicks" + suffix, f"user{sent % args.users}".encode(), b"\0" * 7 + b"\1", now)
                sent += 1
            producer.poll(0)
            time.sleep(0.005)
        producer.flush(60)

    thread = threading.Thread(target=paced)
    thread.start()
    thread.join()
    # read the output only once the job has written all of it: a Python consumer reading 1M records
    # beside the job takes a core from the last batches and inflates their latency
    deadline = time.monotonic() + 300
    while sum(end_offsets(args.bootstrap, "enriched-clicks" + suffix).values()) < sent:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the job did not write {sent} enriched clicks within 300 s")
        time.sleep(0.5)
    query.stop()
    records = consume_all(args.bootstrap, "enriched-clicks" + suffix, timeout=300, expected=sent)
    latencies = sorted(r.timestamp - int(dict(r.headers)["ts"]) for r in records)
    cut = len(latencies) // 10  # the first tenth is the warm-up
    steady = latencies[cut:] or latencies
    q = statistics.quantiles(steady, n=100)
    return {"rate": args.latency_rate, "records": len(records), "p50_ms": q[49], "p99_ms": q[98]}


#: marks the line on which a child process hands its result to the parent
RESULT = "BENCH_RESULT "


def measure_in_this_jvm(args: argparse.Namespace) -> dict[str, object]:
    """The child's work: ``args.child`` (a variant or ``latency``) ``args.runs`` times on the parent's topics,
    in a Spark session of its own."""
    from streamjoin.spark.session import build_session

    spark = build_session("streamjoin-bench", master="local[2]", shuffle_partitions=args.partitions,
                          extra_conf={"spark.ui.enabled": "false", "spark.driver.memory": "6g"})  # fmt: skip
    suffix, variant = args.suffix, args.child
    rates: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        if variant == "latency":
            return {"latency": measure_latency(spark, args, f"{tmp}/latency")}
        for run in range(args.runs):
            checkpoint = f"{tmp}/{variant}-{run}"
            if variant == "baseline":
                seconds = run_baseline(spark, "user-clicks" + suffix, "raw-copy" + suffix, args.bootstrap,
                                       checkpoint, args.max_per_trigger)  # fmt: skip
                rate = args.clicks / seconds
            elif variant == "stream-stream":
                spec = stream_stream_spec(suffix, args.partitions, args.max_per_trigger)
                seconds = run_query(spark, spec, args.bootstrap, checkpoint)
                rate = (args.clicks + args.views) / seconds
            else:
                spec = bench_spec(suffix, variant, args.max_per_trigger)
                seconds = run_query(spark, spec, args.bootstrap, checkpoint)
                rate = (args.clicks + args.users) / seconds
            rates.append(rate)
            print(f"{variant:>14} run {run + 1}: {seconds:7.1f}s  {rate:12,.0f} input records/s", flush=True)
    return {"rates": rates}


def in_child(args: argparse.Namespace, suffix: str, child: str) -> dict[str, object]:
    """Run :func:`measure_in_this_jvm` in a fresh Python process and JVM; its result is its last line."""
    command = [sys.executable, __file__, "--child", child, f"--suffix={suffix}"]  # it starts with "-"
    for name in ("bootstrap", "clicks", "users", "views", "partitions", "max_per_trigger", "latency_rate",
                 "latency_seconds", "runs"):  # fmt: skip
        command += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
    lines = done.stdout.splitlines()
    print("\n".join(line for line in lines if not line.startswith(RESULT)), flush=True)
    results = [line[len(RESULT) :] for line in lines if line.startswith(RESULT)]
    if done.returncode != 0 or not results:
        raise RuntimeError(f"bench child {child!r} failed (exit {done.returncode})")
    return json.loads(results[-1])  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:19092")
    parser.add_argument("--clicks", type=int, default=5_000_000)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--views", type=int, default=None, help="stream-stream: views (default: as many as clicks)")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--max-per-trigger", type=int, default=1_000_000)
    parser.add_argument("--variants", default="baseline,join,join+sum/batch,join+sum,stream-stream")
    parser.add_argument("--latency-rate", type=int, default=20_000, help="clicks/s; 0 skips the latency run")
    parser.add_argument("--latency-seconds", type=int, default=60)
    parser.add_argument("--runs", type=int, default=2, help="runs of each variant in a row (the first warms the JVM)")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # internal: measure one variant in this process
    parser.add_argument("--suffix", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.views is None:
        args.views = args.clicks
    if args.child:
        print(RESULT + json.dumps(measure_in_this_jvm(args)), flush=True)
        return 0
    variants = args.variants.split(",")
    suffix = "-bench-" + uuid.uuid4().hex[:6]
    clicks, regions, views = "user-clicks" + suffix, "user-regions" + suffix, "user-views" + suffix
    topics = {clicks: False, regions: True, "enriched-clicks" + suffix: False, "clicks-per-region" + suffix: True,
              "clicks-per-region-dlq" + suffix: False, "raw-copy" + suffix: False, views: False,
              "views-with-clicks" + suffix: False}  # fmt: skip
    make_topics(args.bootstrap, topics, args.partitions)
    produced_in = produce(args.bootstrap, clicks, regions, args.users, args.clicks)
    total = args.clicks + args.users
    print(f"produced {total} records in {produced_in:.1f}s ({total / produced_in:,.0f}/s)", flush=True)
    if "stream-stream" in variants:
        produce_views(args.bootstrap, views, args.users, args.views)
    runs: list[dict[str, float]] = [{} for _ in range(args.runs)]
    for variant in variants:
        for run, rate in enumerate(in_child(args, suffix, variant)["rates"]):  # type: ignore[arg-type]
            runs[run][variant] = rate
    latency: dict[str, float] = {}
    if args.latency_rate:
        latency = in_child(args, suffix, "latency")["latency"]  # type: ignore[assignment]
        print(f"latency at {args.latency_rate:,} clicks/s: p50 {latency['p50_ms']:.0f} ms, "
              f"p99 {latency['p99_ms']:.0f} ms ({latency['records']} records)", flush=True)  # fmt: skip
    for run, results in enumerate(runs, 1):
        for variant, rate in results.items():
            if variant != "baseline" and "baseline" in results:
                print(f"run {run}: ratio {variant}/baseline: {rate / results['baseline']:.3f}")
    # "rates": the last (warmest) run of each variant; "first_rates": the first, with the JVM's warm-up
    line = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "clicks": args.clicks, "users": args.users,
            "views": args.views if "stream-stream" in variants else 0, "partitions": args.partitions,
            "max_per_trigger": args.max_per_trigger, "rates": runs[-1], "first_rates": runs[0],
            "jvm_per_variant": True, "latency": latency}  # fmt: skip
    with open(Path(__file__).with_name("results.jsonl"), "a") as out:
        out.write(json.dumps(line) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
