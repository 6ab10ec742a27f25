"""PySpark application run by spark-submit: the streaming join of one pipeline spec.

    spark-submit --jars <connector jars> jobs/stream_join.py --spec include/pipelines/X.yaml \\
        --bootstrap 127.0.0.1:9092 --checkpoint var/checkpoints/X [--available-now]

``--kafka-config FILE`` instead of ``--bootstrap``: the connection's settings, secrets included, in a file only
this user can read (``KafkaClientConfig.write_private``), deleted as soon as the job has read it.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

# The streamjoin package ships next to this file (plugins/) or via --py-files on a cluster.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins"))

from streamjoin.core.errors import KafkaAuthenticationError
from streamjoin.core.job_files import JobFailure, PipelineFiles
from streamjoin.core.spec import load_spec
from streamjoin.kafka.client_config import KafkaClientConfig, KafkaTarget
from streamjoin.kafka.connection_check import check_connection
from streamjoin.spark.job import JobSettings, run_stream
from streamjoin.spark.session import build_session


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="stream_join", description=__doc__)
    parser.add_argument("--spec", required=True, help="pipeline spec YAML")
    kafka = parser.add_mutually_exclusive_group(required=True)
    kafka.add_argument("--bootstrap", help="Kafka bootstrap servers (a cluster without security settings)")
    kafka.add_argument("--kafka-config", help="file of Kafka client settings (private; deleted once read)")
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory of this pipeline")
    parser.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    parser.add_argument("--starting-offsets", default="earliest", choices=["earliest", "latest"])
    parser.add_argument("--home", default=None, help="project home: relative output paths resolve against it")
    parser.add_argument("--master", default=None, help="only when run without spark-submit")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the job; an error is recorded in the checkpoint's ``failure.json`` for the owner (restart or alert)
    and ends the process with ``EXIT_TRANSIENT`` or ``EXIT_TERMINAL`` (``streamjoin.core.job_files``)."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    kafka: KafkaClientConfig | None = None
    try:
        kafka = KafkaClientConfig.from_job_arguments(args.bootstrap, args.kafka_config)
        return run(args, kafka)
    except Exception as exc:
        failure = classify(exc, kafka)
        PipelineFiles(Path(args.checkpoint)).record_failure(failure)
        traceback.print_exc()
        then = "a restart from the checkpoint may help" if failure.transient else "a person must act before a restart"
        print(f"streamjoin failed: {failure.describe()} ({then})", file=sys.stderr, flush=True)
        return failure.exit_code


def classify(exc: BaseException, kafka: KafkaTarget | None, timeout: float = 10.0) -> JobFailure:
    """The failure to record for ``exc``. A transient one (Kafka unreachable, a task failed) is checked against
    the cluster first: a password revoked under the running job surfaces in its clients as timeouts and
    failed tasks, which a restart cannot cure; then the refusal is recorded (terminal), naming the original
    error. No answer from the cluster keeps the original."""
    failure = JobFailure.of(exc)
    if not failure.transient or kafka is None:
        return failure
    try:
        check_connection(kafka, timeout=timeout)
    except KafkaAuthenticationError as refused:
        return JobFailure.of(KafkaAuthenticationError(refused.source, f"{refused.reason} (the job failed with "
                                                      f"{failure.error}: {failure.message[:500]})"))  # fmt: skip
    except Exception:  # unreachable or not checkable: what the job saw stands
        pass
    return failure


def run(args: argparse.Namespace, kafka: KafkaClientConfig) -> int:
    spec = load_spec(args.spec)
    check_connection(kafka)  # a refused password fails here, naming the connection
    spark = build_session(f"streamjoin-{spec.name}", master=args.master, shuffle_partitions=spec.kafka.partitions)
    settings = JobSettings(
        bootstrap=kafka,
        checkpoint_dir=args.checkpoint,
        available_now=args.available_now,
        starting_offsets=args.starting_offsets,
        home=args.home or str(Path.cwd()),
    )
    print(f"streamjoin started {spec.name}", flush=True)
    batches = run_stream(spark, spec, settings)
    print(f"streamjoin stopped {spec.name} after {batches} batches", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
