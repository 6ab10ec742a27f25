"""The README's spec examples are valid specs (completed with the fields every spec needs)."""

from __future__ import annotations

import re

import pytest
import yaml

from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.spec import Shape, parse_spec


def readme_examples() -> list[str]:
    text = (PROJECT_HOME / "README.md").read_text()
    block = text.split("One example per shape", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", block, re.S).group(1)  # type: ignore[union-attr]
    return [chunk for chunk in block.split("\n\n") if chunk.strip()]


def test_every_shape_has_an_example() -> None:
    shapes = {yaml.safe_load(chunk)["join"]["shape"] for chunk in readme_examples()}
    assert shapes == {s.value for s in Shape}


@pytest.mark.parametrize("chunk", readme_examples(), ids=lambda c: c.splitlines()[0][:60])
def test_readme_example_is_a_valid_spec(chunk: str) -> None:
    data = {"name": "example", "dead_letter_topic": "example-dlq", "output": {"topic": "out"}, **yaml.safe_load(chunk)}
    spec = parse_spec(data, "README.md")
    assert spec.join.left in spec.inputs and spec.join.right in spec.inputs
