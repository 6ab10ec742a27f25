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


def test_a_replay_of_long_keys_with_an_aggregate_lists_long_result_keys_and_text_groups(spark: Any) -> None:
    """Replay lists join results (long keys) and aggregate updates (text groups) together: each keeps its type."""
    from test_spark_scenarios import assert_same, spark_replay

    from streamjoin.core.reference import ReferenceEngine
    from streamjoin.core.spec import parse_spec

    scenario = load_scenario(SCENARIO_DIR / "stream_table_left_long_keys.yaml")
    data = scenario.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["aggregate"] = {"group_by": {"expr": "coalesce(value.right, 'nobody')"}, "reduce": "sum",
                         "value": {"expr": "value.left"},
                         "output": {"topic": "per-name", "value_format": "long"}}  # fmt: skip
    spec = parse_spec(data, "test")
    records = list(scenario.inputs)
    got = spark_replay(spark, spec, records)
    functions = {"group_by": lambda key, value: value["right"] or "nobody", "value": lambda key, value: value["left"]}
    want = ReferenceEngine(spec, functions).replay(records)
    assert_same(want, got, spec.dead_letter_topic, "long keys + aggregate")
    assert {type(r.key) for r in got if r.topic == spec.output.topic} == {int}
