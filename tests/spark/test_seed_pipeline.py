"""Seed 000 through the Spark engine (the production spec with Spark SQL joiner/selectors), no Kafka."""

from __future__ import annotations

from typing import Any

import pytest

from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.spec import load_spec
from streamjoin.demo.sample import EXPECTED_TOTALS, sample_records
from streamjoin.spark.replay import replay

SPEC = load_spec(PROJECT_HOME / "include/pipelines/clicks_per_region.yaml")

#: region totals after each click, as the stream-table semantics imply (see streamjoin.demo.sample)
EXPECTED_CHANGELOG = [
    ("europe", 13), ("americas", 4), ("asia", 20), ("europe", 20), ("americas", 7), ("UNKNOWN", 9),
    ("asia", 25), ("europe", 26), ("africa", 2),
]  # fmt: skip


def records() -> list[dict[str, Any]]:
    return [{"topic": r.topic, "key": r.key, "value": r.value, "ts": 1_000_000 + r.offset_ms} for r in sample_records()]


@pytest.mark.spark
@pytest.mark.parametrize("batch", [False, True], ids=["file-order", "one-batch"])
def test_clicks_per_region_changelog_and_final_table(spark, batch: bool) -> None:
    emitted = replay(spark, SPEC, records(), batch=batch)
    changelog = [(r["key"], r["value"]) for r in emitted if r["topic"] == "clicks-per-region"]
    assert changelog == EXPECTED_CHANGELOG, f"expected {EXPECTED_CHANGELOG}\n   got {changelog}"
    assert dict(changelog) == EXPECTED_TOTALS
    enriched = [(r["key"], r["value"]["region"]) for r in emitted if r["topic"] == "enriched-clicks"]
    assert ("bob", "americas") in enriched and ("bob", "asia") in enriched  # the region change splits bob
    assert ("frank", "UNKNOWN") in enriched and ("frank", "africa") in enriched  # click before profile
    dead = [r for r in emitted if r["topic"] == SPEC.dead_letter_topic]
    assert [d["headers"]["reason"] for d in dead] == ["null-value"]


@pytest.mark.spark
def test_tombstone_deletes_the_users_region(spark) -> None:
    rows = [
        {"topic": "user-regions", "key": "ann", "value": "europe", "ts": 1},
        {"topic": "user-clicks", "key": "ann", "value": 2, "ts": 2},
        {"topic": "user-regions", "key": "ann", "value": None, "ts": 3},
        {"topic": "user-clicks", "key": "ann", "value": 5, "ts": 4},
    ]
    emitted = replay(spark, SPEC, rows)
    assert [(r["key"], r["value"]) for r in emitted if r["topic"] == "enriched-clicks"] == [
        ("ann", {"region": "europe", "clicks": 2}),
        ("ann", {"region": "UNKNOWN", "clicks": 5}),
    ]


@pytest.mark.spark
def test_undecodable_value_goes_to_dead_letters_with_reason(spark) -> None:
    from streamjoin.spark.engine import process_batch
    from streamjoin.spark.replay import RAW_SCHEMA
    from streamjoin.spark.state import KernelCheckpoint

    raw = spark.createDataFrame(
        [(b"ann", b"\x00\x01\x02", "user-clicks", 0, 0, 10), (b"ann", (7).to_bytes(8, "big"), "user-clicks", 0, 1, 11)],
        RAW_SCHEMA,
    )
    state = KernelCheckpoint(None)  # a fresh state in a temporary folder
    out = process_batch(raw, SPEC, state)
    dead = out.dead_letters.collect()
    assert [(d["offset"], d["reason"]) for d in dead] == [(0, "undecodable-value: long needs 8 bytes, got 3")]
    assert [(r["key"], r["left"]) for r in out.results.collect()] == [("ann", 7)]
