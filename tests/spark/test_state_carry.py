"""State carried between micro-batches through the StateStore equals processing everything at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.spec import load_spec
from streamjoin.core.storage import LocalStorage
from streamjoin.demo.sample import EXPECTED_TOTALS, sample_records
from streamjoin.spark.engine import process_batch, state_schemas, state_store
from streamjoin.spark.layers import KeyedLayers
from streamjoin.spark.replay import raw_frame
from streamjoin.spark.state import StateStore

SPEC = load_spec(PROJECT_HOME / "include/pipelines/clicks_per_region.yaml")


@pytest.mark.spark
def test_two_micro_batches_with_stored_state_give_the_one_batch_totals(spark, tmp_path: Path) -> None:
    rows = [{"topic": r.topic, "key": r.key, "value": r.value, "ts": 10_000 + r.offset_ms} for r in sample_records()]
    raw = raw_frame(spark, SPEC, rows, batch=True)  # offsets per topic-partition, as Kafka assigns them
    store = state_store(str(tmp_path / "state"), LocalStorage())
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


TABLE = "key string, rval string, rts long, tomb boolean"


def _table(store: StateStore, spark, batch_id: int) -> KeyedLayers:
    return store.load(spark, batch_id, {"table": TABLE})["table"]


def _lookup(table: KeyedLayers, spark, keys: list[str]) -> dict[str, str]:
    found = table.lookup(spark.createDataFrame([(k,) for k in keys], "key string"))
    return {row["key"]: row["rval"] for row in found.collect()}


@pytest.mark.spark
def test_a_layered_table_writes_only_its_changes_and_merges_when_they_outweigh_it(spark, tmp_path: Path) -> None:
    root = tmp_path / "state"
    store = StateStore(root, keep=2, layered={"table"})
    base = [(f"user{i}", f"r{i % 5}", i, False) for i in range(1000)]
    store.save(0, {"table": KeyedLayers(TABLE).with_layer(spark.createDataFrame(base, TABLE))})
    expected = {key: value for key, value, _, _ in base}
    # small changes: a deletion, an update, a new key; each version adds one layer and refers to the older ones
    changes = [
        [("user1", None, 5, True)],
        [("user2", "changed", 6, False), ("new", "r9", 7, False)],
        [("user1", "back", 8, False)],
    ]
    for batch_id, rows in enumerate(changes, start=1):
        table = _table(store, spark, batch_id)
        store.save(batch_id, {"table": table.with_layer(spark.createDataFrame(rows, TABLE))})
        for key, value, _, tomb in rows:
            expected.pop(key) if tomb else expected.update({key: value})
        listed = (root / f"v={batch_id}" / "table.layers").read_text()
        assert listed == '["v=0/table-0", ' + ", ".join(f'"v={v}/table-{v}"' for v in range(1, batch_id + 1)) + "]"
    assert sorted(p.name for p in root.iterdir()) == ["v=0", "v=1", "v=2", "v=3"]  # older ones kept: referenced
    restarted = StateStore(root, layered={"table"})  # a new store, as after a restart
    wanted = {"user1": "back", "user2": "changed", "new": "r9", "user7": "r2"}
    assert _lookup(_table(restarted, spark, 4), spark, ["user1", "user2", "new", "user7", "x"]) == wanted
    restarted.close()
    # a change bigger than the table: merged into one layer, deletions gone; the old layers are pruned
    more = [(f"more{i}", "m", 9, False) for i in range(1500)] + [("user3", None, 9, True)]
    store.save(4, {"table": _table(store, spark, 4).with_layer(spark.createDataFrame(more, TABLE))})
    assert (root / "v=4" / "table.layers").read_text() == '["v=4/table"]'
    expected |= {key: value for key, value, _, _ in more}
    del expected["user3"]
    store.save(5, {"table": _table(store, spark, 5)})
    assert sorted(p.name for p in root.iterdir()) == ["v=4", "v=5"]
    restarted = StateStore(root, layered={"table"})
    merged = _table(restarted, spark, 6)
    assert {r["key"]: r["rval"] for r in merged.merged().collect()} == expected
    assert not merged.layers[0].filter("tomb").count()
    restarted.close()
    store.close()


@pytest.mark.spark
def test_a_table_written_before_layers_is_read_as_the_first_layer(spark, tmp_path: Path) -> None:
    root = tmp_path / "state"
    old = StateStore(root, small={"order"})  # the layout of earlier releases: a plain dataset, no tomb column
    rows = spark.createDataFrame([("alice", "europe", 1), ("bob", "asia", 2)], "key string, rval string, rts long")
    old.save(0, {"table": rows})
    store = StateStore(root, layered={"table"})
    table = _table(store, spark, 1)
    assert _lookup(table, spark, ["alice", "bob"]) == {"alice": "europe", "bob": "asia"}
    store.save(1, {"table": table.with_layer(spark.createDataFrame([("bob", None, 3, True)], TABLE))})
    store.close()
    restarted = StateStore(root, layered={"table"})
    assert _lookup(_table(restarted, spark, 2), spark, ["alice", "bob"]) == {"alice": "europe"}
    restarted.close()


@pytest.mark.spark
def test_a_state_written_by_the_other_engine_is_refused_not_started_over(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The DataFrame engine keeps the seed's table and order as files; the kernel keeps its table in Spark's
    state store. Loaded by the other engine, the state would be empty: the table lost without a word."""
    import json

    from streamjoin.core.errors import StateLayoutError
    from streamjoin.spark.kernel import ENGINE_ENV

    rows = [{"topic": r.topic, "key": r.key, "value": r.value, "ts": 10_000 + r.offset_ms} for r in sample_records()]
    monkeypatch.setenv(ENGINE_ENV, "dataframe")
    store = state_store(str(tmp_path / "state"), LocalStorage())
    out = process_batch(raw_frame(spark, SPEC, rows[:10], batch=True), SPEC, store.load(spark, 0, state_schemas(SPEC)))
    store.save(0, out.state)
    out.release()
    manifest = tmp_path / "state" / "v=0" / "_COMMITTED"
    for listed in (True, False):  # a manifest that lists its states, and one written before they were listed
        if not listed:
            manifest.write_text(
                json.dumps({k: v for k, v in json.loads(manifest.read_text()).items() if k != "states"})
            )
        monkeypatch.setenv(ENGINE_ENV, "dataframe")
        assert set(store.load(spark, 1, state_schemas(SPEC))) == {"order", "table", "agg"}
        monkeypatch.setenv(ENGINE_ENV, "kernel")
        with pytest.raises(StateLayoutError) as caught:
            store.load(spark, 1, state_schemas(SPEC))
        error = caught.value
        assert (error.version, error.found, error.expected, error.engine) == (
            0,
            ["agg", "order", "table"],
            [],  # the kernel keeps the join's and the aggregate's state in Spark's state store
            "kernel",
        )
        assert error.engine == "kernel" and not error.transient
        assert "move the checkpoint aside and reprocess from the topics" in str(error)
    store.close()
