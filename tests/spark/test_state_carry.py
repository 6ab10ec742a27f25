"""State carried between micro-batches through the StateStore equals processing everything at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.spec import load_spec
from streamjoin.demo.sample import EXPECTED_TOTALS, sample_records
from streamjoin.spark.engine import SMALL_STATES, process_batch, state_schemas
from streamjoin.spark.replay import raw_frame
from streamjoin.spark.state import StateStore

SPEC = load_spec(PROJECT_HOME / "include/pipelines/clicks_per_region.yaml")


@pytest.mark.spark
def test_two_micro_batches_with_stored_state_give_the_one_batch_totals(spark, tmp_path: Path) -> None:
    rows = [{"topic": r.topic, "key": r.key, "value": r.value, "ts": 10_000 + r.offset_ms} for r in sample_records()]
    raw = raw_frame(spark, SPEC, rows, batch=True)  # offsets per topic-partition, as Kafka assigns them
    store = StateStore(tmp_path / "state", small=SMALL_STATES)
    totals: dict[str, int] = {}
    for batch_id, (lo, hi) in enumerate([(0, 20_000), (20_000, 10**9)]):
        part = raw.filter((raw.ts - 10_000 >= lo) & (raw.ts - 10_000 < hi))
        out = process_batch(part, SPEC, store.load(spark, batch_id, state_schemas(SPEC)))
        assert out.aggregates is not None
        for row in out.aggregates.orderBy("__pos", "__input", "__partition", "__offset").collect():
            totals[row["key"]] = row["value"]
        store.save(batch_id, out.state)
    assert totals == EXPECTED_TOTALS
    # a replayed batch 1 starts from batch 0's state again: same result, no double counting
    replayed = process_batch(raw.filter(raw.ts - 10_000 >= 20_000), SPEC, store.load(spark, 1, state_schemas(SPEC)))
    assert replayed.aggregates is not None
    assert {r["key"]: r["value"] for r in replayed.aggregates.collect()}["asia"] == EXPECTED_TOTALS["asia"]


@pytest.mark.spark
def test_an_unchanged_state_is_referenced_not_rewritten_and_survives_pruning(spark, tmp_path: Path) -> None:
    schemas = {"order": "topic string, __partition int, max_ts long", "table": "key string, rval string, rts long"}
    store = StateStore(tmp_path / "state", keep=2, small={"order"})
    table = spark.createDataFrame([("alice", "europe", 1), ("bob", "asia", 2)], schemas["table"])
    store.save(0, {"order": spark.createDataFrame([("clicks", 0, 5)], schemas["order"]), "table": table})
    for batch_id in range(1, 5):
        state = store.load(spark, batch_id, schemas)
        order = spark.createDataFrame([("clicks", 0, 5 + batch_id)], schemas["order"])
        store.save(batch_id, {"order": order, "table": state["table"]})  # the very frame loaded: unchanged
    versions = sorted(p.name for p in (tmp_path / "state").iterdir())
    assert versions == ["v=0", "v=3", "v=4"]  # v=0 only keeps the table dataset the newer versions refer to
    assert sorted(p.name for p in (tmp_path / "state" / "v=0").iterdir()) == ["table"]
    assert (tmp_path / "state" / "v=4" / "table.ref").read_text() == "v=0/table"
    state = store.load(spark, 5, schemas)
    assert sorted(tuple(r) for r in state["table"].collect()) == [("alice", "europe", 1), ("bob", "asia", 2)]
    assert [tuple(r) for r in state["order"].collect()] == [("clicks", 0, 9)]
