"""The engine kernel (``java/kernel``, the default engine of every shape) on Spark against the reference engine:
a scenario of each shape in batches of one record (versioned tables) or two, its state carried in Spark's state
store between them (every scenario and matrix case runs in small batches on the kernel's rules without Spark:
``tests/oracle/test_kernel_rules.py``); co-partitioned inputs over several partitions, a global table read by
every task, a long windowed stream
(expiry and held results across batches), foreign keys across tasks (the kernel's second stage by foreign key),
the aggregate after the join (its reducer tasks keep the totals: per change in the scenarios, per batch as each
group's last change of the batch), and a batch run again after the driver died between the tasks' store
commits and the batch's own commit (plain with an aggregate, versioned with grace, stream-stream)."""

from __future__ import annotations

import dataclasses
import json
import random
import zlib
from typing import Any

import pytest
from test_batch_cuts import SEED, SEED_FUNCTIONS
from test_spark_scenarios import SCENARIOS, as_records, assert_same, spark_replay

from scenario_loader import Scenario
from streamjoin.core.batch_plan import RecordsIndex, plan_all
from streamjoin.core.ordering import source_orders
from streamjoin.core.records import Emitted, Record
from streamjoin.core.reference import ReferenceEngine
from streamjoin.core.shapes import Shape
from streamjoin.core.spec import PipelineSpec, parse_spec
from streamjoin.spark.kernel import KernelResults, unload
from streamjoin.spark.replay import RAW_SCHEMA, _in_plan, _run, raw_rows, timestamps
from streamjoin.spark.state import KernelCheckpoint, StateStore

pytestmark = pytest.mark.spark
KERNEL = SCENARIOS  # every shape runs on the kernel
#: the scenarios run here in small batches: the most state across batch boundaries of each shape (every scenario
#: runs in one-record batches over three partitions on the kernel's rules without Spark:
#: ``tests/oracle/test_kernel_rules.py``); here the state goes through Spark's state store between batches
SMALL_BATCHES = [s for s in KERNEL if s.name in {
    "stream_table_left_grace_versioned", "stream_stream_left_out_of_order", "stream_globaltable_left_delete",
    "table_table_inner_versioned", "table_table_fk_left_aggregate", "stream_table_left_sum_dead_letters",
}]  # fmt: skip


def test_the_small_batch_scenarios_cover_every_shape() -> None:
    assert {s.spec.join.shape for s in SMALL_BATCHES} == set(Shape) and len(SMALL_BATCHES) == 6


