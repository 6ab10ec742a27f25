"""Kafka -> join -> Kafka throughput of the seed's clicks x regions pipeline and of a 10 s windowed
stream-stream join and a two-table enrichment (two chained joins), next to Kafka Streams 4.1.1 running the
same workloads on the same input topics, and a copy baseline; every figure from a run whose output content was
checked. Then end-to-end latency of the stream-table join at a fixed input rate.

    .venv/bin/python bench/bench_join.py --bootstrap 127.0.0.1:19092 --clicks 5000000 --users 100000 \
        --views 1000000 --max-per-trigger 1500000,100000

The generator (``produce_clicks.produce``) computes the expected answer while producing: clicks summed per
region (``UNKNOWN`` for the ~2% of clicks from users without a region), the number of enriched clicks, and
the number of view-click pairs of one user at most 10 s apart. After each run, outside its timed part, the
bench reads the run's output topics with Spark's Kafka batch source (a Spark session of its own) and checks:
``join``: as many enriched clicks as clicks, and their per-region sums equal the totals; ``join+sum``
variants: that too, and the latest value per region on the aggregate topic equals the totals;
``stream-stream``: as many results as pairs; ``baseline``: as many records as clicks, same sum; ``enrich2``
variants: as many enriched clicks as clicks, their sums per region and category and the latest value per
``<region>/<category>`` on the aggregate topic equal the totals ``produce_clicks.produce_enrich`` computed. Our
runs also must leave the dead-letter topic empty. A run whose content is wrong prints ``FAILED`` with expected
and got, reports no rate, and the bench exits 1 at the end. Every run writes to output topics of its own.

Each streamjoin variant runs in a JVM of its own (a child process of this script, one pipeline per JVM,
as a deployed job runs) and each Kafka Streams workload in a JVM of its own beside it; the runs alternate:
Kafka Streams run 1, streamjoin run 1, Kafka Streams run 2, streamjoin run 2, ... (``--runs``, default 2).
The first run of each pays its JVM's warm-up (cold), the last is the steady state (warm); both are
printed, with the ratio streamjoin / Kafka Streams of the same run.

Variants (``--variants``) and their Kafka Streams counterparts (``bench/kafka-streams``): ``baseline``
(streamjoin's job shape, Kafka batch reads of offset ranges and the kernel's Kafka writer, copying the clicks / a
``stream(clicks).to(out)`` topology), ``join`` (clicks leftJoin regions), ``join/eos`` (the same, exactly
once: ``output.delivery: exactly_once`` / ``processing.guarantee=exactly_once_v2``; outputs read committed),
``table-table`` (the clicks read as a table, each user's latest count, left-joined with the regions table;
every update emitted, Kafka Streams without its record cache; checked: the last value of each user on the
output is (their region, their last click's count)), ``fk`` (the same two tables joined by a foreign key, the
clicks' key: ``foreign_key: {expr: key}`` / ``leftJoin(regions, (user, n) -> user, joiner)``; checked as
``table-table``; Kafka Streams' run ends when its inputs and its subscription and response topics are committed),
``join+sum/batch`` (+ per-region sum, one update per region and micro-batch / Kafka Streams' default record
cache), ``join+sum`` (one sum update per click / no record cache), ``stream-stream`` (views x clicks, 10 s
window, inner), ``join/avro`` (``join`` on Avro values in Confluent's wire format: clicks ``{clicks: long}`` and
regions ``{region: string}`` on topics of their own, written through the local schema registry, which the bench
starts if it is not running (``streamjoin.localdev.schema_registry``) and gives the jobs as
``schema_registry_default``; an Avro output; Kafka Streams' ``join-avro`` workload reads and writes them with
its own serde on Apache Avro, ``RegistryAvroSerde``, as Confluent's serde does; checked as ``join``, the output
decoded by fastavro with each record's writer schema from the registry), ``enrich2`` (a chain of two joins,
the shipped ``include/pipelines/clicks_per_region_category.yaml``: clicks with JSON values ``{product, clicks}``
on a topic of their own, the same users and times as the other clicks, left-join the regions table, then
left-join a products table of ``--products`` categories read as a global table, looked up by the click's product
(``key_selector: {expr: lval.product}``), summed per ``<region>/<category>`` (``UNKNOWN``, ``OTHER`` for a click
of a user or product the tables lack), one update per click / Kafka Streams' ``enrich2-sum-nocache``,
``clicks.leftJoin(regions, ...).leftJoin(productsGlobal, (user, c) -> c.product(), ...)`` then
``groupByKey().reduce`` without a record cache) and ``enrich2/batch``
(per micro-batch / the record cache, ``enrich2-sum``); their input records count the products too. Rates are
input records per second over a backlog (streamjoin: ``run_stream`` with ``available_now``, batches of at most
``--max-per-trigger`` offsets, no pause between batches).
``--max-per-trigger`` takes a comma list: all variants run at the first size, ``--more-sizes-variants``
(default ``join``) at the others.

Per-batch times come from the job's ``streamjoin batch {...}`` lines: batches without join results (the
table being loaded) apart from the others, against the table's size (``--users``, e.g. 10_000_000).

Latency: Kafka timestamp of the output record (set when the kernel's writer sends it) minus the click's timestamp
(set by the producer when it sends it), at ``--latency-rate`` clicks/s, the job running (not
available-now); its output is checked too (count and per-region sums).

Appends a JSON line to bench/results.jsonl (``rates``/``first_rates``: streamjoin's warm and first checked
rates at the first size; ``kafka_streams_rates``/``kafka_streams_first_rates`` alike; ``sizes``: everything).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka.admin import AdminClient, NewTopic

from produce_clicks import REGIONS, UNKNOWN, Produced, _produce, _producer, produce, produce_enrich, produce_views
from streamjoin.core.spec import load_spec, parse_spec

HOME = Path(__file__).resolve().parents[1]
KS_JAR = HOME / ".local/kafka-streams-bench/kafka-streams-bench.jar"
KS_BUILD = HOME / "bench/kafka-streams/build.sh"
#: Kafka Streams workload of each variant
KS_WORKLOAD = {
    "baseline": "copy",
    "join": "join",
    "join/eos": "join",
    "table-table": "table-table",
    "fk": "fk",
    "join+sum/batch": "join-sum",
    "join+sum": "join-sum-nocache",
    "stream-stream": "stream-stream",
    "join/avro": "join-avro",
    "enrich2": "enrich2-sum-nocache",
    "enrich2/batch": "enrich2-sum",
}
#: variants of the two-table enrichment (clicks with a product field x regions x products, summed per both)
ENRICH = {"enrich2", "enrich2/batch"}
#: variants on the Avro input topics (values in Confluent's wire format, schemas in the registry)
AVRO = {"join/avro"}
CLICK_AVRO = {"type": "record", "name": "Click", "namespace": "bench", "fields": [{"name": "clicks", "type": "long"}]}
REGION_AVRO = {"type": "record", "name": "Region", "namespace": "bench",
               "fields": [{"name": "region", "type": "string"}]}  # fmt: skip
#: variants whose Kafka output is exactly once: ours ``output.delivery: exactly_once``, Kafka Streams'
#: ``processing.guarantee=exactly_once_v2``
EXACTLY_ONCE = {"join/eos"}
#: marks the line on which a child process hands a result to the parent
RESULT = "BENCH_RESULT "
READY = "BENCH_READY"
KS_RESULT = "KS_RESULT "
KS_READY = "KS_READY"
BATCH_LINE = "streamjoin batch "


def make_topics(bootstrap: str, names: dict[str, bool], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [
        NewTopic(name, partitions, 1, config={"cleanup.policy": "compact"} if compact else {})
        for name, compact in names.items()
    ]
    for future in admin.create_topics(new).values():
        future.result()


def slug(variant: str) -> str:
    return variant.replace("+", "-").replace("/", "-")


# --- topics of a run -------------------------------------------------------------------------------------


def input_topics(suffix: str) -> dict[str, str]:
    return {"clicks": "user-clicks" + suffix, "regions": "user-regions" + suffix, "views": "user-views" + suffix,
            "clicks_avro": "user-clicks-avro" + suffix, "regions_avro": "user-regions-avro" + suffix,
            "clicks_json": "user-clicks-json" + suffix, "products": "products" + suffix}  # fmt: skip


def output_topics(variant: str, out_suffix: str) -> dict[str, str]:
    """The topics one run of ``variant`` writes (created by the parent before the run)."""
    if variant == "baseline":
        return {"copy": "raw-copy" + out_suffix}
    if variant == "stream-stream":
        return {"pairs": "views-with-clicks" + out_suffix, "dead": "clicks-per-region-dlq" + out_suffix}
    if variant in ENRICH:
        return {"enriched": "enriched-clicks2" + out_suffix, "aggregate": "clicks-per-region-category" + out_suffix,
                "dead": "clicks-enriched2-dlq" + out_suffix}  # fmt: skip
    topics = {"enriched": "enriched-clicks" + out_suffix, "dead": "clicks-per-region-dlq" + out_suffix}
    if variant.startswith("join+sum"):
        topics["aggregate"] = "clicks-per-region" + out_suffix
    if variant in EXACTLY_ONCE:
        topics["markers"] = f"{pipeline_name(out_suffix)}-batch-markers"
    return topics


def pipeline_name(out_suffix: str) -> str:
    """The pipeline's name in a run: its own, so are its exactly-once markers and transactional ids."""
    return "clicks_per_region" + out_suffix.replace("-", "_")


