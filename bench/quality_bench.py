"""Time the GX 1.x validation of one day of enriched output (default 1 million rows) with the seed's suite.

    .venv/bin/python bench/quality_bench.py --rows 1000000 --master 'local[2]'

Writes the day as Parquet (like the join job), then runs the same path as DataQualityOperator: read the
partition, add the check columns, validate every check of the plan through a GX Checkpoint with Data
Docs. Prints the phases and rows/s; appends a JSON line to bench/quality_results.jsonl. Not run by the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import UTC, date, datetime
from pathlib import Path

HOME = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HOME / "plugins"))

from streamjoin.core.spec import load_spec  # noqa: E402
from streamjoin.quality.suites import build_check_plan, load_settings  # noqa: E402

DAY = date(2026, 1, 2)
REGIONS = ["EU", "NA", "APAC", "LATAM"]


def write_day(spark: object, rows: int, users: int, path: Path) -> None:
    """A clean day: ~4% of users without a region, ts spread over the day, newest 10 min before midnight."""
    from pyspark.sql import functions as F

    start = int(datetime.combine(DAY, datetime.min.time(), UTC).timestamp() * 1000)
    span = 86_400_000 - 600_000
    user = F.col("id") % users
    matched = (user % 25) != 0
    region = F.when(matched, F.element_at(F.array(*map(F.lit, REGIONS)), (user % 4 + 1).cast("int")))
    ts = F.lit(start) + ((F.col("id") + 1) * span / rows).cast("long")
    df = spark.range(rows).select(  # type: ignore[attr-defined]
        F.format_string("u%06d", user).alias("key"),
        F.struct(F.coalesce(region, F.lit("UNKNOWN")).alias("region"), (F.col("id") % 5 + 1).alias("clicks")).alias(
            "value"
        ),
        ts.alias("ts"),
        matched.alias("matched"),
        F.lit("user-clicks").alias("src_topic"),
        (F.col("id") % 4).cast("int").alias("src_partition"),
        (F.col("id") / 4).cast("long").alias("src_offset"),
    )
    df.write.mode("overwrite").parquet(str(path))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the day and Data Docs here")
    args = parser.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from streamjoin.quality.validate import validate_dataframe
    from streamjoin.spark.session import build_session

    spark = build_session(
        "quality-bench",
        master=args.master,
        shuffle_partitions=4,
        with_kafka=False,
        extra_conf={"spark.ui.enabled": "false"},
    )
    spec = load_spec(HOME / "include" / "pipelines" / "clicks_per_region.yaml")
    suite = HOME / "include" / "expectations" / "clicks_per_region.yaml"
    plan = build_check_plan(
        spec, load_settings(suite, spec.name), day=DAY, left_input_count=args.rows, suite_file=str(suite)
    )
    work = args.workdir or Path(tempfile.mkdtemp(prefix="quality-bench-"))
    partition = work / "enriched" / f"date={DAY.isoformat()}"

    t0 = time.perf_counter()
    write_day(spark, args.rows, args.users, partition)
    t1 = time.perf_counter()
    result = validate_dataframe(
        spark.read.parquet(str(partition)), plan, docs_dir=work / "docs", run_id="bench", partition_path=str(partition)
    )
    t2 = time.perf_counter()
    # a second run: the JVM is warm, as in a long-lived worker
    validate_dataframe(spark.read.parquet(str(partition)), plan, docs_dir=work / "docs2", run_id="bench-2")
    t3 = time.perf_counter()

    failed = [(e.name, e.observed_text()) for e in result.failed]
    record = {
        "bench": "quality",
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "rows": result.row_count,
        "checks": len(plan.checks),
        "master": args.master,
        "write_s": round(t1 - t0, 2),
        "validate_s": round(t2 - t1, 2),
        "validate_warm_s": round(t3 - t2, 2),
        "rows_per_s": round(args.rows / (t2 - t1)),
        "rows_per_s_warm": round(args.rows / (t3 - t2)),
        "success": result.success,
        "failed": failed,
    }
    print(f"wrote {args.rows} rows in {record['write_s']} s")
    print(
        f"validated {result.row_count} rows, {len(plan.checks)} checks + Data Docs in {record['validate_s']} s "
        f"({record['rows_per_s']} rows/s); warm: {record['validate_warm_s']} s ({record['rows_per_s_warm']} rows/s)"
    )
    print(f"result: {result.summary()} {failed or ''}")
    with (HOME / "bench" / "quality_results.jsonl").open("a") as out:
        out.write(json.dumps(record) + "\n")
    return 0 if result.success else 1


if __name__ == "__main__":
    raise SystemExit(main())
