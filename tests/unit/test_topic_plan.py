"""The topic plan as data: which topics a spec needs, with partitions, configs and co-partition groups."""

from __future__ import annotations

from typing import Any

import pytest

from streamjoin.core.errors import SpecError
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.spec import load_spec, parse_spec
from streamjoin.core.topic_plan import DEAD_LETTER_RETENTION_MS, TopicPlan, TopicRole, TopicSpec, plan_topics

SEED = PROJECT_HOME / "include" / "pipelines" / "clicks_per_region.yaml"
FOURTEEN_DAYS = str(14 * 24 * 3600 * 1000)


def spec_for(shape: str, kind: str, left_role: str, right_role: str, **extra: Any) -> Any:
    data: dict[str, Any] = {
        "name": "p",
        "kafka": {"partitions": 6, "replication_factor": 1},
        "inputs": {
            "l": {"topic": "left-in", "role": left_role},
            "r": {"topic": "right-in", "role": right_role},
        },
        "join": {"shape": shape, "kind": kind, "left": "l", "right": "r"},
        "output": {"topic": "joined"},
        "dead_letter_topic": "p-dlq",
    }
    for key, value in extra.items():
        data[key] = value if not isinstance(value, dict) else {**data.get(key, {}), **value}
    return parse_spec(data)


def test_seed_pipeline_plan() -> None:
    plan = plan_topics(load_spec(SEED))
    group = "clicks_per_region:join"
    assert plan == TopicPlan(
        "clicks_per_region",
        (
            TopicSpec("user-clicks", 4, 1, {"cleanup.policy": "delete"}, TopicRole.INPUT_STREAM, group),
            TopicSpec("user-regions", 4, 1, {"cleanup.policy": "compact"}, TopicRole.INPUT_TABLE, group),
            TopicSpec("enriched-clicks", 4, 1, {"cleanup.policy": "delete"}, TopicRole.OUTPUT),
            TopicSpec("clicks-per-region", 4, 1, {"cleanup.policy": "compact"}, TopicRole.AGGREGATE_OUTPUT),
            TopicSpec(
                "clicks-per-region-dlq", 4, 1, {"cleanup.policy": "delete", "retention.ms": FOURTEEN_DAYS},
                TopicRole.DEAD_LETTER,
            ),
        ),
    )  # fmt: skip
    assert int(FOURTEEN_DAYS) == DEAD_LETTER_RETENTION_MS
    assert plan.copartition_groups() == {group: [plan.topic("user-clicks"), plan.topic("user-regions")]}
    assert [t.name for t in plan.topics if t.compacted] == ["user-regions", "clicks-per-region"]


def test_stream_stream_inputs_are_copartitioned_streams() -> None:
    spec = spec_for("stream-stream", "outer", "stream", "stream", join={"window": {"before": "5s", "after": "5s"}})
    plan = plan_topics(spec)
    assert [(t.name, t.partitions, t.config["cleanup.policy"]) for t in plan.topics] == [
        ("left-in", 6, "delete"),
        ("right-in", 6, "delete"),
        ("joined", 6, "delete"),
        ("p-dlq", 6, "delete"),
    ]
    assert list(plan.copartition_groups().values()) == [[plan.topic("left-in"), plan.topic("right-in")]]


def test_table_table_join_emits_a_table_so_its_output_is_compacted() -> None:
    plan = plan_topics(spec_for("table-table", "inner", "table", "table"))
    assert plan.topic("joined").role is TopicRole.OUTPUT_TABLE
    assert plan.topic("joined").compacted
    assert {t.name for t in plan.copartition_groups()["p:join"]} == {"left-in", "right-in"}


def test_global_table_is_compacted_outside_any_copartition_group() -> None:
    plan = plan_topics(spec_for("stream-globaltable", "left", "stream", "global_table"))
    table = plan.topic("right-in")
    assert table.role is TopicRole.INPUT_GLOBAL_TABLE
    assert table.compacted and table.copartition_group is None
    assert table.partitions == 6  # the spec's count on creation; an existing one may have any count
    assert plan.copartition_groups() == {}


def test_foreign_key_join_inputs_need_no_copartitioning() -> None:
    spec = spec_for("table-table-fk", "inner", "table", "table", join={"foreign_key": {"expr": "left.ref"}})
    plan = plan_topics(spec)
    assert plan.copartition_groups() == {}
    assert plan.topic("left-in").compacted and plan.topic("right-in").compacted


def test_min_insync_replicas_and_replication_factor_reach_every_topic() -> None:
    spec = spec_for(
        "stream-table", "left", "stream", "table", kafka={"replication_factor": 3, "min_insync_replicas": 2}
    )
    plan = plan_topics(spec)
    assert {t.replication_factor for t in plan.topics} == {3}
    assert {t.config["min.insync.replicas"] for t in plan.topics} == {"2"}
    assert plan.max_replication_factor == 3


def test_min_insync_replicas_above_replication_factor_is_a_spec_error() -> None:
    spec = spec_for(
        "stream-table", "left", "stream", "table", kafka={"replication_factor": 1, "min_insync_replicas": 2}
    )
    with pytest.raises(SpecError) as caught:
        plan_topics(spec)
    assert caught.value.path == "kafka.min_insync_replicas"
    assert caught.value.value == 2


def test_one_topic_for_two_purposes_is_a_spec_error() -> None:
    spec = spec_for("stream-table", "left", "stream", "table", dead_letter_topic="joined")
    with pytest.raises(SpecError, match="'joined' is both output and dead-letter"):
        plan_topics(spec)


def test_files_only_output_plans_no_output_topic() -> None:
    spec = spec_for("stream-table", "left", "stream", "table", output={"topic": None, "files": {"path": "var/x"}})
    assert plan_topics(spec).names == ["left-in", "right-in", "p-dlq"]


def test_plan_is_frozen_data() -> None:
    config = {"cleanup.policy": "compact"}
    topic = TopicSpec("t", 1, 1, config, TopicRole.INPUT_TABLE)
    config["cleanup.policy"] = "delete"
    assert topic.config["cleanup.policy"] == "compact"
    with pytest.raises(TypeError):
        topic.config["cleanup.policy"] = "delete"  # type: ignore[index]
    assert topic.as_dict()["config"] == {"cleanup.policy": "compact"}


def test_topic_specs_are_hashable() -> None:
    plan = plan_topics(load_spec(SEED))
    assert len(set(plan.topics)) == len(plan.topics)


def test_an_exactly_once_pipeline_gets_its_one_partition_compacted_marker_topic() -> None:
    at_least_once = plan_topics(spec_for("stream-table", "left", "stream", "table"))
    assert TopicRole.BATCH_MARKERS not in {t.role for t in at_least_once.topics}
    spec = spec_for("stream-table", "left", "stream", "table", output={"delivery": "exactly_once"})
    markers = plan_topics(spec).topic("p-batch-markers")
    assert (markers.role, markers.partitions, markers.compacted) == (TopicRole.BATCH_MARKERS, 1, True)


def test_delivery_is_set_on_the_pipelines_output_not_the_aggregates() -> None:
    output = {"topic": "agg", "delivery": "exactly_once"}
    aggregate = {"group_by": {"expr": "value"}, "reduce": "count", "output": output}
    with pytest.raises(SpecError, match=r"aggregate\.output\.delivery.*covers every topic"):
        spec_for("stream-table", "left", "stream", "table", aggregate=aggregate)