# --- specs -----------------------------------------------------------------------------------------------


def bench_spec(suffix: str, out_suffix: str, variant: str, max_per_trigger: int) -> Any:
    data = load_spec(HOME / "include/pipelines/clicks_per_region.yaml").model_dump(mode="json", by_alias=True)
    for spec_input in data["inputs"].values():
        spec_input["topic"] += suffix
    data["output"]["topic"] += out_suffix
    data["dead_letter_topic"] += out_suffix
    data["trigger"]["max_offsets_per_trigger"] = max_per_trigger
    data["trigger"]["processing_time"] = 0  # over a backlog: no pause between batches
    data["output"]["files"] = None
    data["quality"] = None
    data["name"] = pipeline_name(out_suffix)
    if variant in EXACTLY_ONCE:
        data["output"]["delivery"] = "exactly_once"
    if variant == "table-table":  # the clicks read as a table (each user's latest count) joined with the regions
        data["inputs"]["clicks"]["role"] = "table"
        data["join"]["shape"] = "table-table"
    if variant == "fk":  # the same tables joined by a foreign key: the clicks' key (Kafka Streams' KIP-1104 form)
        data["inputs"]["clicks"]["role"] = "table"
        data["join"]["shape"] = "table-table-fk"
        data["join"]["foreign_key"] = {"expr": "key"}
    if variant in AVRO:  # the join on the Avro topics: record values, fields in the joiner, an Avro output
        topics = input_topics(suffix)
        data["inputs"]["clicks"] |= {"topic": topics["clicks_avro"], "value": {"format": "avro"}}
        data["inputs"]["regions"] |= {"topic": topics["regions_avro"], "value": {"format": "avro"}}
        data["join"]["joiner"] = {"select": {"region": "coalesce(right.region, 'UNKNOWN')", "clicks": "left.clicks"}}
        data["output"]["value_format"] = "avro"
    if variant.startswith("join+sum"):
        data["aggregate"]["output"]["topic"] += out_suffix
        data["aggregate"]["output"]["files"] = None
        data["aggregate"]["emit"] = "per_batch" if variant.endswith("/batch") else "every_change"
    else:
        data["aggregate"] = None
    return parse_spec(data, "bench")


def stream_stream_spec(suffix: str, out_suffix: str, partitions: int, max_per_trigger: int) -> Any:
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
            "output": {"topic": "views-with-clicks" + out_suffix},
            "dead_letter_topic": "clicks-per-region-dlq" + out_suffix,
            "trigger": {"max_offsets_per_trigger": max_per_trigger, "processing_time": 0},
        },
        "bench",
    )


def enrich_spec(suffix: str, out_suffix: str, variant: str, partitions: int, max_per_trigger: int) -> Any:
    """The shipped two-join pipeline (``include/pipelines/clicks_per_region_category.yaml``: clicks with a product
    field left-join the users' regions, a table, then the products' categories, a global table looked up by the
    click's product, summed per region and category) on the bench's topics."""
    data = load_spec(HOME / "include/pipelines/clicks_per_region_category.yaml").model_dump(mode="json", by_alias=True)
    topics, outputs = input_topics(suffix), output_topics(variant, out_suffix)
    data["inputs"]["clicks"]["topic"] = topics["clicks_json"]
    data["inputs"]["regions"]["topic"] = topics["regions"]
    data["inputs"]["categories"]["topic"] = topics["products"]
    data["kafka"]["partitions"] = partitions
    data["output"] |= {"topic": outputs["enriched"], "files": None}
    data["aggregate"]["output"] |= {"topic": outputs["aggregate"], "files": None}
    data["aggregate"]["emit"] = "per_batch" if variant.endswith("/batch") else "every_change"
    data["dead_letter_topic"] = outputs["dead"]
    data["trigger"] |= {"max_offsets_per_trigger": max_per_trigger, "processing_time": 0}
    data["quality"] = None
    data["name"] = "clicks_per_region_category" + out_suffix.replace("-", "_")
    return parse_spec(data, "bench")


