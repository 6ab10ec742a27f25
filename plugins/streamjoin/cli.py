"""``streamjoin`` command line: ``replay`` runs a spec over a file of records through Spark, no Kafka.

streamjoin replay include/pipelines/X.yaml --events events.jsonl [--out out.jsonl] [--batch [--max-records N]]
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


def _read_events(path: Path) -> list[dict[str, Any]]:
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


def replay_command(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    records = _read_events(Path(args.events))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from streamjoin.spark.replay import replay
    from streamjoin.spark.session import build_session

    spark = build_session(
        "streamjoin-replay", master="local[2]", shuffle_partitions=2, with_kafka=False,
        extra_conf={"spark.ui.enabled": "false"},
    )  # fmt: skip
    emitted = replay(
        spark, spec, records, batch=args.batch or args.max_records is not None, max_records=args.max_records
    )
    lines = [json.dumps(row) for row in emitted]
    if args.out:
        Path(args.out).write_text("".join(f"{line}\n" for line in lines))
        print(f"{len(lines)} records emitted for {len(records)} inputs -> {args.out}", file=sys.stderr)
    else:
        print("\n".join(lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="streamjoin")
    commands = parser.add_subparsers(dest="command", required=True)
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
    args = parser.parse_args(argv)
    if args.max_records is not None and args.max_records < 1:
        parser.error(f"--max-records must be at least 1, got {args.max_records}")
    try:
        return replay_command(args)
    except StreamJoinError as exc:
        print(f"streamjoin: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
