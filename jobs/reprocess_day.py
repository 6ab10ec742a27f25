"""PySpark application run by spark-submit: reprocess past days of one pipeline and publish them.

    spark-submit --jars <connector jars> jobs/reprocess_day.py --spec include/pipelines/X.yaml \\
        --bootstrap 127.0.0.1:9092 --day 2026-11-20 [--day 2026-11-21] --home . [--dry-run] [--stage]

``--kafka-config FILE`` instead of ``--bootstrap``: the Kafka settings, secrets included, in a private file
that is deleted once read. Prints one ``streamjoin reprocess {...}`` JSON line per day.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# The streamjoin package ships next to this file (plugins/) or via --py-files on a cluster.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins"))

from streamjoin.core.backfill import parse_day, plan_day
from streamjoin.core.spec import load_spec
from streamjoin.kafka.client_config import KafkaClientConfig
from streamjoin.kafka.connection_check import check_connection
from streamjoin.spark.reprocess import reprocess_day
from streamjoin.spark.session import build_session


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="reprocess_day", description=__doc__)
    parser.add_argument("--spec", required=True, help="pipeline spec YAML")
    kafka = parser.add_mutually_exclusive_group(required=True)
    kafka.add_argument("--bootstrap", help="Kafka bootstrap servers (a cluster without security settings)")
    kafka.add_argument("--kafka-config", help="file of Kafka client settings (private; deleted once read)")
    parser.add_argument("--day", required=True, action="append", help="UTC day YYYY-MM-DD (repeatable)")
    parser.add_argument("--home", default=None, help="project home: relative output paths resolve against it")
    parser.add_argument("--dry-run", action="store_true", help="count only, write nothing")
    parser.add_argument(
        "--stage", action="store_true", help="write daily/_staging/date=D for a check to publish (not date=D)"
    )
    parser.add_argument("--master", default=None, help="only when run without spark-submit")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    spec = load_spec(args.spec)
    days = [parse_day(d) for d in args.day]
    kafka = KafkaClientConfig.from_job_arguments(args.bootstrap, args.kafka_config)
    check_connection(kafka)  # a refused password fails here, naming the connection
    spark = build_session(
        f"streamjoin-reprocess-{spec.name}", master=args.master, shuffle_partitions=spec.kafka.partitions
    )
    home = Path(args.home or Path.cwd())
    for day in days:
        result = reprocess_day(spark, spec, plan_day(spec, day), kafka, home=home, dry_run=args.dry_run,
                               stage=args.stage)  # fmt: skip
        print(f"streamjoin reprocess {json.dumps(result.__dict__)}", flush=True)
        print(f"streamjoin progress {spec.name} {result.line()}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
