"""Time to reprocess one day of the seed pipeline (clicks x regions, per-region sum, Parquet day
partitions) from Kafka, next to a baseline measured in the same run: the same day's records read by the
same offset ranges and written as Parquet with no join.

    .venv/bin/python bench/bench_reprocess.py --bootstrap 127.0.0.1:19092 --clicks 1000000 --users 100000

The day's enriched output is checked against the answer the generator computed (one enriched click per
click, per-region sums of their clicks, ``UNKNOWN`` for users without a region): a wrong day prints FAILED
with expected and got, reports no rate and exits 1.

Appends a JSON line to bench/reprocess_results.jsonl.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_join import make_topics
from produce_clicks import Produced, produce
from streamjoin.core.backfill import day_start_ms, plan_day
from streamjoin.core.spec import load_spec, parse_spec

HOME = Path(__file__).resolve().parents[1]


def day_spec(suffix: str, out: Path) -> object:
    data = load_spec(HOME / "include/pipelines/clicks_per_region.yaml").model_dump(mode="json", by_alias=True)
    for spec_input in data["inputs"].values():
        spec_input["topic"] += suffix
    for sink in (data["output"], data["aggregate"]["output"]):
        sink["topic"] += suffix
        sink["files"]["path"] = str(out / sink["topic"])
    data["dead_letter_topic"] += suffix
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
    parser.add_argument("--bootstrap", default="127.0.0.1:19092")
    parser.add_argument("--clicks", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    suffix = "-reproc-" + uuid.uuid4().hex[:6]
    day = datetime.now(UTC).date() - timedelta(days=1)
    with tempfile.TemporaryDirectory() as tmp:
        spec = day_spec(suffix, Path(tmp))
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
        result = reprocess_day(spark, spec, plan, args.bootstrap, home=Path(tmp))  # type: ignore[arg-type]
        problems = check_day(spark, result.paths.get("enriched"), expected)
        if problems:
            print(f"FAILED reprocess of {day}: " + "; ".join(problems))
            return 1
        print(f"content checked: {expected.clicks} enriched clicks, per-region sums {expected.totals}")
    records = args.clicks + args.users
    line = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "day": str(day), "input_rows": result.input_rows,
            "results": result.results, "aggregates": result.aggregates, "seconds": round(result.seconds, 1),
            "rows_per_s": round(result.input_rows / result.seconds), "baseline_seconds": round(baseline, 1),
            "baseline_rows_per_s": round(records / baseline), "content_checked": True}  # fmt: skip
    print(json.dumps(line))
    print(f"ratio reprocess/baseline: {line['rows_per_s'] / line['baseline_rows_per_s']:.3f}")
    with open(Path(__file__).with_name("reprocess_results.jsonl"), "a") as out:
        out.write(json.dumps(line) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