# --- the child: streamjoin runs in a JVM of its own ------------------------------------------------------


def run_job(spark: Any, spec: Any, bootstrap: str, checkpoint: str) -> tuple[float, int]:
    from streamjoin.spark.job import JobSettings, run_stream

    started = time.monotonic()
    settings = JobSettings(bootstrap=bootstrap, checkpoint_dir=checkpoint, available_now=True, home=str(HOME))
    batches = run_stream(spark, spec, settings)
    return time.monotonic() - started, batches


def run_baseline(spark: Any, topic: str, out_topic: str, bootstrap: str, max_per_trigger: int) -> tuple[float, int]:
    """The job's shape with no join: batches of at most ``max_per_trigger`` offsets (split evenly over the
    partitions), each one read with Spark's Kafka batch source and written with the job's Kafka writer."""
    from pyspark.sql import functions as F

    from streamjoin.kafka.clients import end_offsets
    from streamjoin.spark.sinks import write_kafka
    from streamjoin.spark.source import read_offsets

    started = time.monotonic()
    ends = end_offsets(bootstrap, topic)
    position = dict.fromkeys(ends, 0)
    per_partition = max(1, max_per_trigger // max(1, len(ends)))
    batches = 0
    while any(position[p] < ends[p] for p in ends):
        stop = {p: min(ends[p], position[p] + per_partition) for p in ends}
        raw = read_offsets(spark, bootstrap, {topic: position}, {topic: stop})
        write_kafka(raw.select("key", "value", F.lit(out_topic).alias("topic")), bootstrap)
        position = stop
        batches += 1
    return time.monotonic() - started, batches


def measure_latency(spark: Any, args: argparse.Namespace, checkpoint: str) -> dict[str, Any]:
    """Fresh topics; regions first, then clicks at a fixed rate for a while with the job running."""
    from streamjoin.core.job_files import PipelineFiles
    from streamjoin.kafka.clients import consume_all, end_offsets
    from streamjoin.spark.job import JobSettings, StreamJob

    suffix = "-lat-" + uuid.uuid4().hex[:6]
    topics = input_topics(suffix)
    outputs = output_topics("join", suffix)
    make_topics(args.bootstrap, {topics["clicks"]: False, topics["regions"]: True} |
                dict.fromkeys(outputs.values(), False), args.partitions)  # fmt: skip
    producer = _producer(args.bootstrap)
    for i in range(args.users):
        _produce(producer, topics["regions"], f"user{i}".encode(), REGIONS[i % len(REGIONS)].encode(), 0)
    producer.flush(60)
    spec = bench_spec(suffix, suffix, "join", args.max_per_trigger)
    spec = spec.model_copy(update={"trigger": spec.trigger.model_copy(update={"processing_time": 200})})
    settings = JobSettings(bootstrap=args.bootstrap, checkpoint_dir=checkpoint, available_now=False, home=str(HOME))
    job = StreamJob(spark, spec, settings)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            job.run()
        except BaseException as error:  # reported by the main thread
            failure.append(error)

    runner = threading.Thread(target=run, name="streamjoin-latency-job")
    runner.start()
    files = PipelineFiles(Path(checkpoint))
    while (status := files.status()) is None or status.counts.input_records == 0:  # the regions are in the table
        if failure or not runner.is_alive():
            raise RuntimeError(f"the job stopped before its first batch: {failure}")
        time.sleep(0.5)
    sent = 0
    expected = dict.fromkeys([*REGIONS, UNKNOWN], 0)

    def paced() -> None:
        nonlocal sent
        started = time.monotonic()
        while (elapsed := time.monotonic() - started) < args.latency_seconds:
            due = int(elapsed * args.latency_rate)
            now = int(time.time() * 1000)
            for _ in range(due - sent):
                user = sent % args.users
                expected[REGIONS[user % len(REGIONS)]] += 1
                _produce(producer, topics["clicks"], f"user{user}".encode(), b"\0" * 7 + b"\1", now)
                sent += 1
            producer.poll(0)
            time.sleep(0.005)
        producer.flush(60)

    pacer = threading.Thread(target=paced)
    pacer.start()
    pacer.join()
    # read the output only once the job has written all of it: a Python consumer reading 1M records
    # beside the job takes a core from the last batches and inflates their latency
    deadline = time.monotonic() + 300
    try:
        while sum(end_offsets(args.bootstrap, outputs["enriched"]).values()) < sent:
            if failure or not runner.is_alive():
                raise RuntimeError(f"the job stopped: {failure}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the job did not write {sent} enriched clicks within 300 s")
            time.sleep(0.5)
    finally:
        files.request_stop()
        runner.join(600)
    records = consume_all(args.bootstrap, outputs["enriched"], timeout=300, expected=sent)
    got: dict[str, int] = {}
    for record in records:
        value = json.loads(record.value)  # type: ignore[arg-type]
        got[value["region"]] = got.get(value["region"], 0) + value["clicks"]
    expected = {region: n for region, n in expected.items() if n}
    problems = []
    if len(records) != sent:
        problems.append(f"enriched clicks: expected {sent}, got {len(records)}")
    if got != expected:
        problems.append(f"per-region sums: expected {expected}, got {got}")
    latencies = sorted(r.timestamp - int(dict(r.headers)["ts"] or 0) for r in records)
    cut = len(latencies) // 10  # the first tenth is the warm-up
    steady = latencies[cut:] or latencies
    q = statistics.quantiles(steady, n=100) if len(steady) > 1 else [float(steady[0])] * 99 if steady else [0.0] * 99
    return {"rate": args.latency_rate, "records": len(records), "p50_ms": q[49], "p99_ms": q[98], "problems": problems}


def child_main(args: argparse.Namespace) -> int:
    """The child's work: runs of ``args.child`` (a variant, or ``latency``) on command from stdin (one JSON
    line each), in a Spark session of its own; each result on a line of its own after :data:`RESULT`."""
    from streamjoin.spark.session import build_session

    spark = build_session("streamjoin-bench", master=args.master, shuffle_partitions=args.partitions,
                          extra_conf={"spark.ui.enabled": "false", "spark.driver.memory": "6g"})  # fmt: skip
    variant = args.child
    print(READY, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for line in sys.stdin:
            command = json.loads(line)
            if command["op"] == "quit":
                break
            checkpoint = f"{tmp}/{slug(variant)}-{command.get('tag', 'latency')}"
            if command["op"] == "latency":
                result: dict[str, Any] = measure_latency(spark, args, checkpoint)
            else:
                out_suffix = command["out_suffix"]
                if variant == "baseline":
                    seconds, batches = run_baseline(spark, input_topics(args.suffix)["clicks"],
                                                    output_topics(variant, out_suffix)["copy"], args.bootstrap,
                                                    args.max_per_trigger)  # fmt: skip
                elif variant == "stream-stream":
                    spec = stream_stream_spec(args.suffix, out_suffix, args.partitions, args.max_per_trigger)
                    seconds, batches = run_job(spark, spec, args.bootstrap, checkpoint)
                elif variant in ENRICH:
                    spec = enrich_spec(args.suffix, out_suffix, variant, args.partitions, args.max_per_trigger)
                    seconds, batches = run_job(spark, spec, args.bootstrap, checkpoint)
                else:
                    spec = bench_spec(args.suffix, out_suffix, variant, args.max_per_trigger)
                    seconds, batches = run_job(spark, spec, args.bootstrap, checkpoint)
                result = {"seconds": seconds, "batches": batches}
            print(RESULT + json.dumps(result), flush=True)
    return 0


# --- the parent: processes of both engines, checks ------------------------------------------------------


class Child:
    """A child process that answers commands on stdin with a result line on stdout."""

    def __init__(self, name: str, command: list[str], ready: str, result: str, quit_line: str) -> None:
        self.name, self.result, self.quit_line = name, result, quit_line
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self._read_until(ready)

    def _read_until(self, marker: str) -> tuple[str, list[str]]:
        assert self.process.stdout is not None
        lines: list[str] = []
        for raw in self.process.stdout:
            line = raw.rstrip("\n")
            if line.startswith(marker):
                return line[len(marker) :], lines
            lines.append(line)
            # the batch line says it all; a job's registry client logs each of its requests
            if not line.startswith("streamjoin progress") and "HTTP Request: " not in line:
                print(f"  [{self.name}] {line}", flush=True)
        code = self.process.wait()
        raise RuntimeError(f"{self.name} ended (exit {code}) before answering")

    def ask(self, command: str) -> tuple[dict[str, Any], list[str]]:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        answer, lines = self._read_until(self.result)
        return json.loads(answer), lines

    def close(self) -> None:
        try:
            if self.process.poll() is None and self.process.stdin is not None:
                self.process.stdin.write(self.quit_line + "\n")
                self.process.stdin.close()
            self.process.wait(120)
        except (BrokenPipeError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()


def streamjoin_child(args: argparse.Namespace, suffix: str, child: str, max_per_trigger: int) -> Child:
    command = [sys.executable, __file__, "--child", child, f"--suffix={suffix}"]  # it starts with "-"
    for name in ("bootstrap", "clicks", "users", "views", "partitions", "latency_rate", "latency_seconds", "master"):
        command += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    command += ["--max-per-trigger", str(max_per_trigger)]
    return Child(f"streamjoin {child}", command, READY, RESULT, json.dumps({"op": "quit"}))


def kafka_streams_child(args: argparse.Namespace, suffix: str, variant: str, expected: Produced, pairs: int) -> Child:
    workload = KS_WORKLOAD[variant]
    topics = input_topics(suffix)
    avro = variant in AVRO
    clicks, regions = topics["clicks_avro" if avro else "clicks"], topics["regions_avro" if avro else "regions"]
    if variant in ENRICH:
        clicks = topics["clicks_json"]
    command = ["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-jar", str(KS_JAR),
               "--bootstrap", args.bootstrap, "--workload", workload, "--clicks", clicks,
               "--regions", regions, "--views", topics["views"], "--products", topics["products"],
               "--threads", str(args.ks_threads), "--commit-interval-ms", str(args.ks_commit_interval_ms),
               "--expect-count", str(pairs if variant == "stream-stream" else expected.clicks)]  # fmt: skip
    if args.ks_max_task_idle_ms is not None:
        command += ["--max-task-idle-ms", str(args.ks_max_task_idle_ms)]
    if variant in EXACTLY_ONCE:
        command += ["--guarantee", "exactly_once_v2"]
    if variant in AVRO:
        command += ["--registry", args.registry_url]
    if workload in ("join-sum", "enrich2-sum"):
        command += ["--expect-totals", ",".join(f"{k}={v}" for k, v in sorted(expected.totals.items()))]
    if workload in ("join-sum-nocache", "enrich2-sum-nocache"):
        command += ["--expect-agg-count", str(expected.clicks)]
    return Child(f"kafka-streams {workload}", command, KS_READY, KS_RESULT, "quit")


class Checker:
    """Reads a run's output topics with Spark's Kafka batch source and compares them with the answer."""

    def __init__(self, bootstrap: str, partitions: int, registry_url: str | None = None) -> None:
        from streamjoin.spark.session import build_session

        self.bootstrap, self.registry_url = bootstrap, registry_url
        self.spark = build_session("streamjoin-bench-check", master="local[2]", shuffle_partitions=partitions,
                                   extra_conf={"spark.ui.enabled": "false", "spark.driver.memory": "2g"})  # fmt: skip

    def read(self, topic: str) -> Any:
        return (
            self.spark.read.format("kafka")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .option("kafka.isolation.level", "read_committed")  # exactly-once runs' aborted records are not output
            .load()
        )

    def count(self, topic: str) -> int:
        return int(self.read(topic).count())

    def enriched(self, topic: str) -> tuple[int, dict[str | None, int]]:
        from pyspark.sql import functions as F

        value = F.from_json(F.col("value").cast("string"), "region STRING, clicks LONG").alias("v")
        rows = (
            self.read(topic)
            .select(value)
            .groupBy(F.col("v.region").alias("region"))
            .agg(F.count("*").alias("n"), F.sum("v.clicks").alias("clicks"))
            .collect()
        )
        return sum(r["n"] for r in rows), {r["region"]: r["clicks"] for r in rows}

    def enriched2(self, topic: str) -> tuple[int, dict[str | None, int]]:
        """``(count, clicks summed per "<region>/<category>")`` of the two-table enrichment's output."""
        from pyspark.sql import functions as F

        value = F.from_json(F.col("value").cast("string"), "region STRING, category STRING, clicks LONG").alias("v")
        rows = (
            self.read(topic)
            .select(value)
            .groupBy(F.concat("v.region", F.lit("/"), "v.category").alias("group"))
            .agg(F.count("*").alias("n"), F.sum("v.clicks").alias("clicks"))
            .collect()
        )
        return sum(r["n"] for r in rows), {r["group"]: r["clicks"] for r in rows}

    def enriched_avro(self, topic: str) -> tuple[int, dict[str | None, int], int]:
        """``(count, per-region sums, records not in the wire format)`` of an Avro output: each value decoded
        by fastavro with the writer schema of its id, fetched from the registry once per id."""
        from pyspark.sql import functions as F

        assert self.registry_url is not None, "an Avro output is checked with the registry's schemas"
        frame = self.read(topic).select("value")
        found = frame.select(F.conv(F.hex(F.substring("value", 2, 4)), 16, 10).cast("long").alias("id")).distinct()
        schemas = {r["id"]: registry_schema(self.registry_url, r["id"]) for r in found.collect() if r["id"] is not None}

        def decode_partition(rows: Any) -> Any:
            import io

            import fastavro

            parsed = {i: fastavro.parse_schema(json.loads(text)) for i, text in schemas.items()}
            count, bad, sums = 0, 0, dict[str | None, int]()
            for row in rows:
                data = row["value"]
                if data is None or len(data) < 5 or data[0] != 0:
                    bad += 1
                    continue
                writer = parsed[int.from_bytes(data[1:5], "big")]
                record: Any = fastavro.schemaless_reader(io.BytesIO(bytes(data[5:])), writer, None)
                count += 1
                sums[record["region"]] = sums.get(record["region"], 0) + int(record["clicks"])
            yield count, sums, bad

        total, bad, sums = 0, 0, dict[str | None, int]()
        for count, part, wrong in frame.rdd.mapPartitions(decode_partition).collect():
            total, bad = total + count, bad + wrong
            for region, clicks in part.items():
                sums[region] = sums.get(region, 0) + clicks
        return total, sums, bad

    def latest_longs(self, topic: str) -> dict[str | None, int | None]:
        """The value of each key's last record (keys of one region sit in one partition)."""
        from pyspark.sql import functions as F

        rows = (
            self.read(topic)
            .groupBy(F.col("key").cast("string").alias("key"))
            .agg(F.max_by("value", "offset").alias("value"))
            .collect()
        )
        return {r["key"]: None if r["value"] is None else struct.unpack(">q", bytes(r["value"]))[0] for r in rows}

    def latest_enriched(self, topic: str) -> dict[str, tuple[str, int]]:
        """Each key's last (region, clicks) on a table-table join's output (a key's records sit in one partition)."""
        from pyspark.sql import functions as F

        value = F.from_json(F.col("value").cast("string"), "region STRING, clicks LONG")
        rows = (
            self.read(topic)
            .groupBy(F.col("key").cast("string").alias("key"))
            .agg(F.max_by(value, "offset").alias("v"))
            .collect()
        )
        return {r["key"]: (r["v"]["region"], r["v"]["clicks"]) for r in rows}

    def long_sum(self, topic: str) -> tuple[int, int]:
        from pyspark.sql import functions as F

        row = (
            self.read(topic)
            .agg(F.count("*").alias("n"), F.sum(F.conv(F.hex("value"), 16, 10).cast("long")).alias("s"))
            .collect()[0]
        )
        return int(row["n"]), int(row["s"] or 0)

    def check(self, variant: str, topics: dict[str, str], expected: Produced, pairs: int) -> list[str]:
        """What is wrong with a run's output (empty: all correct)."""
        problems = []
        if variant == "baseline":
            got = self.long_sum(topics["copy"])
            want = (expected.clicks, sum(expected.totals.values()))
            if got != want:
                problems.append(f"copied clicks (count, sum): expected {want}, got {got}")
        elif variant == "stream-stream":
            got_pairs = self.count(topics["pairs"])
            if got_pairs != pairs:
                problems.append(f"join results: expected {pairs} pairs, got {got_pairs}")
        elif variant in ("table-table", "fk"):
            latest = self.latest_enriched(topics["enriched"])
            if latest != expected.last_clicks:
                wrong = sorted(k for k in latest.keys() | expected.last_clicks.keys()
                               if latest.get(k) != expected.last_clicks.get(k))  # fmt: skip
                first = [(k, expected.last_clicks.get(k), latest.get(k)) for k in wrong[:3]]
                problems.append(f"the join table: {len(wrong)} of {len(expected.last_clicks)} users differ: {first}")
        else:
            if variant in ENRICH:
                count, sums = self.enriched2(topics["enriched"])
            elif variant in AVRO:
                count, sums, bad = self.enriched_avro(topics["enriched"])
                if bad:
                    problems.append(f"{bad} records on {topics['enriched']} are not Avro in the Confluent wire format")
            else:
                count, sums = self.enriched(topics["enriched"])
            if count != expected.clicks:
                problems.append(f"enriched clicks: expected {expected.clicks}, got {count}")
            if sums != expected.totals:
                problems.append(f"sums per group of the enriched clicks: expected {expected.totals}, got {sums}")
            if "aggregate" in topics:
                last_values = self.latest_longs(topics["aggregate"])
                if last_values != expected.totals:
                    problems.append(
                        f"latest per key on {topics['aggregate']}: expected {expected.totals}, got {last_values}"
                    )
        if "dead" in topics and (dead := self.count(topics["dead"])):
            problems.append(f"dead letters: expected 0, got {dead}")
        return problems


def registry_schema(url: str, schema_id: int) -> str:
    """The schema of ``schema_id`` from a Confluent-compatible registry's API at ``url``."""
    import urllib.request

    with urllib.request.urlopen(f"{url}/schemas/ids/{schema_id}", timeout=30) as response:
        return str(json.loads(response.read())["schema"])


def start_registry(port: int) -> tuple[Any, bool]:
    """A local schema registry of the bench's own (``.local/bench-registry``, on ``port``: not the one of
    localdev or the tests, which others restart, emptying it), started unless it runs (whether this call started
    it), set as the jobs' ``schema_registry_default`` connection (children inherit the environment)."""
    from streamjoin.localdev.schema_registry import API_PATH, SchemaRegistry

    registry = SchemaRegistry(HOME / ".local" / "bench-registry", port)
    started = registry.start(timeout=180)
    conn = {"conn_type": "http", "host": "127.0.0.1", "port": registry.port, "schema": API_PATH.strip("/")}
    os.environ["AIRFLOW_CONN_SCHEMA_REGISTRY_DEFAULT"] = json.dumps(conn)
    return registry, started


def produce_avro(args: argparse.Namespace, topics: dict[str, str], expected: Produced) -> None:
    """The clicks and regions of :func:`produce` again (same seed: same answer) on the Avro topics, their
    schemas registered under ``<topic>-value``; values in the wire format."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    from streamjoin.core.avro import encode_wire

    client = SchemaRegistryClient({"url": args.registry_url})
    click, region = json.dumps(CLICK_AVRO), json.dumps(REGION_AVRO)
    click_id = client.register_schema(f"{topics['clicks_avro']}-value", Schema(click, "AVRO"))
    region_id = client.register_schema(f"{topics['regions_avro']}-value", Schema(region, "AVRO"))
    avro = produce(args.bootstrap, topics["clicks_avro"], topics["regions_avro"], args.users, args.clicks,
                   unknown_share=args.unknown_share,
                   encode_click=lambda n: encode_wire({"clicks": n}, click_id, click) or b"",
                   encode_region=lambda name: encode_wire({"region": name}, region_id, region) or b"")  # fmt: skip
    if (avro.clicks, avro.totals) != (expected.clicks, expected.totals):
        raise RuntimeError(f"the Avro topics' answer {avro.totals} differs from the others' {expected.totals}")
    total = args.clicks + args.users
    print(f"produced {total:,} Avro records in {avro.seconds:.1f}s (schema ids: clicks {click_id}, regions "
          f"{region_id})", flush=True)  # fmt: skip


_PHASES = ("read_ms", "write_ms", "state_ms", "state_bytes", "driver_ms", "plan_ms")


def batch_profile(lines: list[str], users: int) -> dict[str, Any]:
    """Per-batch times from the job's ``streamjoin batch {...}`` lines: batches without join results (the
    table being loaded) and the others; ``users``: the table's size (0: no table)."""
    batches = [json.loads(line[len(BATCH_LINE) :]) for line in lines if line.startswith(BATCH_LINE)]
    if not batches:
        return {}
    joined = [b for b in batches if b.get("output_records")]
    loading = [b for b in batches if not b.get("output_records")]
    profile: dict[str, Any] = {
        "table_keys": users,
        # per batch: rows, join results, seconds; then ms reading+planning / computing+writing / saving the
        # state, the state's bytes, the driver's ms outside the job and its ms getting the plan (0: planned
        # while the batch before ran)
        "batches": [
            [b["input_records"], b.get("output_records", 0), b["seconds"], *(b.get(k) for k in _PHASES)]
            for b in batches
        ],
        "load_batches": len(loading),
        "load_rows": sum(b["input_records"] for b in loading),
        "load_seconds": round(sum(b["seconds"] for b in loading), 3),
        # per batch: stores its executors loaded from the checkpoint's files, and stateful tasks on another
        # executor than in the batch before (the job's "store_loads" and "tasks")
        "store_loads": [len(b.get("store_loads", [])) for b in batches],
        "task_moves": [0] + [_moved(was, now) for was, now in itertools.pairwise(batches)],
        # batches run as one stage in the kernel's tasks (the job's "spark_job": jobs, stages, tasks)
        "in_task_batches": sum(1 for b in batches if "spark_job" in b),
        "spark_jobs": sorted({json.dumps(b["spark_job"], sort_keys=True) for b in batches if "spark_job" in b}),
    }
    if joined:
        rows, seconds = sum(b["input_records"] for b in joined), sum(b["seconds"] for b in joined)
        profile |= {
            "join_batches": len(joined),
            "join_median_rows": statistics.median(b["input_records"] for b in joined),
            "join_median_seconds": statistics.median(b["seconds"] for b in joined),
            "join_rows_per_s": round(rows / seconds) if seconds else None,
        }
        if outside := [b["driver_ms"] for b in joined if b.get("driver_ms") is not None]:
            profile["join_median_driver_ms"] = statistics.median(outside)
    return profile


def _moved(was: dict[str, Any], now: dict[str, Any]) -> int:
    """Stateful tasks of batch line ``now`` on another executor than in ``was`` (the line before)."""
    before = was.get("tasks", {})
    return sum(1 for name, executor in now.get("tasks", {}).items() if before.get(name, executor) != executor)


def describe_profile(profile: dict[str, Any]) -> str:
    if not profile:
        return ""
    text = f"table of {profile['table_keys']:,} keys: " if profile["table_keys"] else ""
    if len(profile.get("store_loads", [])) > 1:
        loads, moves = profile["store_loads"], profile["task_moves"]
        text += f"after the first batch {sum(loads[1:])} store loads and {sum(moves)} task moves; "
    if profile["load_batches"]:
        rows, seconds = profile["load_rows"], profile["load_seconds"]
        text += f"{profile['load_batches']} batches without join results ({rows:,} rows, {seconds:.1f}s); "
    if "join_batches" in profile:
        seconds, rows, rate = profile["join_median_seconds"], profile["join_median_rows"], profile["join_rows_per_s"]
        text += (
            f"{profile['join_batches']} with, median {seconds:.2f}s for {rows:,.0f} rows ({rate:,} rows/s over them)"
        )
        if "join_median_driver_ms" in profile:
            text += f", {profile['join_median_driver_ms']:.0f} ms of it the driver's outside the job"
    return text


def input_records(variant: str, args: argparse.Namespace) -> int:
    if variant == "baseline":
        return int(args.clicks)
    if variant == "stream-stream":
        return int(args.clicks + args.views)
    if variant in ENRICH:  # the products and their updates too
        return int(args.clicks + args.users + args.products + args.products // 10)
    return int(args.clicks + args.users)


def bench_size(
    args: argparse.Namespace, suffix: str, size_index: int, max_per_trigger: int, variant: str,
    expected: Produced, pairs: int, checker: Checker, failures: list[str],
) -> dict[str, Any]:  # fmt: skip
    """All runs of one variant at one batch size, alternating Kafka Streams and streamjoin."""
    records = input_records(variant, args)
    result: dict[str, Any] = {"streamjoin": [], "kafka_streams": [], "batches": [], "profiles": []}
    engines = ["kafka_streams", "streamjoin"] if args.kafka_streams and variant in KS_WORKLOAD else ["streamjoin"]
    children: dict[str, Child] = {}
    try:
        for engine in engines:
            if engine == "streamjoin":
                children[engine] = streamjoin_child(args, suffix, variant, max_per_trigger)
            else:
                children[engine] = kafka_streams_child(args, suffix, variant, expected, pairs)
        for run in range(args.runs):
            for engine in engines:
                tag = f"s{size_index}r{run + 1}"
                out_suffix = f"{suffix}-{'ks' if engine == 'kafka_streams' else 'sj'}-{slug(variant)}-{tag}"
                topics = output_topics(variant, out_suffix)
                if engine == "kafka_streams":
                    topics.pop("dead", None)
                make_topics(args.bootstrap, {t: name == "aggregate" for name, t in topics.items()}, args.partitions)
                label = f"{variant:>14} {engine:>13} run {run + 1}"
                try:
                    if engine == "streamjoin":
                        answer, lines = children[engine].ask(
                            json.dumps({"op": "run", "tag": tag, "out_suffix": out_suffix})
                        )
                    else:
                        main = topics.get("copy") or topics.get("pairs") or topics["enriched"]
                        answer, lines = children[engine].ask(f"run {tag} {main} {topics.get('aggregate', '')}".strip())
                except RuntimeError as error:
                    failures.append(f"{label}: {error}")
                    print(f"FAILED {label}: {error}", flush=True)
                    result[engine].append(None)
                    children.pop(engine).close()
                    engines = [e for e in engines if e != engine]
                    continue
                seconds = float(answer["seconds"])
                problems = checker.check(variant, topics, expected, pairs)
                if engine == "kafka_streams" and not answer.get("done"):
                    problems.insert(0, f"Kafka Streams did not see the expected output ({answer})")
                if problems:
                    failures.append(f"{label}: " + "; ".join(problems))
                    print(f"FAILED {label} ({max_per_trigger:,}/batch): " + "; ".join(problems), flush=True)
                    result[engine].append(None)
                    continue
                rate = records / seconds
                result[engine].append(rate)
                extra = (
                    f", {answer['batches']} batches"
                    if engine == "streamjoin"
                    else f", RUNNING after {answer['startup_seconds']:.1f}s"
                    if answer.get("startup_seconds", -1) >= 0
                    else ""
                )
                print(f"{label}: {seconds:7.1f}s  {rate:12,.0f} input records/s  (content checked{extra})", flush=True)
                if engine == "streamjoin":
                    profile = batch_profile(lines, 0 if variant in ("baseline", "stream-stream") else args.users)
                    result["batches"].append(answer["batches"])
                    result["profiles"].append(profile)
                    if profile:
                        print(f"{'':>14} batches: {describe_profile(profile)}", flush=True)
    finally:
        for child in children.values():
            child.close()
    return result


def ratio_text(ours: float | None, theirs: float | None) -> str:
    if ours is None or theirs is None:
        return "n/a (a run failed its check)"
    return f"{ours / theirs:.3f}"


def rate_text(rate: float | None) -> str:
    return "FAILED" if rate is None else f"{rate:,.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:19092")
    parser.add_argument("--clicks", type=int, default=5_000_000)
    parser.add_argument("--users", type=int, default=100_000, help="users with a region: the table's size")
    parser.add_argument("--views", type=int, default=None, help="stream-stream: views (default: as many as clicks)")
    parser.add_argument("--products", type=int, default=10_000, help="enrich2: products in the global table")
    parser.add_argument("--unknown-share", type=float, default=0.02, help="share of clicks from users without a region")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--master", default="local[2]",
                        help="streamjoin's Spark master (spark://127.0.0.1:17077: a localdev cluster)")  # fmt: skip
    parser.add_argument("--max-per-trigger", default="1500000,100000",
                        help="batch sizes in offsets, a comma list: all variants at the first, "
                             "--more-sizes-variants at the others")  # fmt: skip
    parser.add_argument("--variants", default="baseline,join,join+sum/batch,join+sum,stream-stream")
    parser.add_argument("--more-sizes-variants", default="join", help="variants run at the 2nd.. batch sizes")
    parser.add_argument("--runs", type=int, default=2, help="runs of each engine, alternating (the first is cold)")
    parser.add_argument("--no-kafka-streams", dest="kafka_streams", action="store_false",
                        help="skip the Kafka Streams runs")  # fmt: skip
    parser.add_argument("--ks-threads", type=int, default=2, help="Kafka Streams num.stream.threads")
    parser.add_argument("--ks-commit-interval-ms", type=int, default=1000,
                        help="Kafka Streams commit.interval.ms (flushes the record cache)")  # fmt: skip
    parser.add_argument("--ks-max-task-idle-ms", type=int, default=None,
                        help="Kafka Streams max.task.idle.ms (default: Kafka Streams' own, 0)")  # fmt: skip
    parser.add_argument("--registry-port", type=int, default=18181,
                        help="join/avro: the port of the bench's schema registry (started if not running)")  # fmt: skip
    parser.add_argument("--latency-rate", type=int, default=20_000, help="clicks/s; 0 skips the latency run")
    parser.add_argument("--latency-seconds", type=int, default=60)
    parser.add_argument("--results", default=str(Path(__file__).with_name("results.jsonl")),
                        help="JSON lines file the run is appended to")  # fmt: skip
    parser.add_argument("--child", help=argparse.SUPPRESS)  # internal: a streamjoin child process
    parser.add_argument("--suffix", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.views is None:
        args.views = args.clicks
    if args.child:
        args.max_per_trigger = int(args.max_per_trigger)
        return child_main(args)
    sizes = [int(s.replace("_", "")) for s in args.max_per_trigger.split(",") if s.strip()]
    variants = args.variants.split(",")
    more = [v for v in args.more_sizes_variants.split(",") if v]
    unknown = [v for v in [*variants, *more] if v not in KS_WORKLOAD]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {list(KS_WORKLOAD)}")
    if args.kafka_streams:
        subprocess.run(["bash", str(KS_BUILD)], check=True)
    suffix = "-bench-" + uuid.uuid4().hex[:6]
    topics = input_topics(suffix)
    make_topics(args.bootstrap, {topics["clicks"]: False, topics["regions"]: True, topics["views"]: False},
                args.partitions)  # fmt: skip
    avro = bool(AVRO & {*variants, *more})
    registry, started_registry = start_registry(args.registry_port) if avro else (None, False)
    args.registry_url = registry.url if registry is not None else None
    try:
        return bench(args, suffix, topics, sizes, variants, more, avro)
    finally:
        if started_registry and registry is not None:
            registry.stop()


def bench(args: argparse.Namespace, suffix: str, topics: dict[str, str], sizes: list[int], variants: list[str],
          more: list[str], avro: bool) -> int:  # fmt: skip
    """Produce the inputs, run every variant at every size and the latency run, print and record the results."""
    stream_stream = "stream-stream" in variants or "stream-stream" in more
    expected = produce(args.bootstrap, topics["clicks"], topics["regions"], args.users, args.clicks,
                       unknown_share=args.unknown_share, keep_times=stream_stream,
                       keep_last=bool({"table-table", "fk"} & set(variants)))  # fmt: skip
    total = args.clicks + args.users
    print(f"produced {total:,} records in {expected.seconds:.1f}s ({total / expected.seconds:,.0f}/s); "
          f"expected per-region totals {expected.totals}", flush=True)  # fmt: skip
    pairs = 0
    if stream_stream:
        pairs = produce_views(args.bootstrap, topics["views"], args.users, args.views, expected)
        print(f"produced {args.views:,} views; expected {pairs:,} view-click pairs within 10 s", flush=True)
    expected.click_times.clear()
    if avro:
        make_topics(args.bootstrap, {topics["clicks_avro"]: False, topics["regions_avro"]: True}, args.partitions)
        produce_avro(args, topics, expected)
    enrich = None
    if ENRICH & {*variants, *more}:
        make_topics(args.bootstrap, {topics["clicks_json"]: False, topics["products"]: True}, args.partitions)
        enrich = produce_enrich(args.bootstrap, topics["clicks_json"], topics["products"], expected, args.users,
                                args.clicks, args.products, unknown_share=args.unknown_share)  # fmt: skip
        print(f"produced {args.products:,} products (+{args.products // 10:,} updates) and {args.clicks:,} JSON "
              f"clicks in {enrich.seconds:.1f}s; expected per region/category {enrich.totals}", flush=True)  # fmt: skip
    checker = Checker(args.bootstrap, args.partitions, args.registry_url)
    failures: list[str] = []
    results: dict[str, dict[str, Any]] = {}
    for index, size in enumerate(sizes):
        results[str(size)] = {}
        for variant in variants if index == 0 else more:
            print(f"--- {variant} at {size:,} offsets per batch", flush=True)
            answer = enrich if variant in ENRICH and enrich is not None else expected
            try:
                results[str(size)][variant] = bench_size(args, suffix, index, size, variant, answer, pairs,
                                                         checker, failures)  # fmt: skip
            except Exception as error:  # a variant that cannot start fails alone
                failures.append(f"{variant} at {size}: {error!r}")
                print(f"FAILED {variant} at {size:,}/batch: {error!r}", flush=True)
    latency: dict[str, Any] = {}
    if args.latency_rate:
        child = None
        try:
            child = streamjoin_child(args, suffix, "latency", sizes[0])
            latency, _ = child.ask(json.dumps({"op": "latency"}))
        except RuntimeError as error:
            latency = {"problems": [str(error)]}
        finally:
            if child is not None:
                child.close()
        if latency.get("problems"):
            failures.append("latency: " + "; ".join(latency["problems"]))
            print(f"FAILED latency run: {'; '.join(latency['problems'])}", flush=True)
        else:
            p50, p99, n = latency["p50_ms"], latency["p99_ms"], latency["records"]
            print(f"latency at {args.latency_rate:,} clicks/s: p50 {p50:.0f} ms, p99 {p99:.0f} ms "
                  f"({n} records, content checked)", flush=True)  # fmt: skip

    print("\n=== summary (input records/s; ratio = streamjoin / Kafka Streams of the same run) ===")
    for size_key, by_variant in results.items():
        for variant, result in by_variant.items():
            ours, theirs = result["streamjoin"], result["kafka_streams"]
            print(f"{variant} at {int(size_key):,} offsets/batch:")
            for run, rate in enumerate(ours):
                ks = theirs[run] if run < len(theirs) else None
                kind = "cold JVM" if run == 0 else "warm"
                text = f"  run {run + 1} ({kind}): streamjoin {rate_text(rate)}"
                if args.kafka_streams:
                    text += f", Kafka Streams {rate_text(ks)}, ratio {ratio_text(rate, ks)}"
                print(text)
        if "join" in by_variant and "join/avro" in by_variant:  # the last runs' rates: Avro's cost on each engine
            engines = ["streamjoin", "kafka_streams"] if args.kafka_streams else ["streamjoin"]
            costs = {e: ratio_text(*(by_variant[v][e][-1] if by_variant[v][e] else None for v in ("join/avro", "join")))
                     for e in engines}  # fmt: skip
            print(f"Avro over strings at {int(size_key):,} offsets/batch (join/avro rate / join rate, last run): "
                  + ", ".join(f"{e} {c}" for e, c in costs.items()))  # fmt: skip
    first = results[str(sizes[0])] if sizes else {}

    def pick(engine: str, run: int) -> dict[str, float | None]:
        """Each variant's rate of run ``run`` (0 the first, -1 the last) at the first size; None if failed."""
        return {v: r[engine][run] if r[engine] else None for v, r in first.items()}

    record = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "clicks": args.clicks, "users": args.users,
            "views": args.views if stream_stream else 0, "partitions": args.partitions,
            "max_per_trigger": sizes[0] if sizes else None, "runs": args.runs,
            "rates": pick("streamjoin", -1), "first_rates": pick("streamjoin", 0),
            "kafka_streams_rates": pick("kafka_streams", -1) if args.kafka_streams else {},
            "kafka_streams_first_rates": pick("kafka_streams", 0) if args.kafka_streams else {},
            "content_checked": True, "failures": failures, "expected_totals": expected.totals, "pairs": pairs,
            "products": args.products if enrich else 0, "enrich2_totals": enrich.totals if enrich else {},
            "jvm_per_variant": True, "sizes": results, "latency": latency}  # fmt: skip
    with open(args.results, "a") as out:
        out.write(json.dumps(record) + "\n")
    if failures:
        print(f"\n{len(failures)} FAILED:")
        for failure in failures:
            print(f"  {failure}")
        return 1
    print("\nall content checks passed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
