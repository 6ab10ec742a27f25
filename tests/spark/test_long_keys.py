"""Long keys on Spark: 8-byte keys decode as longs, other lengths are dead letters (undecodable-key), and
result keys go back to Kafka as 8 bytes big-endian."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from scenario_loader import SCENARIO_DIR, load_scenario
from streamjoin.spark.engine import process_batch
from streamjoin.spark.replay import RAW_SCHEMA
from streamjoin.spark.sinks import kafka_rows
from streamjoin.spark.state import KernelCheckpoint

pytestmark = pytest.mark.spark


def test_long_keys_decode_dead_letter_and_encode(spark: Any) -> None:
    spec = load_scenario(SCENARIO_DIR / "stream_table_left_long_keys.yaml").spec
    long7 = struct.pack(">q", 7)
    rows = [
        (long7, b"ann", "id-names", 0, 0, 0),
        (long7, struct.pack(">q", 3), "id-clicks", 0, 0, 1000),
        (b"\x00\x00\x00\x07", struct.pack(">q", 1), "id-clicks", 0, 1, 2000),  # an int, not a long
    ]
    raw = spark.createDataFrame(rows, RAW_SCHEMA)
    state = KernelCheckpoint(None)  # a fresh state in a temporary folder
    out = process_batch(raw, spec, state, file_order=True)
    results = out.results.collect()
    assert [(r["key"], r["ts"]) for r in results] == [(7, 1000)]
    sink_rows = kafka_rows(out.results, spec.output, "id-clicks-named").collect()
    assert [bytes(r["key"]) for r in sink_rows] == [long7]
    dead = out.dead_letters.collect()
    assert [(bytes(r["key"]), r["reason"]) for r in dead] == [
        (b"\x00\x00\x00\x07", "undecodable-key: long needs 8 bytes, got 4")
    ]
    out.release()
