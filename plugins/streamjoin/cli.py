"""``streamjoin`` command line.

streamjoin validate include/pipelines/*.yaml [--registry]
                                                  every problem of every spec; exit 1 if any (for CI); with
                                                  --registry, registry inputs' subjects and reader schemas too,
                                                  a warning for registry join keys under two schema ids, and
                                                  each registry output's derived schema checked for
                                                  compatibility with its subject (a local Spark session)
streamjoin plan include/pipelines/X.yaml [--bootstrap B]
                                                  the topics the spec needs, co-partitioning; with a broker:
                                                  which exist, what differs, what provisioning would refuse
streamjoin replay include/pipelines/X.yaml --events events.jsonl [--out out.jsonl] [--batch [--max-records N]]
                                                  what the join emits for a file of records (Spark, no Kafka)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from streamjoin.core.errors import StreamJoinError
from streamjoin.core.spec import load_spec


def read_events(path: Path) -> list[dict[str, Any]]:
    records = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise SystemExit(f"{path}:{number}: not a JSON object: {exc}") from None
        missing = {"topic", "ts"} - set(record)
        if missing:
            raise SystemExit(f"{path}:{number}: missing {sorted(missing)}; lines are {{topic, key, value, ts}}")
        records.append(record)
    return records


def _reference_replay(spec: Any, records: list[dict[str, Any]], args: argparse.Namespace) -> list[dict[str, Any]]:
    """A spec the kernel does not run yet (``join_plan.refusal``: a table two table-table stages join)
    replayed by the reference engine."""
    from streamjoin.core.join_plan import refusal
    from streamjoin.core.records import record_from_dict
    from streamjoin.core.reference import ReferenceEngine

    why = refusal(spec)
    if args.max_records is not None or args.sources:
        option = "--max-records" if args.max_records is not None else "--sources"
        how = "the reference engine replays it: in file order, or with --batch as one batch"
        raise SystemExit(f"{args.spec}: {option} is not available yet for this spec ({how}): {why}")
    print(f"{spec.name}: replayed by the reference engine: {why}", file=sys.stderr)
    engine = ReferenceEngine(spec)
    rows = [record_from_dict(record) for record in records]
    return [row.as_dict() for row in (engine.replay_batch(rows) if args.batch else engine.replay(rows))]


def replay_command(args: argparse.Namespace) -> int:
    from streamjoin.core.join_plan import refusal

    spec = load_spec(args.spec)
    records = read_events(Path(args.events))
    if refusal(spec) is not None:
        return _print_emitted(_reference_replay(spec, records, args), records, args)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from streamjoin.spark.replay import replay
    from streamjoin.spark.session import build_session

    spark = build_session(
        "streamjoin-replay", master="local[2]", shuffle_partitions=2, with_kafka=False,
        extra_conf={"spark.ui.enabled": "false"},
    )  # fmt: skip

    def progress(batch_id: int, plan: Any) -> None:
        print(f"batch {batch_id}: {plan.records} records", file=sys.stderr, flush=True)

    batch = args.batch or args.max_records is not None
    emitted = replay(
        spark, spec, records, batch=batch, max_records=args.max_records, on_batch=progress, sources=args.sources
    )
    return _print_emitted(emitted, records, args)


def _print_emitted(emitted: list[dict[str, Any]], records: list[dict[str, Any]], args: argparse.Namespace) -> int:
    lines = [json.dumps(row) for row in emitted]
    if args.out:
        Path(args.out).write_text("".join(f"{line}\n" for line in lines))
        print(f"{len(lines)} records emitted for {len(records)} inputs -> {args.out}", file=sys.stderr)
    else:
        print("\n".join(lines))
    return 0


def validate_command(args: argparse.Namespace) -> int:
    from streamjoin.core.join_plan import describe_stages
    from streamjoin.core.spec import spec_file_problems

    failed = 0
    for path in args.specs:
        problems: list[Any] = spec_file_problems(path)
        if not problems and args.registry:
            problems = _registry_problems(path) or _output_problems(path)
            for warning in _key_warnings(path):
                print(f"warning: {warning}")
        if problems:
            failed += 1
            for problem in problems:
                print(f"error: {problem}")
        else:
            print(f"ok: {path}")
            print("\n".join(describe_stages(load_spec(path))))
    print(f"{len(args.specs)} specs, {failed} invalid")
    return 1 if failed else 0


def _registry_problems(path: str) -> list[Any]:
    """The spec's registry subjects as its registries hold them (``schema_registry.subject_problems``); a registry
    that does not answer is one problem."""
    from streamjoin.kafka.schema_registry import subject_problems

    try:
        return [f"{path}: {problem}" for problem in subject_problems(load_spec(path))]
    except StreamJoinError as exc:
        return [f"{path}: {exc}"]


def _output_problems(path: str) -> list[Any]:
    """The spec's registry outputs' schemas, derived as the job derives them, checked for compatibility with their
    subjects (``spark.replay.output_problems``). Deriving them needs the job's batch program: a local Spark
    session (``local[1]``, no Kafka) is started here, only for a spec with such an output (pyspark is imported
    here, not when a DAG file parses)."""
    from streamjoin.kafka.schema_registry import registry_outputs

    spec = load_spec(path)
    if not registry_outputs(spec):
        return []
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from streamjoin.spark.replay import output_problems
    from streamjoin.spark.session import build_session

    spark = build_session("streamjoin-validate", master="local[1]", shuffle_partitions=1, with_kafka=False,
                          extra_conf={"spark.ui.enabled": "false"})  # fmt: skip
    try:
        return [f"{path}: {problem}" for problem in output_problems(spark, spec)]
    except StreamJoinError as exc:
        return [f"{path}: {exc}"]


def _key_warnings(path: str) -> list[str]:
    """Registry keys of a key join written under different schema ids (``schema_registry.key_subject_warnings``)."""
    from streamjoin.kafka.schema_registry import key_subject_warnings

    try:
        return [f"{path}: {warning}" for warning in key_subject_warnings(load_spec(path))]
    except StreamJoinError as exc:
        return [f"{path}: {exc}"]


def plan_command(args: argparse.Namespace) -> int:
    from streamjoin.core.repartition import repartitioned
    from streamjoin.core.spec import load_spec
    from streamjoin.core.topic_plan import plan_topics

    spec = load_spec(args.spec)
    plan = plan_topics(spec)
    existing = {}
    if args.bootstrap:
        from streamjoin.kafka.admin import describe_topics

        existing = describe_topics({"bootstrap.servers": args.bootstrap}, plan.names)
    from streamjoin.kafka.admin import check_plan

    outcomes, refusal = check_plan(plan, existing)
    print(f"pipeline {spec.name}: {len(plan.topics)} topics" + (f" at {args.bootstrap}" if args.bootstrap else ""))
    for o in outcomes:
        status = o.status if args.bootstrap else "planned"
        details = f"{o.role}, {o.partitions} partitions, RF {o.replication_factor}, cleanup.policy={o.cleanup_policy}"
        print(f"  {status:8} {o.name} ({details})" + "".join(f"; WARNING: {w}" for w in o.warnings))
    for item in repartitioned(spec):
        internal = next(o for o in outcomes if o.name == item.internal)
        print(f"repartitioned: input {item.input} ({item.source}) -> {item.internal} ({internal.partitions} "
              "partitions, murmur2 of the serialized key): the join reads the internal topic")  # fmt: skip
    for group, members in plan.copartition_groups().items():
        names = ", ".join(t.name for t in members)
        print(f"co-partitioned ({group}): {names}: same partition count and murmur2 key placement required")
    from streamjoin.core.join_plan import describe_stages

    print(f"join stages ({len(spec.stages)}):")
    for line in describe_stages(spec):
        print(line)
    if refusal:
        print(f"refused: {refusal}")
        return 1
    print("co-partitioning: ok" if plan.copartition_groups() else "co-partitioning: not needed by this shape")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="streamjoin")
    commands = parser.add_subparsers(dest="command", required=True)
    validate = commands.add_parser("validate", help="check specs: every problem of each, exit 1 if any")
    validate.add_argument("specs", nargs="+", help="pipeline spec files")
    validate.add_argument("--registry", action="store_true",
                          help="also check registry inputs' subjects (they exist, the reader schema reads every "
                          "version) and registry outputs' derived schemas against their subjects' latest versions "
                          "(starts a local Spark session)")  # fmt: skip
    plan = commands.add_parser("plan", help="the topics a spec needs and whether a broker's topics fit")
    plan.add_argument("spec", help="pipeline spec file")
    plan.add_argument("--bootstrap", help="compare with this broker's topics (read only)")
    replay = commands.add_parser("replay", help="run a spec over a JSONL file of records (no Kafka needed)")
    replay.add_argument("spec", help="pipeline spec, e.g. include/pipelines/clicks_per_region.yaml")
    replay.add_argument("--events", required=True, help="JSONL: {topic, key, value, ts} per line, in arrival order")
    replay.add_argument("--out", help="write the emitted records here (JSONL) instead of stdout")
    replay.add_argument(
        "--batch", action="store_true",
        help="process the file as one micro-batch in the batch ordering rule instead of one record at a time",
    )  # fmt: skip
    replay.add_argument(
        "--max-records", type=int, default=None, metavar="N",
        help="with --batch: micro-batches of N records, cut by event time as the streaming job cuts them",
    )  # fmt: skip
    replay.add_argument(
        "--sources", action="store_true",
        help="add to each output record the input record (topic, partition, offset) that produced it",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.command == "replay" and args.max_records is not None and args.max_records < 1:
        parser.error(f"--max-records must be at least 1, got {args.max_records}")
    command = {"validate": validate_command, "plan": plan_command, "replay": replay_command}[args.command]
    try:
        return command(args)
    except StreamJoinError as exc:
        print(f"streamjoin: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
