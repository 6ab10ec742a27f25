"""Scalar outputs in the spec and the reference engine: what ``string``/``long``/``json`` hold, and which
joiners may be written as a scalar (no Spark, no Kafka)."""

from __future__ import annotations

from typing import Any

import pytest

from streamjoin.core.codec import decode, encode, output_value
from streamjoin.core.errors import SpecError
from streamjoin.core.records import Record
from streamjoin.core.reference import ReferenceEngine
from streamjoin.core.spec import Format, parse_spec, spec_problems


def _spec(joiner: dict[str, Any] | None, value_format: str) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "scalars",
        "inputs": {"views": {"topic": "views", "role": "stream"}, "profiles": {"topic": "profiles", "role": "table"}},
        "join": {"shape": "stream-table", "kind": "left", "left": "views", "right": "profiles"},
        "output": {"topic": "out", "value_format": value_format},
        "dead_letter_topic": "dlq",
    }
    if joiner is not None:
        data["join"]["joiner"] = joiner
    return data


@pytest.mark.parametrize(
    ("value", "fmt", "held"),
    [("a,b", Format.STRING, "a,b"), (42, Format.STRING, "42"), (True, Format.STRING, "true"), (42, Format.LONG, 42),
     ({"a": 1}, Format.JSON, {"a": 1}), ("a", Format.JSON, "a"), (None, Format.LONG, None)],
)  # fmt: skip
def test_output_value_holds_scalars_as_declared(value: Any, fmt: Format, held: Any) -> None:
    assert output_value(value, fmt) == held
    assert decode(encode(output_value(value, fmt), fmt), fmt) == held


@pytest.mark.parametrize(("value", "fmt"), [({"a": 1}, Format.STRING), ([1], Format.LONG), ("42", Format.LONG),
                                            (1.5, Format.LONG), (True, Format.LONG)])  # fmt: skip
def test_output_value_refuses_what_the_format_cannot_hold(value: Any, fmt: Format) -> None:
    with pytest.raises(ValueError, match=f"value_format '{fmt.value}'"):
        output_value(value, fmt, "joiner x")


def test_a_select_of_one_expression_is_a_scalar_joiner() -> None:
    spec = parse_spec(_spec({"select": "concat(left, ',', right)"}, "string"))
    assert spec.join.joiner.select == "concat(left, ',', right)" and not spec.join.joiner.builds_struct


@pytest.mark.parametrize("joiner", [None, {"select": {"page": "left"}}], ids=["default", "select-fields"])
@pytest.mark.parametrize("value_format", ["string", "long"])
def test_a_struct_joiner_cannot_be_written_as_a_scalar(joiner: dict[str, Any] | None, value_format: str) -> None:
    problems = spec_problems(_spec(joiner, value_format), "x.yaml")
    assert [(p.path, p.value) for p in problems] == [("output.value_format", value_format)]
    assert "the joiner builds a struct" in str(problems[0])


def test_the_reference_engine_emits_a_function_joiners_scalar_as_declared() -> None:
    spec = parse_spec(_spec({"function": "streamjoin.examples.functions:page_length"}, "string"))
    out = ReferenceEngine(spec).replay([Record("views", "ann", "/home", 1)])
    assert [(e.key, e.value) for e in out] == [("ann", "5")]
    bad = parse_spec(_spec({"function": "streamjoin.examples.functions:view_region"}, "long"))
    with pytest.raises(ValueError, match="value_format 'long' holds a scalar"):
        ReferenceEngine(bad).replay([Record("views", "ann", {"page": "/home"}, 1)])


def test_an_empty_select_expression_is_refused() -> None:
    with pytest.raises(SpecError, match=r"join\.joiner\.select"):
        parse_spec(_spec({"select": ""}, "string"))


def test_a_protobuf_value_is_not_encoded_without_its_schema_but_refused_naming_the_encoder() -> None:
    # a Protobuf input's JSON text on its topic would make every record a dead letter ("not the Confluent wire
    # format"): replay encodes with the registered schema (test_avro_topics' protobuf replay test)
    with pytest.raises(ValueError, match="Protobuf value is encoded with its registered schema's message"):
        encode({"clicks": 1}, Format.PROTOBUF)
