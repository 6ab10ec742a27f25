"""Kafka -> join -> Kafka throughput of the seed's clicks x regions pipeline, next to a baseline measured
in the same run: the same Spark job shape that only consumes the clicks and produces them again.

    .venv/bin/python bench/bench_join.py --bootstrap 127.0.0.1:19092 --clicks 5000000 --users 100000

Prints records/s for each variant and the ratio join/baseline; appends a JSON line to bench/results.jsonl.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka.admin import AdminClient, NewTopic

from produce_clicks import produce
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
    """Consume + produce with no join, through the same Kafka source/sink and foreachBatch path."""

    def copy(batch, batch_id):  # type: ignore[no-untyped-def]
        batch.select("key", "value").write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option(
            "topic", out_topic
        ).save()

    started = time.monotonic()
    query = (
        spark.readStream.format("kafka")  # type: ignore[attr-defined]
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_per_trigger))
        .load()
        .writeStream.option("checkpointLocation", checkpoint)
        .foreachBatch(copy)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:19092")
    parser.add_argument("--clicks", type=int, default=5_000_000)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--max-per-trigger", type=int, default=1_000_000)
    parser.add_argument("--variants", default="baseline,join,join+sum/batch,join+sum")
    args = parser.parse_args()
    suffix = "-bench-" + uuid.uuid4().hex[:6]
    clicks, regions = "user-clicks" + suffix, "user-regions" + suffix
    topics = {clicks: False, regions: True, "enriched-clicks" + suffix: False, "clicks-per-region" + suffix: True,
              "clicks-per-region-dlq" + suffix: False, "raw-copy" + suffix: False}  # fmt: skip
    make_topics(args.bootstrap, topics, args.partitions)
    produced_in = produce(args.bootstrap, clicks, regions, args.users, args.clicks)
    total = args.clicks + args.users
    print(f"produced {total} records in {produced_in:.1f}s ({total / produced_in:,.0f}/s)", flush=True)

    from streamjoin.spark.session import build_session

    spark = build_session("streamjoin-bench", master="local[2]", shuffle_partitions=args.partitions,
                          extra_conf={"spark.ui.enabled": "false", "spark.driver.memory": "6g"})  # fmt: skip
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for variant in args.variants.split(","):
            checkpoint = f"{tmp}/{variant}"
            if variant == "baseline":
                seconds = run_baseline(
                    spark, clicks, "raw-copy" + suffix, args.bootstrap, checkpoint, args.max_per_trigger
                )
                rate = args.clicks / seconds
            else:
                spec = bench_spec(suffix, variant, args.max_per_trigger)
                seconds = run_query(spark, spec, args.bootstrap, checkpoint)
                rate = total / seconds
            results[variant] = rate
            print(f"{variant:>10}: {seconds:7.1f}s  {rate:12,.0f} input records/s", flush=True)
    if "baseline" in results:
        for variant, rate in results.items():
            if variant != "baseline":
                print(f"ratio {variant}/baseline: {rate / results['baseline']:.2f}")
    line = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "clicks": args.clicks, "users": args.users,
            "partitions": args.partitions, "max_per_trigger": args.max_per_trigger, "rates": results}  # fmt: skip
    with open(Path(__file__).with_name("results.jsonl"), "a") as out:
        out.write(json.dumps(line) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
