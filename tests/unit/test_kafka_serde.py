"""Bytes of the spec's formats, and the producer settings that decide where keys land."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamjoin.core.spec import Format, Serde
from streamjoin.kafka.clients import decode, encode, producer_config


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, b"\x00\x00\x00\x00\x00\x00\x00\x01"),
        (-1, b"\xff" * 8),
        (256, b"\x00\x00\x00\x00\x00\x00\x01\x00"),
        (2**63 - 1, b"\x7f" + b"\xff" * 7),
        (-(2**63), b"\x80" + b"\x00" * 7),
    ],
)
def test_long_is_javas_long_serializer(value: int, expected: bytes) -> None:
    assert encode(value, Format.LONG) == expected
    assert decode(expected, Serde(format=Format.LONG)) == value


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_long_round_trips(value: int) -> None:
    data = encode(value, Format.LONG)
    assert data is not None and len(data) == 8
    assert decode(data, Format.LONG) == value


@given(st.text())
def test_string_is_utf8(value: str) -> None:
    assert encode(value, Serde()) == value.encode("utf-8")
    assert decode(value.encode("utf-8"), Serde()) == value


def test_json_is_compact_and_round_trips() -> None:
    serde = Serde.model_validate({"format": "json", "schema": {"region": "string", "clicks": "long"}})
    assert encode({"region": "EU", "clicks": 3}, serde) == b'{"region":"EU","clicks":3}'
    data = encode({"region": "Zürich", "clicks": 3}, serde)
    assert data is not None and json.loads(data) == {"region": "Zürich", "clicks": 3}
    assert decode(data, serde) == {"region": "Zürich", "clicks": 3}


@pytest.mark.parametrize("fmt", list(Format))
def test_none_is_a_tombstone_in_every_format(fmt: Format) -> None:
    assert encode(None, fmt) is None
    assert decode(None, fmt) is None


def test_producer_partitions_keys_like_java_clients() -> None:
    config = producer_config("127.0.0.1:19092")
    assert config["partitioner"] == "murmur2_random"
    assert config["bootstrap.servers"] == "127.0.0.1:19092"
    assert producer_config("b:1", **{"linger.ms": 50})["linger.ms"] == 50
