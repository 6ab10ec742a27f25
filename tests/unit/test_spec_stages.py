"""``joins:``, a pipeline of several join stages: the typed spec and its validation (issue 38)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streamjoin.core.errors import SpecError
from streamjoin.core.spec import Shape, parse_spec, spec_problems

WINDOW = {"before": "10s", "after": "10s"}


def _spec(joins: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "p",
        "inputs": {
            "clicks": {"topic": "clicks", "role": "stream"},
            "views": {"topic": "views", "role": "stream"},
            "regions": {"topic": "regions", "role": "table"},
            "products": {"topic": "products", "role": "table"},
            "campaigns": {"topic": "campaigns", "role": "global_table"},
        },
        "output": {"topic": "joined"},
        "dead_letter_topic": "p-dlq",
        **extra,
    }
    if joins is not None:
        data["joins"] = joins
    return data


def _problems(joins: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(e.path, e.value) for e in spec_problems(_spec(joins), "p.yaml")]


def test_stages_chain_by_name_or_implicitly_and_join_is_the_last_stage() -> None:
    spec = parse_spec(
        _spec(
            [
                {"shape": "stream-table", "kind": "left", "left": "clicks", "right": "regions"},
                {"shape": "stream-table", "kind": "left", "right": "products", "output": {"topic": "with-region"}},
                {
                    "name": "enriched",
                    "shape": "stream-globaltable",
                    "kind": "inner",
                    "left": "stage2",
                    "right": "campaigns",
                },
            ]
        )
    )
    assert [(s.name, s.left, s.right) for s in spec.stages] == [
        ("stage1", "clicks", "regions"),
        ("stage2", "stage1", "products"),
        ("enriched", "stage2", "campaigns"),
    ]
    assert spec.join is spec.stages[-1] and spec.join.shape is Shape.STREAM_GLOBALTABLE and spec.chained
    assert spec.stages[1].output is not None and spec.stages[1].output.topic == "with-region"
    assert (spec.left.topic, spec.right.topic) == ("clicks", "campaigns")
    assert [spec.stage_path(i) for i in range(3)] == ["joins[0]", "joins[1]", "joins[2]"]
    # a dump is what a job gets (its spec as JSON): it parses again, stages and all
    assert parse_spec(spec.model_dump(mode="json", by_alias=True), "dumped.json") == spec
    assert "earlier_joins" not in spec.model_dump_json() and "joins" in spec.model_dump()


def test_join_is_a_one_stage_joins() -> None:
    one = {"shape": "stream-table", "kind": "left", "left": "clicks", "right": "regions"}
    single = parse_spec(_spec(join=one))
    listed = parse_spec(_spec([one]))
    assert single.stages == (single.join,) and not single.chained and single.stage_path(0) == "join"
    assert listed.join.model_copy(update={"name": None}) == single.join and listed.stage_path(0) == "joins[0]"


def test_a_stage_whose_shape_the_previous_result_does_not_allow_names_the_stage_field_and_value() -> None:
    problems = _problems(
        [
            {"shape": "stream-table", "kind": "left", "left": "clicks", "right": "regions"},
            {"shape": "table-table", "kind": "inner", "right": "products"},
        ]
    )
    assert problems == [("joins[1].shape", "table-table")]
    error = spec_problems(
        _spec(
            [
                {"shape": "stream-table", "kind": "left", "left": "clicks", "right": "regions"},
                {"shape": "table-table", "kind": "inner", "right": "products"},
            ]
        )
    )[0]
    assert "joins[0] (stream-table) yields a stream" in str(error)
    assert "['stream-globaltable', 'stream-stream', 'stream-table']" in str(error)


def test_a_stream_stream_stage_needs_a_window_and_a_later_left_must_be_the_previous_stage() -> None:
    assert _problems(
        [
            {"shape": "stream-table", "kind": "left", "left": "clicks", "right": "regions"},
            {"shape": "stream-stream", "kind": "inner", "right": "views"},
        ]
    ) == [("joins[1].window", None)]
    assert _problems(
        [
            {"shape": "stream-table", "kind": "left", "left": "clicks", "right": "regions"},
            {"shape": "stream-table", "kind": "left", "left": "clicks", "right": "products"},
        ]
    ) == [("joins[1].left", "clicks")]


def test_an_input_on_both_sides_is_a_self_join_for_stream_stream_only() -> None:
    self_join = {"shape": "stream-stream", "kind": "inner", "left": "clicks", "right": "clicks", "window": WINDOW}
    assert parse_spec(_spec([self_join])).join.left == "clicks"
    assert _problems([{"shape": "table-table", "kind": "inner", "left": "regions", "right": "regions"}]) == [
        ("joins[0].right", "regions")
    ]


def test_two_inputs_on_one_topic_are_refused_in_any_stage() -> None:
    data = _spec(
        [
            {"shape": "stream-table", "kind": "left", "left": "clicks", "right": "regions"},
            {"shape": "stream-table", "kind": "left", "right": "copy"},
        ]
    )
    data["inputs"]["copy"] = {"topic": "regions", "role": "table"}
    with pytest.raises(SpecError, match=r"joins\[1\]\.right: got 'copy'.*inputs 'regions' and 'copy' both read"):
        parse_spec(data)


def test_field_errors_inside_a_stage_name_its_index() -> None:
    errors = spec_problems(
        _spec(
            [
                {"shape": "stream-table", "kind": "left", "left": "clicks", "right": "regions"},
                {"shape": "stream-table", "kind": "sideways", "right": "products"},
            ]
        )
    )
    assert [(e.path, e.value) for e in errors] == [("joins[1].kind", "sideways")]
    both = spec_problems({**_spec([]), "join": {}})
    assert [e.path for e in both] == ["joins"] and "not both" in str(both[0])


def test_the_last_stage_has_no_output_of_its_own_and_stage_names_are_unique() -> None:
    assert _problems(
        [
            {"shape": "stream-table", "kind": "left", "left": "clicks", "right": "regions"},
            {"shape": "stream-table", "kind": "left", "right": "products", "output": {"topic": "x"}},
        ]
    ) == [("joins[1].output", {"topic": "x"})]
    assert _problems(
        [
            {"name": "regions", "shape": "stream-table", "kind": "left", "left": "clicks", "right": "regions"},
            {"shape": "stream-table", "kind": "left", "right": "products"},
        ]
    ) == [("joins[0].name", "regions")]


def test_a_stage_output_takes_the_pipelines_delivery() -> None:
    """``output.delivery`` covers every topic (the job writes them in one transaction or none): a stage output's
    own ``exactly_once`` would be written at least once."""
    stages = [
        {"shape": "stream-table", "kind": "left", "left": "clicks", "right": "regions",
         "output": {"topic": "x", "delivery": "exactly_once"}},
        {"shape": "stream-table", "kind": "left", "right": "products"},
    ]  # fmt: skip
    assert _problems(stages) == [("joins[0].output.delivery", "exactly_once")]


def test_the_kernel_plans_a_chain_per_stage_and_refuses_what_it_cannot_run_yet() -> None:
    from streamjoin.core.join_plan import JoinPlan, ReferenceOnlyError, stage_specs

    chain = parse_spec(
        _spec(
            [
                {"shape": "stream-table", "kind": "left", "left": "clicks", "right": "regions"},
                {"shape": "stream-table", "kind": "inner", "right": "products"},
            ]
        )
    )
    plans = JoinPlan.stages_of(chain)
    assert [(p.shape, p.kind) for p in plans] == [("stream-table", "left"), ("stream-table", "inner")]
    second = stage_specs(chain)[1]  # the previous stage's result is its left input, keyed as stage 1's left
    assert second.left.topic == "<stage1>" and second.left.role.value == "stream" and second.aggregate is None
    assert list(second.inputs)[:-1] == list(chain.inputs)  # the inputs' positions order the batch
    with pytest.raises(ValueError, match="a join plan per stage"):
        JoinPlan.of(chain)
    table = {"topic": "t", "role": "table"}
    shared = _spec([{"shape": "table-table", "kind": "inner", "left": "clicks", "right": "regions"},
                    {"shape": "table-table", "kind": "left", "right": "regions"}])  # fmt: skip
    shared["inputs"] |= {"clicks": {**table, "topic": "c"}, "regions": {**table, "topic": "r"}}
    with pytest.raises(ReferenceOnlyError, match="input 'regions' is a table that several table-table") as caught:
        JoinPlan.stages_of(parse_spec(shared))
    assert not caught.value.transient
    from streamjoin.spark.reprocess import reprocess_day

    with pytest.raises(ReferenceOnlyError, match="several table-table stages"):  # before it reads anything
        reprocess_day(None, parse_spec(shared), None, None, home=Path("/nonexistent"))  # type: ignore[arg-type]
    self_join = {"shape": "stream-stream", "kind": "inner", "left": "clicks", "right": "clicks", "window": WINDOW}
    assert JoinPlan.of(parse_spec(_spec(join=self_join))).shape == "stream-stream"  # a self-join runs too
    one = {"shape": "stream-table", "kind": "left", "left": "clicks", "right": "regions"}
    assert JoinPlan.of(parse_spec(_spec(join=one))).shape == "stream-table"


def test_plan_shows_every_stage_and_co_partitions_the_chains_inputs(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from streamjoin.cli import main
    from streamjoin.core.topic_plan import plan_topics

    data = _spec(
        [
            {
                "shape": "stream-globaltable",
                "kind": "left",
                "left": "clicks",
                "right": "campaigns",
                "output": {"topic": "with-campaign"},
            },
            {"shape": "stream-table", "kind": "left", "right": "regions"},
        ]
    )
    groups = plan_topics(parse_spec(data)).copartition_groups()
    # stage 2 joins stage 1's results, partitioned as clicks, with regions: products (unused) stays out
    assert {name: sorted(t.name for t in members) for name, members in groups.items()} == {
        "p:join": ["clicks", "regions"]
    }
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert "join stages (2):" in out
    assert (
        "stage 1 (joins[0]): clicks left stream-globaltable campaigns -> a stream to the next stage and "
        "with-campaign; no co-partitioning (a global table); internal topics: none; stores: default" in out
    )
    assert (
        "stage 2 (joins[1]): stage1's result left stream-table regions -> a stream to joined; co-partitioned: "
        "clicks and regions; internal topics: none; stores: default" in out
    )
    assert "the chain adds no internal topic: every stage's result keeps the key and partitions of 'clicks'" in out
    assert "the kernel refuses it" not in out  # an earlier stage's output is written too, to a topic planned
    assert "with-campaign (output, 4 partitions" in out
    assert main(["validate", str(path)]) == 0


def test_validate_and_plan_name_each_stage_and_the_internal_topics_it_reads(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A named stage is shown by its name; a stage whose right input is repartitioned reads that input's internal
    topic (the one provisioning creates), and ``validate`` prints the same stage lines as ``plan``."""
    import yaml

    from streamjoin.cli import main
    from streamjoin.core.topic_plan import plan_topics

    data = _spec(
        [
            {"name": "with_campaign", "shape": "stream-globaltable", "kind": "left", "left": "clicks",
             "right": "campaigns"},
            {"name": "with_region", "shape": "stream-table", "kind": "left", "right": "regions"},
        ]
    )  # fmt: skip
    data["inputs"]["regions"]["repartition"] = True
    spec = parse_spec(data)
    assert "p-regions-repartition" in plan_topics(spec).names
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    stage2 = (
        "stage 2 with_region (joins[1]): with_campaign's result left stream-table regions -> a stream to "
        "joined; co-partitioned: clicks and regions; internal topics: p-regions-repartition; stores: default"
    )
    for command in ("plan", "validate"):
        assert main([command, str(path)]) == 0
        out = capsys.readouterr().out
        assert "stage 1 with_campaign (joins[0]): clicks left stream-globaltable campaigns" in out, command
        assert f"{stage2} (its own, in the checkpoint's state/kernel/stage2/)" in out, (command, out)
        assert "planned  p-regions-repartition (repartition" in out or command == "validate"


def test_the_readmes_chained_example_is_a_valid_spec() -> None:
    import re

    import yaml

    from streamjoin.core.plans import PROJECT_HOME

    text = (PROJECT_HOME / "README.md").read_text().split("Several joins in one pipeline", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", text, re.S)
    assert block is not None
    spec = parse_spec({"name": "example", "dead_letter_topic": "dlq", **yaml.safe_load(block.group(1))}, "README.md")
    assert [(s.shape.value, s.left, s.right) for s in spec.stages] == [
        ("stream-table", "clicks", "regions"),
        ("stream-globaltable", "stage1", "products"),
    ]
