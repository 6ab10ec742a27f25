"""Repartitioning a join side (seed 003's remedy): the spec field, the topic plan, provisioning's checks
(without a broker: ``check_plan`` over described topic states) and the ``streamjoin plan`` command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from streamjoin.cli import main
from streamjoin.core.errors import SpecError
from streamjoin.core.partitioner import partition_for
from streamjoin.core.repartition import AlreadyWritten, join_view, repartitioned, target_partition
from streamjoin.core.spec import parse_spec, spec_problems
from streamjoin.core.topic_plan import TopicRole, plan_topics
from streamjoin.kafka.admin import TopicState, check_plan


def spec_data(*, repartition: str | None = "views", shape: str = "stream-table", right_role: str = "table") -> Any:
    data: dict[str, Any] = {
        "name": "page_views",
        "kafka": {"partitions": 2},
        "inputs": {
            "views": {"topic": "page-views", "role": "stream"},
            "profiles": {"topic": "user-profiles", "role": right_role},
        },
        "join": {"shape": shape, "kind": "left", "left": "views", "right": "profiles"},
        "output": {"topic": "enriched-views"},
        "dead_letter_topic": "page-views-dlq",
    }
    if repartition:
        data["inputs"][repartition]["repartition"] = True
    return data


def state(name: str, partitions: int, policy: str) -> TopicState:
    return TopicState(name, partitions, 1, {"cleanup.policy": policy})


def test_refusal_without_repartition_names_both_topics_and_counts() -> None:
    plan = plan_topics(parse_spec(spec_data(repartition=None)))
    existing = {"page-views": state("page-views", 3, "delete"), "user-profiles": state("user-profiles", 4, "compact")}
    _, refusal = check_plan(plan, existing)
    assert refusal is not None
    assert "'page-views' (3 partitions)" in refusal and "'user-profiles' (4 partitions)" in refusal
    assert "repartition: true" in refusal


def test_plan_with_repartition_has_the_internal_topic_in_the_group() -> None:
    spec = parse_spec(spec_data())
    plan = plan_topics(spec)
    internal = plan.topic("page_views-views-repartition")
    assert internal.role is TopicRole.REPARTITION
    assert internal.config["cleanup.policy"] == "delete"  # a stream's internal topic, as its input
    assert internal.partitions == 2  # nothing exists yet: kafka.partitions
    assert plan.topic("page-views").copartition_group is None  # the source may have any count
    assert [t.name for t in plan.copartition_groups()["page_views:join"]] == [
        "user-profiles",
        "page_views-views-repartition",
    ]
    # the other side exists with 4 partitions and the source with 3: the internal topic gets 4, no refusal
    existing = {"page-views": state("page-views", 3, "delete"), "user-profiles": state("user-profiles", 4, "compact")}
    outcomes, refusal = check_plan(plan, existing)
    assert refusal is None
    assert {o.name: (o.status, o.partitions) for o in outcomes}["page_views-views-repartition"] == ("create", 4)
    # an internal topic left with another count is refused as any co-partitioning mismatch
    existing["page_views-views-repartition"] = state("page_views-views-repartition", 3, "delete")
    _, refusal = check_plan(plan, existing)
    assert refusal is not None and "'page_views-views-repartition' (3 partitions)" in refusal


def test_a_repartitioned_table_keeps_a_compacted_internal_topic() -> None:
    plan = plan_topics(parse_spec(spec_data(repartition="profiles")))
    assert plan.topic("page_views-profiles-repartition").compacted


def test_join_view_reads_the_internal_topic() -> None:
    spec = parse_spec(spec_data())
    view = join_view(spec)
    assert view.inputs["views"].topic == "page_views-views-repartition"
    assert not view.inputs["views"].repartition
    assert view.inputs["profiles"] == spec.inputs["profiles"]
    assert join_view(view) == view
    assert [(r.input, r.source, r.internal) for r in repartitioned(spec)] == [
        ("views", "page-views", "page_views-views-repartition")
    ]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (spec_data(shape="stream-globaltable", right_role="global_table"), "does not need co-partitioned inputs"),
        ({**spec_data(), "output": {"topic": "page_views-views-repartition"}}, "no other topic named"),
    ],
)
def test_bad_repartition_is_refused_naming_the_field(data: Any, expected: str) -> None:
    problems = spec_problems(data, "p.yaml")
    assert [p.path for p in problems] == ["inputs.views.repartition"], problems
    assert expected in str(problems[0])
    with pytest.raises(SpecError, match=r"inputs\.views\.repartition"):
        parse_spec(data)


def test_bad_repartition_value_names_the_field() -> None:
    data = spec_data(repartition=None)
    data["inputs"]["views"]["repartition"] = "yes please"
    assert [p.path for p in spec_problems(data)] == ["inputs.views.repartition"]


def test_placement_is_murmur2_of_the_serialized_key() -> None:
    for key in (b"alice", b"bob", b"\x00\x00\x00\x00\x00\x00\x00\x07"):
        assert target_partition(key, 2, 4) == partition_for(key, 4)
    assert target_partition(None, 6, 4) == 2  # no key: its source partition, modulo the count


def test_a_step_run_again_skips_what_reached_each_partition() -> None:
    already = AlreadyWritten({0: 2, 1: 0})
    assert [already.skip(p) for p in (0, 1, 0, 0, 1, 2)] == [True, False, True, False, False, False]


def test_cli_plan_shows_the_internal_topic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "page_views.yaml"
    path.write_text(yaml.safe_dump(spec_data()))
    assert main(["plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert "planned  page_views-views-repartition (repartition, 2 partitions" in out
    assert "repartitioned: input views (page-views) -> page_views-views-repartition (2 partitions" in out
    assert "co-partitioned (page_views:join): user-profiles, page_views-views-repartition" in out
