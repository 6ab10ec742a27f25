"""PySpark application run by spark-submit: reprocess past days of one pipeline and publish them.

    spark-submit --jars <connector jars> jobs/reprocess_day.py --spec include/pipelines/X.yaml \\
        --bootstrap 127.0.0.1:9092 --day 2026-11-20 [--day 2026-11-21] --home . [--dry-run] [--stage]
        [--check --dag-id D --run-id R --check-run R-try1 --data-docs-dir DIR [--data-docs-url URL]
         [--force [--reason TEXT] [--user NAME]]]

``--kafka-config FILE`` instead of ``--bootstrap``: the Kafka settings, secrets included, in a private file
that is deleted once read. Prints one ``streamjoin reprocess {...}`` JSON line per day.

``--check`` (a pipeline with a quality suite): each day is staged, checked against the suite in this
application's Spark session and published, quarantined, kept or forced (:mod:`streamjoin.quality.gate`);
what was done is recorded in ``daily/_staging/date=D.outcome.json`` (a ``DayOutcome``, read by the Airflow
task that reports it) and printed as a ``streamjoin check {...}`` line. A failed check is a verdict, not an
error: the application still exits 0.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# The streamjoin package ships next to this file (plugins/) or via --py-files on a cluster.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins"))

from datetime import date

from streamjoin.core.backfill import parse_day, plan_day
from streamjoin.core.plans import resolve
from streamjoin.core.publish import DayOutcome
from streamjoin.core.spec import PipelineSpec, load_spec
from streamjoin.kafka.client_config import KafkaClientConfig
from streamjoin.kafka.connection_check import check_connection
from streamjoin.spark.reprocess import DayResult, reprocess_day
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
    check = parser.add_argument_group("check", "stage, check and publish each day (streamjoin.quality.gate)")
    check.add_argument("--check", action="store_true", help="stage, check, then publish/quarantine/keep each day")
    check.add_argument("--dag-id", default="<outside a DAG run>", help="the Airflow run asking (recorded)")
    check.add_argument("--run-id", default="manual", help="the Airflow run asking (recorded)")
    check.add_argument("--check-run", default=None, help="the check's name (GX run, Data Docs folder)")
    check.add_argument("--data-docs-dir", default="var/data_docs", help="root of the Data Docs (under --home)")
    check.add_argument("--data-docs-url", default=None, help="URL the Data Docs root is served under")
    check.add_argument("--force", action="store_true", help="publish over a failed check (recorded)")
    check.add_argument("--reason", default=None, help="why, with --force")
    check.add_argument("--user", default=None, help="who asked, with --force")
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
    checked = args.check and not args.dry_run
    for day in days:
        result = reprocess_day(spark, spec, plan_day(spec, day), kafka, home=home, dry_run=args.dry_run,
                               stage=args.stage or checked)  # fmt: skip
        print(f"streamjoin reprocess {json.dumps(result.__dict__)}", flush=True)
        print(f"streamjoin progress {spec.name} {result.line()}", flush=True)
        if checked:
            check_day(spark, spec, day, kafka, args, home, result)
    spark.stop()
    return 0


def check_day(
    spark: object, spec: PipelineSpec, day: date, kafka: KafkaClientConfig, args: argparse.Namespace, home: Path,
    reprocessed: DayResult,
) -> DayOutcome:  # fmt: skip
    """Check the staged day in this session, publish it or not, record the outcome for the Airflow task."""
    from streamjoin.quality.gate import GateRequest, check_and_publish

    request = GateRequest(
        dag_id=args.dag_id, run_id=args.run_id, check_run=args.check_run or args.run_id,
        docs_root=resolve(args.data_docs_dir, home), force=args.force, reason=args.reason or None,
        user=args.user or None, docs_base_url=args.data_docs_url or None,
    )  # fmt: skip
    outcome = check_and_publish(spark, spec, day, kafka, request, home=home, reprocessed=reprocessed,
                                say=lambda text: print(f"streamjoin check: {text}", flush=True))  # fmt: skip
    print(f"streamjoin check {json.dumps(outcome.to_json(), default=str)}", flush=True)
    print(f"streamjoin progress {spec.name} {day}: {outcome.consequence}", flush=True)
    return outcome


if __name__ == "__main__":
    raise SystemExit(main())