@pytest.mark.parametrize("scenario", SMALL_BATCHES, ids=str)
def test_a_scenario_on_the_kernel_in_small_batches_equals_the_reference(
    spark: Any, scenario: Scenario
) -> None:
    """The smallest batches that matter: one record each with a versioned table (its grace buffer and
    versions cross every batch boundary), two with a plain one (state and clocks carried through the store
    all the same, for half the Spark batches: each costs seconds in CI). The scenario in one batch is
    ``test_spark_scenarios``' (the kernel is the default engine of these shapes)."""
    expected = ReferenceEngine(scenario.spec).replay_batch(scenario.inputs)
    size = 1 if scenario.spec.right.versioned is not None else 2
    batches: list[int] = []
    cut = spark_replay(spark, scenario.spec, scenario.inputs, batch=True, max_records=size,
                       on_batch=lambda batch_id, _: batches.append(batch_id))  # fmt: skip
    global_topic = scenario.spec.right.topic if scenario.spec.join.shape is Shape.STREAM_GLOBALTABLE else None
    cut_records = [r for r in scenario.inputs if r.topic != global_topic]  # a global table is read whole at once
    assert len(batches) >= -(-len(cut_records) // size)
    assert_same(expected, cut, scenario.spec.dead_letter_topic, f"{scenario.name} in batches of {size}")


def _spread(records: list[Record], partitions: int) -> list[Record]:
    """The records over ``partitions`` co-partitioned partitions (a key's records of both inputs in one)."""
    return [
        Record(r.topic, r.key, r.value, r.ts, partition=zlib.crc32(str(r.key).encode()) % partitions) for r in records
    ]


def test_co_partitioned_inputs_over_several_partitions_equal_the_reference(spark: Any) -> None:
    """The seed's scenario over three partitions, the aggregate's groups across tasks; its pipeline in Spark SQL
    (the shipped spec's form: Python functions cost seconds a batch), the reference with their Python twins."""
    scenario = next(s for s in KERNEL if s.name == "stream_table_left_clicks_per_region")
    records = _spread(scenario.inputs, 3)
    assert len({r.partition for r in records}) == 3
    expected = ReferenceEngine(SEED, functions=SEED_FUNCTIONS).replay_batch(records)
    assert expected == ReferenceEngine(scenario.spec).replay_batch(records)  # the twins are the scenario's
    got = spark_replay(spark, SEED, records, batch=True, max_records=3)
    assert_same(expected, got, SEED.dead_letter_topic, "three partitions in batches of 3")


def test_a_global_table_reaches_every_task(spark: Any) -> None:
    """The global table's records sit in one partition, the views in three: each task keeps a replica of the
    global table, so a view in any partition finds its user's region (key selector over the view's value)."""
    scenario = next(s for s in KERNEL if s.name == "stream_globaltable_left_key_selector")
    table = scenario.spec.right.topic
    views = iter(range(len(scenario.inputs)))
    records = [r if r.topic == table else dataclasses.replace(r, partition=next(views) % 3) for r in scenario.inputs]
    assert len({r.partition for r in records if r.topic != table}) == 3
    expected = ReferenceEngine(scenario.spec).replay_batch(records)
    assert sum(e.value["region"] is not None for e in expected if isinstance(e.value, dict)) >= 3
    got = spark_replay(spark, scenario.spec, records, batch=True, max_records=4)
    assert_same(expected, got, scenario.spec.dead_letter_topic, "views over three partitions in batches of 4")


def _batches(spark: Any, spec: PipelineSpec, records: list[Record], size: int) -> tuple[Any, list[Any]]:
    """The records as Kafka-shaped rows and the plans of the streaming job's batches of ``size`` offsets."""
    rows = raw_rows(spec, as_records(records), batch=True)
    index = RecordsIndex(timestamps(rows))
    plans = plan_all({tp: 0 for tp in index.latest()}, index.latest(), source_orders(spec), index, size)
    return spark.createDataFrame(rows, RAW_SCHEMA), plans


def _run_batches(
    spark: Any, spec: PipelineSpec, raw: Any, plans: list[Any], root: str, crash_at: int | None = None
) -> list[list[dict[str, Any]]]:
    """Each batch's outputs, state carried through a store under ``root``; at batch ``crash_at`` the driver
    dies after the tasks committed their stores (closed: a new JVM has none loaded) and the batch runs again."""
    store = StateStore(root, pipeline=spec.name)
    outputs = []
    for batch_id, plan in enumerate(plans):
        part = raw.filter(_in_plan(plan))
        if batch_id == crash_at:
            lost = _run(spec, part, store.load(batch_id), file_order=False)
            assert lost, "the crashed batch emitted nothing: the test would not see a difference"
            unload(spark, f"{root}/kernel", spec.kafka.partitions)
        outputs.append(_run(spec, part, store.load(batch_id), file_order=False, store=store, batch_id=batch_id))
    unload(spark, f"{root}/kernel", spec.kafka.partitions)
    return outputs


def test_a_per_batch_aggregate_emits_each_groups_last_change_of_the_batch(spark: Any, tmp_path: Any) -> None:
    """One update per group per micro-batch depends on where batches are cut (as Kafka Streams' cache does on
    its commit interval): in every batch, over three partitions, the kernel's reducer tasks emit each group's
    last per-change update of that batch (whose exactness the scenarios check), once, and the same dead
    letters (null group, null amount)."""
    scenario = next(s for s in KERNEL if s.name == "stream_table_left_sum_dead_letters")
    data = scenario.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["aggregate"]["emit"] = "per_batch"
    per_batch_spec, per_change_spec = parse_spec(data), scenario.spec
    assert per_batch_spec.aggregate is not None
    topic, dead = per_batch_spec.aggregate.output.topic, per_batch_spec.dead_letter_topic
    more = [("region-clicks", "alice", {"qty": 1}, 6_000), ("region-clicks", "bob", {"qty": 3}, 6_500),
            ("region-clicks", "alice", {"qty": 4}, 7_000), ("click-regions", "bob", "asia", 7_500),
            ("region-clicks", "bob", {"qty": 2}, 8_000), ("region-clicks", "alice", {"qty": 6}, 8_500)]  # fmt: skip
    records = [*scenario.inputs, *(Record(*r) for r in more)]
    raw, plans = _batches(spark, per_batch_spec, _spread(records, 3), 5)
    per_batch = _run_batches(spark, per_batch_spec, raw, plans, str(tmp_path / "per_batch"))
    per_change = _run_batches(spark, per_change_spec, raw, plans, str(tmp_path / "per_change"))
    repeated = 0
    for batch_id, (batch, changes) in enumerate(zip(per_batch, per_change, strict=True)):
        updates = [(r["key"], r["value"], r["ts"]) for r in batch if r["topic"] == topic]
        last = {r["key"]: (r["key"], r["value"], r["ts"]) for r in changes if r["topic"] == topic}
        assert sorted(updates) == sorted(last.values()), f"batch {batch_id}"
        repeated += sum(r["topic"] == topic for r in changes) - len(last)
        letters = [r for r in batch if r["topic"] == dead]
        assert letters == [r for r in changes if r["topic"] == dead], f"batch {batch_id}"
    assert repeated > 0, "no group changed twice in a batch: per batch would equal per change"
    assert any(r["topic"] == dead for batch in per_batch for r in batch)


#: a batch of each kind of state whose run is crashed and run again: the seed's join and aggregate (in Spark SQL,
#: the shipped spec's form, the reference given its Python twins), a versioned table with grace, a window
CRASHED = ["stream_table_left_clicks_per_region", "stream_table_left_grace_versioned",
           "stream_stream_left_out_of_order"]  # fmt: skip


@pytest.mark.parametrize("name", CRASHED)
def test_a_batch_run_again_after_the_driver_died_before_its_commit_gives_the_same_outputs(
    spark: Any, tmp_path: Any, name: str
) -> None:
    """Batch k's tasks commit their stores (version k + 1), then the driver dies before it saves the batch:
    the stores are closed (a new JVM has none loaded) and batch k runs again from the saved version. Its
    outputs, and every later batch's (which read the state it left), are those of a run without the crash."""
    scenario = next(s for s in KERNEL if s.name == name)
    seed = name == "stream_table_left_clicks_per_region"
    spec, functions = (SEED, SEED_FUNCTIONS) if seed else (scenario.spec, None)
    raw, plans = _batches(spark, spec, _spread(scenario.inputs, 2), 3)
    crash = len(plans) // 2
    assert crash > 0
    clean = _run_batches(spark, spec, raw, plans, str(tmp_path / "clean"))
    crashed = _run_batches(spark, spec, raw, plans, str(tmp_path / "crashed"), crash)
    assert crashed == clean
    expected = ReferenceEngine(spec, functions=functions).replay_batch(_spread(scenario.inputs, 2))
    emitted = [_emitted(r, spec) for batch in clean for r in batch]
    assert_same(expected, emitted, spec.dead_letter_topic, "the run without a crash")


def _windowed_records(seed: int, count: int) -> list[Record]:
    """Views and clicks of 6 keys (and a few null keys) over 60 s of event time on a 500 ms clock (so pairs land
    exactly on the window's edges and records exactly at its close), 1 in 5 up to 8 s out of order, over two
    co-partitioned partitions: with windows of seconds, records expire and pending ones close in most batches."""
    rng = random.Random(seed)
    records = []
    for i in range(count):
        topic = rng.choice(["views", "clicks"])
        key = None if rng.random() < 0.03 else rng.choice("ABCDEF")
        ts = (i * 150 - (rng.randrange(8_000) if rng.random() < 0.2 else 0)) // 500 * 500
        partition = 0 if key is None else zlib.crc32(key.encode()) % 2
        records.append(Record(topic, key, f"{topic[0]}{i}", max(ts, 0), partition=partition))
    return records


@pytest.mark.parametrize("kind", ["inner", "left", "outer"])
def test_a_long_windowed_stream_in_batches_on_the_kernel_equals_the_reference(
    spark: Any, kind: str
) -> None:
    """400 records through a stream-stream join with before 3 s, after 2 s, grace 1 s, in batches of about 40:
    window records expire from the kernel's store by its time buckets and pending ones are released by their
    close-time buckets across batch boundaries, out-of-order records and null keys (KIP-962) among them."""
    spec = parse_spec({
        "name": f"views_clicks_{kind}",
        "inputs": {"views": {"topic": "views", "role": "stream"}, "clicks": {"topic": "clicks", "role": "stream"}},
        "join": {"shape": "stream-stream", "kind": kind, "left": "views", "right": "clicks",
                 "window": {"before": "3s", "after": "2s"}, "grace": "1s"},
        "output": {"topic": "views-with-clicks"},
        "dead_letter_topic": "views-clicks-dlq",
        "kafka": {"partitions": 2},
    })  # fmt: skip
    records = _windowed_records(seed=len(kind), count=400)
    expected = ReferenceEngine(spec).replay_batch(records)
    assert sum(e.topic == "views-with-clicks" for e in expected) > 100
    got = spark_replay(spark, spec, records, batch=True, max_records=40)
    assert_same(expected, got, spec.dead_letter_topic, f"{kind} join in batches of 40")


@pytest.mark.parametrize("kind", ["inner", "left"])
def test_foreign_keys_across_tasks_in_batches_on_the_kernel_equal_the_reference(
    spark: Any, kind: str
) -> None:
    """150 updates of 12 orders over three partitions pointing at 5 products over two (orders moving between
    products, pointing nowhere, deleted; products renamed and deleted, ones no order points at too), in batches
    of 15: each batch's subscriptions reach the foreign key's task through the
    kernel's second stage, and a product's update fans out to orders of every partition, in key order."""
    scenario = next(s for s in KERNEL if s.name == "table_table_fk_left_aggregate")
    data = scenario.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["join"]["kind"] = kind
    data["kafka"] = {"partitions": 3}
    del data["aggregate"]  # the table aggregate after it: the scenario's (its Python functions cost seconds a batch)
    spec = parse_spec(data)
    rng = random.Random(len(kind))
    records = []
    for i in range(150):
        if rng.random() < 0.6:
            key = f"o{rng.randrange(12)}"
            product = None if rng.random() < 0.1 else f"p{rng.randrange(5)}"
            value = None if rng.random() < 0.15 else {"product": product, "qty": rng.randrange(1, 9)}
            records.append(Record("orders", key, value, 1_000 * i, partition=zlib.crc32(key.encode()) % 3))
        else:
            key = f"p{rng.randrange(5)}"
            value = None if rng.random() < 0.2 else f"name{i}"
            records.append(Record("products", key, value, 1_000 * i, partition=zlib.crc32(key.encode()) % 2))
    expected = ReferenceEngine(spec).replay_batch(records)
    assert sum(e.topic == "orders-with-products" for e in expected) > 80
    got = spark_replay(spark, spec, records, batch=True, max_records=15)
    assert_same(expected, got, spec.dead_letter_topic, f"{kind} foreign-key join in batches of 15")


def _emitted(row: dict[str, Any], spec: PipelineSpec) -> Emitted:
    """A replay row as the reference emits it (a function joiner's value travels as JSON text, decoded as
    ``spark_replay`` does)."""
    value = row["value"]
    if spec.join.joiner.function is not None and row["topic"] == (spec.output.topic or "<join>"):
        value = json.loads(value) if isinstance(value, str) else value
    return Emitted(row["topic"], row["key"], value, row["ts"], tuple((row.get("headers") or {}).items()))


def test_the_kernel_counts_a_batch_as_it_reads_it_as_the_summary_job_does(
    spark: Any, tmp_path: Any
) -> None:
    """A batch's counts and partition times (what the job's history and watermarks are made of) come from the
    kernel's first stage, not from a job of their own, and equal that job's: over three partitions, with an
    undecodable click (counted, rejected, not moving its partition's time) and a null-key one (joined with
    null by the left join, KIP-962: moving it)."""
    from streamjoin.spark.engine import process_batch
    from streamjoin.spark.events import decode_batch, summarize

    scenario = next(s for s in KERNEL if s.name == "stream_table_left_clicks_per_region")
    spec = scenario.spec
    rows = raw_rows(spec, as_records(_spread(scenario.inputs, 3)), batch=True)
    clicks = spec.left.topic
    rows += [(b"zed", b"not a long", clicks, 1, 100, 99_000), (None, (7).to_bytes(8, "big"), clicks, 2, 100, 98_000)]
    raw = spark.createDataFrame(rows, RAW_SCHEMA)
    out = process_batch(raw, spec, KernelCheckpoint(str(tmp_path / "kernel")))
    kernel = next(c for c in out.cached if isinstance(c, KernelResults))
    assert kernel.handle.summary() == "", "counted before the batch ran"
    out.results.count()  # the batch's job
    expected = summarize(decode_batch(raw, spec, spec.model_dump_json()))
    assert out.summary == expected
    assert expected.rejected == 1 and expected.rows == len(rows)
    assert expected.max_ts[(clicks, 1)] != 99_000 and expected.max_ts[(clicks, 2)] == 98_000
    out.release()
    unload(spark, f"{tmp_path}/kernel", spec.kafka.partitions)


def test_a_function_joiners_tombstones_reach_the_output(spark: Any) -> None:
    """A function joiner is called only for results that are not tombstones: its batch program reads the
    results twice (values, tombstones) and unions them, and each branch must get the batch's rows (before the
    fix, the second branch read the program's empty placeholder: a table join with a function joiner lost its
    tombstones)."""
    scenario = next(s for s in KERNEL if s.name == "table_table_outer")
    data = scenario.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["join"]["joiner"] = {"function": "streamjoin.examples.functions:page_with_region"}
    spec = parse_spec(data)
    expected = ReferenceEngine(spec).replay_batch(scenario.inputs)
    assert sum(e.value is None for e in expected) == 1  # E's tombstone
    got = spark_replay(spark, spec, scenario.inputs, batch=True, max_records=6)
    assert_same(expected, got, spec.dead_letter_topic, "a function joiner in batches of 6")
