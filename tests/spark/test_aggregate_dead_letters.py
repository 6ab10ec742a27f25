"""Aggregate dead letters with one update per group per micro-batch (``emit: per_batch``): the join
results with a null group or a null amount are dead-lettered carrying the result and add nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_spark_scenarios import spark_replay

from scenario_loader import SCENARIO_DIR, load_scenario
from streamjoin.core.spec import parse_spec

pytestmark = pytest.mark.spark


def test_per_batch_aggregate_dead_letters_carry_the_join_result(spark: Any) -> None:
    scenario = load_scenario(SCENARIO_DIR / "stream_table_left_sum_dead_letters.yaml")
    data = scenario.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["aggregate"]["emit"] = "per_batch"
    spec = parse_spec(data)
    got = spark_replay(spark, spec, scenario.inputs)
    aggregates = sorted((r.key, r.value, r.ts) for r in got if r.topic == "qty-per-region")
    assert aggregates == [("asia", 15, 5000), ("europe", 4, 4000)]
    dead = sorted(
        (r.key, json.loads(r.value), r.ts, dict(r.headers)["reason"], dict(r.headers)["source_topic"])
        for r in got
        if r.topic == spec.dead_letter_topic
    )
    assert dead == [
        ("alice", {"left": {"qty": None}, "right": "asia"}, 3000, "null-amount", "clicks-with-regions"),
        ("eve", {"left": {"qty": 5}, "right": None}, 2000, "null-group", "clicks-with-regions"),
    ]
