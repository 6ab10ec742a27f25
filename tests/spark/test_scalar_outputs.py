"""Scalar outputs: a ``select`` of one expression, or a function joiner returning a scalar, is written as
the declared ``value_format`` (``string``, ``long`` as Java's LongSerializer, ``json``): records produced
to a real broker, one available-now run of the streaming job, the output topic's bytes decoded."""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streamjoin.core.codec import decode, encode
from streamjoin.core.records import Record
from streamjoin.core.reference import ReferenceEngine
from streamjoin.core.spec import Format, parse_spec
from streamjoin.core.topic_plan import plan_topics
from streamjoin.kafka.admin import ensure_topics
from streamjoin.kafka.clients import consume_all, produce_records

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

#: page views (stream) left-joined with profiles (table), seed 003's shape
EVENTS = [
    Record("profiles", "bob", "eu-west", 0),
    Record("views", "alice", "/home", 1000),
    Record("views", "bob", "/products", 2000),
    Record("profiles", "alice", "us-east", 2500),
    Record("views", "alice", "/cart", 3000),
]

#: (joiner, value_format, the same joiner in Python for the reference engine, the bytes of the first result)
CASES: dict[str, tuple[dict[str, str], Format, Callable[..., Any] | None, bytes]] = {
    "select-string": (
        {"select": "concat(left, ',', coalesce(right, '<unknown>'))"},
        Format.STRING,
        lambda k, left, right: f"{left},{right if right is not None else '<unknown>'}",
        b"/home,<unknown>",
    ),
    "select-long": ({"select": "length(left)"}, Format.LONG, lambda k, left, right: len(left), struct.pack(">q", 5)),
    "select-json": (
        {"select": "coalesce(right, 'none')"}, Format.JSON, lambda k, left, right: right or "none", b'"none"',
    ),
    "function-string": (
        {"function": "streamjoin.examples.functions:page_with_region"}, Format.STRING, None, b"/home,<unknown>",
    ),
    "function-long": (
        {"function": "streamjoin.examples.functions:page_length"}, Format.LONG, None, struct.pack(">q", 5),
    ),
    "function-json": (
        {"function": "streamjoin.examples.functions:page_with_region"}, Format.JSON, None, b'"/home,<unknown>"',
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_scalar_output_on_kafka(
    case: str, spark: Any, kafka_bootstrap: str, topic_factory: Callable[[str], str], tmp_path: Path
) -> None:
    from streamjoin.spark.job import JobSettings, run_stream

    joiner, fmt, python_joiner, first_bytes = CASES[case]
    names = {t: topic_factory(t) for t in ("views", "profiles", "out", "dlq")}
    spec = parse_spec(
        {
            "name": "scalar_outputs",
            "kafka": {"partitions": 1},
            "inputs": {
                "views": {"topic": names["views"], "role": "stream"},
                "profiles": {"topic": names["profiles"], "role": "table"},
            },
            "join": {"shape": "stream-table", "kind": "left", "left": "views", "right": "profiles", "joiner": joiner},
            "output": {"topic": names["out"], "value_format": fmt.value},
            "dead_letter_topic": names["dlq"],
        },
        case,
    )
    ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan_topics(spec))
    base = int(time.time() * 1000) - 60_000
    produce_records(
        kafka_bootstrap,
        [(names[r.topic], r.key.encode(), encode(r.value, Format.STRING), base + r.ts, []) for r in EVENTS],
    )
    settings = JobSettings(bootstrap=kafka_bootstrap, checkpoint_dir=str(tmp_path / "ck"), available_now=True,
                           home=str(tmp_path))  # fmt: skip
    run_stream(spark, spec, settings)

    records = consume_all(kafka_bootstrap, names["out"], timeout=30)
    assert records and bytes(records[0].value or b"") == first_bytes
    got = [(r.key.decode() if r.key else None, decode(r.value, fmt)) for r in records]
    overrides = {"joiner": python_joiner} if python_joiner else {}
    reference = ReferenceEngine(spec, overrides).replay_batch(
        [Record(names[r.topic], r.key, r.value, r.ts) for r in EVENTS]
    )
    assert got == [(e.key, e.value) for e in reference]
    assert all(not isinstance(value, dict) for _, value in got)
