"""The reference engine runs chained joins (``joins:``) and stream-stream self-joins as Kafka Streams' own
multi-join tests expect, record for record (the cases and their sources: ``tests/chained_cases.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from chained_cases import (
    CASES,
    CLICKS_REGIONS_PRODUCTS,
    DASH,
    TABLE_FK_FK_INNER_INNER,
    TABLE_TABLE_TABLE,
    ChainCase,
)
from streamjoin.core.records import Record, final_tables
from streamjoin.core.reference import ReferenceEngine

WITH_EXPECTED = [case for case in CASES if case.expected is not None]


@pytest.mark.parametrize("case", WITH_EXPECTED, ids=str)
def test_each_record_emits_what_kafkas_test_expects(case: ChainCase) -> None:
    engine = ReferenceEngine(case.spec)
    got = [[(row.value, row.ts) for row in engine.process(record) if row.topic == "out"] for record in case.records]
    assert case.expected is not None
    expected = [list(rows) for rows in case.expected]
    differing = [(i, got[i], expected[i]) for i in range(len(expected)) if got[i] != expected[i]]
    assert not differing, f"{case.name} ({case.source}): (input index, reference, Kafka's test): {differing}"


@pytest.mark.parametrize("case", [case for case in CASES if case.last is not None], ids=str)
def test_the_last_result_is_kafkas(case: ChainCase) -> None:
    """The record-cache variants of the table multi-joins: Kafka's test checks only the last result."""
    emitted = [row for row in ReferenceEngine(case.spec).replay(case.records) if row.topic == "out"]
    assert (emitted[-1].value, emitted[-1].ts) == case.last


def test_the_foreign_key_chain_ends_with_kafkas_final_table() -> None:
    case = TABLE_FK_FK_INNER_INNER
    emitted = ReferenceEngine(case.spec).replay(case.records)
    assert final_tables(emitted, exclude=[case.spec.dead_letter_topic]) == {"out": case.final}


def test_an_enriched_click_carries_both_tables_and_the_sum_follows_the_last_stage() -> None:
    case = CLICKS_REGIONS_PRODUCTS
    engine = ReferenceEngine(case.spec, trace=True)
    emitted = engine.replay(case.records)
    first = next(row for row in emitted if row.topic == "out")
    assert (first.key, first.value, first.ts) == ("alice", {"product": "p1", "amount": 3, "region": "eu",
                                                             "category": "books"}, 2)  # fmt: skip
    totals = final_tables(emitted, exclude=["dlq"])["per-region-category"]
    assert totals == {"eu/books": 3, "UNKNOWN/games": 5, "us/games": 7, "eu/OTHER": 1, "asia/games": 2,
                      "UNKNOWN/books": 13, "us/OTHER": 6}  # fmt: skip
    # stage 1's results are stage 2's left records: one per click with a value (a null-key click kept, KIP-962)
    assert [result.key for result, _ in engine.traced[0]] == ["alice", "bob", "bob", "alice", "alice", "alice", None,
                                                              "bob"]  # fmt: skip
    dead = [(row.key, dict(row.headers)["reason"]) for row in emitted if row.topic == "dlq"]
    assert dead == [("bob", "null-value")]


def test_a_record_dropped_by_two_stages_is_one_dead_letter() -> None:
    case = CASES[0]  # A join B join B: a null-value B record is dropped by both stages that read B
    engine = ReferenceEngine(case.spec)
    out = engine.process(Record("right", 0, None, 1))
    assert [(row.topic, dict(row.headers)["reason"]) for row in out] == [("dlq", "null-value")]
    assert engine.counters["dead_lettered"] == 1


def test_a_foreign_key_result_goes_on_in_its_left_keys_task() -> None:
    """orders (partitions 0 and 1) join products by foreign key, then shipments by order id: a product update
    on partition 0 re-joins order o2 of partition 1, whose result joins o2's shipment in task 1."""
    from streamjoin.core.spec import parse_spec

    spec = parse_spec({
        "name": "fk_tasks", "dead_letter_topic": "dlq", "output": {"topic": "out"},
        "inputs": {"orders": {"topic": "orders", "role": "table"}, "products": {"topic": "products", "role": "table"},
                   "shipments": {"topic": "shipments", "role": "table"}},
        "joins": [{"shape": "table-table-fk", "kind": "inner", "left": "orders", "right": "products",
                   "foreign_key": {"function": "chained_cases:points_at"}, "joiner": {"function": DASH}},
                  {"shape": "table-table", "kind": "inner", "right": "shipments", "joiner": {"function": DASH}}],
    })  # fmt: skip
    engine = ReferenceEngine(spec)
    engine.replay([Record("orders", "o2", "p-order", 1, partition=1), Record("shipments", "o2", "box", 2, partition=1)])
    out = engine.process(Record("products", "p", "pen", 3, partition=0))
    assert [(row.key, row.value, row.ts) for row in out] == [("o2", "p-order-pen-box", 3)]


def test_streamjoin_replay_runs_what_the_kernel_refuses_in_the_reference_engine(tmp_path: Any, capsys: Any) -> None:
    """The kernel refuses a table two table-table stages join: ``streamjoin replay`` replays it with the reference
    engine (no Spark)."""
    import json

    import yaml

    from streamjoin.cli import main

    case = TABLE_TABLE_TABLE[0]
    spec_file, events = tmp_path / "chain.yaml", tmp_path / "events.jsonl"
    spec_file.write_text(yaml.safe_dump(case.spec.model_dump(mode="json", by_alias=True, exclude_none=True)))
    events.write_text("".join(json.dumps({"topic": r.topic, "key": r.key, "value": r.value, "ts": r.ts}) + "\n"
                              for r in case.records))  # fmt: skip
    assert main(["replay", str(spec_file), "--events", str(events), "--batch"]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    expected = ReferenceEngine(case.spec).replay_batch(case.records)
    assert out == [row.as_dict() for row in expected] and len(out) > 3
    with pytest.raises(SystemExit, match=r"--max-records is not available yet for this spec .*table-table stages"):
        main(["replay", str(spec_file), "--events", str(events), "--batch", "--max-records", "2"])


