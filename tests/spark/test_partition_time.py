"""Which dead letters move partition time (the batch order's effective timestamp), as in Kafka Streams: a
record that deserializes but that the join skips (null key) does, an undecodable one does not."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from streamjoin.core.records import Record
from streamjoin.core.reference import ReferenceEngine
from streamjoin.core.spec import parse_spec
from streamjoin.spark.engine import process_batch
from streamjoin.spark.replay import RAW_SCHEMA
from streamjoin.spark.state import KernelCheckpoint

pytestmark = pytest.mark.spark

SPEC = parse_spec(
    {
        "name": "views_profiles",
        "inputs": {
            "views": {"topic": "views", "role": "stream", "value": {"format": "long"}},
            "profiles": {"topic": "profiles", "role": "table"},
        },
        "join": {"shape": "stream-table", "kind": "inner", "left": "views", "right": "profiles"},
        "output": {"topic": "out"},
        "dead_letter_topic": "dlq",
    }
)


def _run(spark: Any, first_view: tuple[bytes | None, bytes]) -> list[tuple[Any, int]]:
    """views p0: the given record at 10 s, then alice's view at 2 s; profiles p0: alice at 5 s."""
    rows = [
        (first_view[0], first_view[1], "views", 0, 0, 10_000),
        (b"alice", struct.pack(">q", 1), "views", 0, 1, 2_000),
        (b"alice", b"eu-west", "profiles", 0, 0, 5_000),
    ]
    state = KernelCheckpoint(None)  # a fresh state in a temporary folder
    out = process_batch(spark.createDataFrame(rows, RAW_SCHEMA), SPEC, state)
    got = [(r["key"], r["ts"]) for r in out.results.collect()]
    out.release()
    return got


def test_a_null_key_record_moves_partition_time_as_in_the_reference(spark: Any) -> None:
    # partition time 10 s when alice's view is picked: the profile from 5 s goes first and joins
    got = _run(spark, (None, struct.pack(">q", 1)))
    records = [
        Record("views", None, 1, 10_000),
        Record("views", "alice", 1, 2_000),
        Record("profiles", "alice", "eu-west", 5_000),
    ]
    reference = ReferenceEngine(SPEC).replay_batch(records)
    assert got == [(e.key, e.ts) for e in reference if e.topic == "out"] == [("alice", 2_000)]


def test_an_undecodable_record_does_not_move_partition_time(spark: Any) -> None:
    # dropped before partition time: alice's view at 2 s goes before the profile from 5 s and finds none
    assert _run(spark, (b"bob", b"\x01\x02")) == []
