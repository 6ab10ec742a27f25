"""Spec validation rules that span several fields."""

from __future__ import annotations

from typing import Any

import pytest

from streamjoin.core.errors import SpecError, field_path, value_at
from streamjoin.core.spec import import_function, parse_spec


def _spec(left_topic: str, right_topic: str, *, left: str = "a", right: str = "b") -> dict[str, Any]:
    return {
        "name": "p",
        "inputs": {
            "a": {"topic": left_topic, "role": "table"},
            "b": {"topic": right_topic, "role": "table"},
        },
        "join": {"shape": "table-table", "kind": "inner", "left": left, "right": right},
        "output": {"topic": "joined"},
        "dead_letter_topic": "p-dlq",
    }


def test_two_inputs_on_one_topic_are_refused_as_a_self_join() -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(_spec("x", "x"), "self.yaml")
    error = caught.value
    assert error.file == "self.yaml"
    assert error.path == "join.right"
    assert error.value == "b"
    assert "inputs 'a' and 'b' both read topic 'x'" in str(error)
    assert "name one input on both sides of a stream-stream join for a self-join" in str(error)
    assert "join a copy of the topic" in str(error)


def test_one_input_on_both_sides_is_refused_as_a_self_join() -> None:
    with pytest.raises(SpecError, match=r"input 'a' is both join.left and join.right \(topic 'x'\)"):
        parse_spec(_spec("x", "y", right="a"))


def test_inputs_on_different_topics_are_accepted() -> None:
    spec = parse_spec(_spec("x", "y"))
    assert (spec.left.topic, spec.right.topic) == ("x", "y")


def test_a_key_join_needs_one_key_format_on_both_sides() -> None:
    data = _spec("x", "y")
    data["inputs"]["b"]["key"] = {"format": "long"}
    with pytest.raises(SpecError) as caught:
        parse_spec(data)
    assert caught.value.path == "inputs.b.key.format"
    assert caught.value.value == "long"
    assert "'string', the key format of 'a'" in str(caught.value)
    data["inputs"]["a"]["key"] = {"format": "long"}
    assert parse_spec(data).left.key.format.value == "long"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("nodots", "a dotted path 'module.path:name'"),
        ("streamjoin.examples.nowhere:f", "No module named 'streamjoin.examples.nowhere'"),
        ("streamjoin.examples.functions:missing", "has no attribute 'missing'"),
        ("streamjoin.core.spec:DAILY", "has no attribute 'DAILY'"),
        ("streamjoin.core.backfill:DAY_MS", "a callable (this name is not one)"),
    ],
)
def test_a_function_that_cannot_be_used_is_a_spec_error_naming_the_field_and_path(path: str, expected: str) -> None:
    """The reference engine and the Spark job resolve joiners and selectors through this one function."""
    with pytest.raises(SpecError) as caught:
        import_function(path, file="p.yaml", where="join.joiner.function")
    error = caught.value
    assert (error.file, error.path, error.value) == ("p.yaml", "join.joiner.function", path)
    assert expected in error.expected and not error.transient


def test_a_dotted_path_gives_its_function() -> None:
    from streamjoin.examples import functions

    assert import_function("streamjoin.examples.functions:view_user") is functions.view_user
    assert import_function("streamjoin.examples.functions.view_user") is functions.view_user


def test_error_paths_read_as_users_write_them_in_specs_suites_and_alerts() -> None:
    """One rendering of a validation error's location (spec, suite and alert files alike)."""
    assert field_path(("inputs", "clicks", "function-after[check()]", "topic")) == "inputs.clicks.topic"
    assert field_path(("enriched", "expectations", 0, "kwargs", "mostly")) == "enriched.expectations[0].kwargs.mostly"
    assert value_at({"a": [{"b": 1}]}, ("a", 0, "b")) == 1 and value_at({"a": 2}, ("a", "b")) == 2
