"""Exact at any batch size: a stream cut into micro-batches by event time (as the streaming job cuts it)
gives what one batch gives, and what the reference engine gives in the batch ordering rule."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_spark_scenarios import FAMILIES, as_records, assert_same, exercised, inputs, lacking, pipelines, spark_replay

from streamjoin.core.batch_plan import RecordsIndex, plan_all
from streamjoin.core.ordering import processing_order, source_orders
from streamjoin.core.records import Record
from streamjoin.core.reference import ReferenceEngine
from streamjoin.core.spec import PipelineSpec, parse_spec
from streamjoin.examples import functions as examples
from streamjoin.spark.replay import raw_rows, timestamps

pytestmark = pytest.mark.spark


def in_batches(spec: PipelineSpec, records: list[Record], max_records: int) -> tuple[list[Record], dict[int, int]]:
    """The records numbered as a batch replay numbers them, in the batch ordering rule, and the micro-batch of
    each (by its index in that list) when the replay cuts them into batches of ``max_records``."""
    numbered, counts = [], dict[tuple[str, int], int]()
    for record in records:
        queue = (record.topic, record.partition)
        numbered.append(dataclasses.replace(record, offset=counts.get(queue, 0)))
        counts[queue] = counts.get(queue, 0) + 1
    index = RecordsIndex(timestamps(raw_rows(spec, as_records(records), True)))
    plans = plan_all(dict.fromkeys(index.latest(), 0), index.latest(), source_orders(spec), index, max_records)
    ordered = processing_order(numbered, spec)
    batch_of = {
        n: next(b for b, plan in enumerate(plans) if r.offset < plan.end.get((r.topic, r.partition), 0))
        for n, r in enumerate(ordered)
    }
    return ordered, batch_of


@pytest.mark.parametrize("family", FAMILIES)
def test_random_pipelines_in_random_batch_sizes_equal_the_reference(spark: Any, family: str) -> None:
    """Per shape, at most about 4 batches per example (the planner's own property tests cover every size);
    an example must cut its input and join records of different batches, besides what the shape is about
    (``test_spark_scenarios.needs``): one that does not is drawn again before Spark runs, so a generator that
    turns trivial fails the test (hypothesis: its inputs filtered out) instead of passing it on nothing."""
    check_cuts(spark, family)


@settings(max_examples=1, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def check_cuts(spark: Any, family: str, data: st.DataObject) -> None:
    spec, functions = data.draw(pipelines(family), label="spec")

    def rich(case: tuple[list[Record], int]) -> bool:
        ordered, batch_of = in_batches(spec, *case)
        return not lacking(spec, exercised(spec, functions, ordered, batch_of), {"cut", "across-batches"})

    cut = inputs(spec).flatmap(lambda rs: st.tuples(st.just(rs), st.integers(max(1, len(rs) // 4), max(1, len(rs)))))
    records, size = data.draw(cut.filter(rich), label="records, max_records")
    expected = ReferenceEngine(spec, functions=functions).replay_batch(records)
    got = spark_replay(spark, spec, records, batch=True, max_records=size)
    assert_same(expected, got, spec.dead_letter_topic, f"{spec.join.shape.value} {spec.join.kind.value} / {size}")


#: the seed's pipeline as the shipped spec writes it, in Spark SQL (``include/pipelines/clicks_per_region.yaml``;
#: Python functions would cost seconds a batch); the reference runs the examples' Python equivalents
SEED = parse_spec(
    {
        "name": "clicks_per_region",
        "inputs": {
            "clicks": {"topic": "user-clicks", "role": "stream", "value": {"format": "long"}},
            "regions": {"topic": "user-regions", "role": "table"},
        },
        "join": {
            "shape": "stream-table",
            "kind": "left",
            "left": "clicks",
            "right": "regions",
            "joiner": {"select": {"region": "coalesce(right, 'UNKNOWN')", "clicks": "left"}},
        },
        "aggregate": {
            "group_by": {"expr": "value.region"},
            "reduce": "sum",
            "value": {"expr": "value.clicks"},
            "output": {"topic": "clicks-per-region", "value_format": "long"},
        },
        "output": {"topic": "enriched-clicks"},
        "dead_letter_topic": "clicks-per-region-dlq",
    }
)
SEED_FUNCTIONS = {"joiner": examples.region_or_unknown, "group_by": examples.region, "value": examples.clicks}


def test_an_old_table_backlog_behind_later_clicks_gives_the_exact_totals(spark: Any) -> None:
    """The issue's failure: regions (earlier timestamps) and clicks (later) already on the topics, two
    partitions, small batches. Cut by offsets, the first batches saw few regions; cut by time, every click
    finds its region."""
    users = [f"u{i}" for i in range(12)]
    regions = [
        Record("user-regions", u, ["europe", "asia", "africa"][i % 3], i, partition=i % 2) for i, u in enumerate(users)
    ]
    clicks = [
        Record("user-clicks", u, 1 + (i * 7) % 5, 100 + i, partition=users.index(u) % 2)
        for i, u in enumerate(users * 3)
    ]
    clicks.append(Record("user-clicks", "nobody", 4, 200, partition=0))
    records = clicks + regions  # arrival order does not matter: both are on the topics before the job starts
    expected = _totals(ReferenceEngine(SEED, functions=SEED_FUNCTIONS).replay_batch(records))
    assert expected["UNKNOWN"] == 4 and set(expected) == {"europe", "asia", "africa", "UNKNOWN"}
    for size in (7, 20):
        got = _totals(spark_replay(spark, SEED, records, batch=True, max_records=size))
        assert got == expected, f"batches of {size}: {got} != {expected}"


def _totals(rows: list[Any]) -> dict[str, int]:
    totals = {}
    for row in rows:
        if row.topic == "clicks-per-region":
            totals[row.key] = row.value
    return totals
