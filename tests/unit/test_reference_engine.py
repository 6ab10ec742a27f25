"""The reference engine's wiring: projections, outputs, dead letters, aggregation, tasks, JSONL files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scenario_loader import SCENARIO_DIR, load_scenario
from streamjoin.core.errors import SpecError
from streamjoin.core.records import Emitted, Record, final_tables, read_records, write_emitted
from streamjoin.core.reference import AGGREGATE_TOPIC, JOIN_TOPIC, ReferenceEngine
from streamjoin.core.spec import PipelineSpec, load_spec, parse_spec
from streamjoin.examples import functions

SEED_SPEC = Path(__file__).resolve().parents[2] / "include" / "pipelines" / "clicks_per_region.yaml"
FN = "streamjoin.examples.functions"


def make_spec(**overrides: Any) -> PipelineSpec:
    data: dict[str, Any] = {
        "name": "engine_test",
        "inputs": {"clicks": {"topic": "clicks", "role": "stream"}, "regions": {"topic": "regions", "role": "table"}},
        "join": {"shape": "stream-table", "kind": "left", "left": "clicks", "right": "regions"},
        "output": {"topic": "joined"},
        "dead_letter_topic": "dlq",
    }
    data.update(overrides)
    return parse_spec(data)


def test_spark_sql_projections_need_functions_here() -> None:
    spec = load_spec(SEED_SPEC)
    with pytest.raises(SpecError, match="reference engine cannot evaluate Spark SQL") as info:
        ReferenceEngine(spec)
    assert info.value.path == "join.joiner.select"


def test_the_seed_spec_runs_with_python_stand_ins_for_its_sql() -> None:
    """The shipped seed 000 spec (Spark SQL projections) gives the seed scenario's changelog when the
    reference engine is handed the equivalent Python functions."""
    scenario = load_scenario(SCENARIO_DIR / "stream_table_left_clicks_per_region.yaml")
    engine = ReferenceEngine(
        load_spec(SEED_SPEC),
        functions={"joiner": functions.region_or_unknown, "group_by": functions.region, "value": functions.clicks},
    )
    got = engine.replay(scenario.inputs)
    assert [(e.topic, e.key, e.value, e.ts) for e in got] == [
        (e.topic, e.key, e.value, e.ts) for e in scenario.expected
    ]


def test_an_unimportable_function_names_the_spec_path() -> None:
    spec = make_spec(join={**make_spec().join.model_dump(mode="json"), "joiner": {"function": f"{FN}:nope"}})
    with pytest.raises(SpecError) as info:
        ReferenceEngine(spec)
    assert info.value.path == "join.joiner.function" and "nope" in str(info.value)


def test_functions_may_be_overridden_by_dotted_path() -> None:
    spec = make_spec(join={**make_spec().join.model_dump(mode="json"), "joiner": {"function": f"{FN}:nope"}})
    engine = ReferenceEngine(spec, functions={f"{FN}:nope": lambda key, left, right: [left, right]})
    engine.process(Record("regions", "u", "eu", 0))
    assert engine.process(Record("clicks", "u", 3, 1)) == [Emitted("joined", "u", [3, "eu"], 1)]


def test_without_an_output_topic_results_go_to_placeholder_topics() -> None:
    spec = make_spec(
        output={"files": {"path": "var/x"}},
        aggregate={"group_by": {"function": f"{FN}:one"}, "reduce": "count", "output": {"files": {"path": "var/y"}}},
    )
    out = ReferenceEngine(spec).process(Record("clicks", "u", 3, 1))
    assert out == [Emitted(JOIN_TOPIC, "u", {"left": 3, "right": None}, 1), Emitted(AGGREGATE_TOPIC, 1, 1, 1)]


def test_aggregate_dead_letters_null_groups_and_null_amounts() -> None:
    spec = make_spec(
        join={**make_spec().join.model_dump(mode="json"), "joiner": {"function": f"{FN}:region_or_unknown"}},
        aggregate={
            "group_by": {"function": f"{FN}:region"},
            "reduce": "sum",
            "value": {"function": f"{FN}:clicks"},
            "output": {"topic": "per-region"},
        },
    )
    engine = ReferenceEngine(
        spec, functions={"group_by": lambda key, value: None if key == "nobody" else value["region"]}
    )
    out = engine.process(Record("clicks", "nobody", 3, 1))
    assert out[1] == Emitted(
        "dlq", "nobody", {"region": "UNKNOWN", "clicks": 3}, 1, (("reason", "null-group"), ("source_topic", "joined"))
    )
    engine2 = ReferenceEngine(spec, functions={"value": lambda key, value: None})
    out = engine2.process(Record("clicks", "u", 5, 2))
    assert [e.topic for e in out] == ["joined", "dlq"] and out[1].headers[0] == ("reason", "null-amount")
    assert engine2.counters["dead_lettered"] == 1


def test_count_after_a_table_join_counts_rows() -> None:
    spec = parse_spec(
        {
            "name": "count_rows",
            "inputs": {"a": {"topic": "a", "role": "table"}, "b": {"topic": "b", "role": "table"}},
            "join": {"shape": "table-table", "kind": "outer", "left": "a", "right": "b"},
            "aggregate": {"group_by": {"function": f"{FN}:one"}, "reduce": "count", "output": {"topic": "n"}},
            "dead_letter_topic": "dlq",
        }
    )
    engine = ReferenceEngine(spec)
    out = engine.replay(
        [Record("a", "x", 1, 1), Record("b", "y", 2, 2), Record("a", "x", 3, 3), Record("a", "x", None, 4)]
    )
    assert [(e.key, e.value, e.ts) for e in out if e.topic == "n"] == [
        (1, 1, 1),  # x joins group 1
        (1, 2, 2),  # y joins
        (1, 2, 3),  # x changes, staying in group 1: one update (KIP-904)
        (1, 1, 4),  # x deleted (both sides absent: tombstone): leaves
    ]


def test_stream_time_is_per_task() -> None:
    spec = make_spec(
        inputs={"clicks": {"topic": "clicks", "role": "stream"}, "views": {"topic": "views", "role": "stream"}},
        join={
            "shape": "stream-stream",
            "kind": "inner",
            "left": "clicks",
            "right": "views",
            "window": {"before": 5, "after": 5},
        },
    )
    engine = ReferenceEngine(spec)
    engine.process(Record("clicks", "a", "c", 100, partition=1))
    assert engine.process(Record("views", "b", "v", 10, partition=0)) == []
    assert engine.process(Record("clicks", "b", "c", 12, partition=0)) != []  # partition 0's time is 10, not 100
    assert engine.counters["late_dropped"] == 0
    assert engine.stream_time == {0: 12, 1: 100}


def test_global_table_records_do_not_move_stream_time() -> None:
    engine = ReferenceEngine(load_scenario(SCENARIO_DIR / "stream_globaltable_left.yaml").spec)
    engine.process(Record("clicks", "A", "click A", 99_000))
    assert engine.stream_time == {}


def test_unknown_topic_is_rejected() -> None:
    with pytest.raises(ValueError, match="not an input"):
        ReferenceEngine(make_spec()).process(Record("other", "k", "v", 0))


def test_jsonl_round_trip(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(
        '{"topic": "clicks", "key": "u", "value": 3, "ts": 1}\n\n'
        '{"topic": "regions", "key": null, "value": null, "ts": 2, "partition": 1, "offset": 7}\n'
    )
    records = read_records(source)
    assert records == [Record("clicks", "u", 3, 1), Record("regions", None, None, 2, 1, 7)]
    target = tmp_path / "out.jsonl"
    rows = [Emitted("joined", "u", {"left": 3}, 1), Emitted("dlq", None, None, 2, (("reason", "null-key"),))]
    write_emitted(target, rows)
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert lines == [
        {"topic": "joined", "key": "u", "value": {"left": 3}, "ts": 1},
        {"topic": "dlq", "key": None, "value": None, "ts": 2, "headers": {"reason": "null-key"}},
    ]


def test_read_records_names_the_bad_line(tmp_path: Path) -> None:
    source = tmp_path / "bad.jsonl"
    source.write_text('{"topic": "t", "key": 1, "ts": 1}\n{"key": 1}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        read_records(source)


def test_final_tables_drop_deleted_keys_and_excluded_topics() -> None:
    rows = [Emitted("a", 1, "x", 0), Emitted("a", 1, None, 1), Emitted("b", 2, "y", 0), Emitted("dlq", 3, "z", 0)]
    assert final_tables(rows, exclude=["dlq"]) == {"b": {2: "y"}}
