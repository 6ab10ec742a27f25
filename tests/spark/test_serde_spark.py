"""Spark's decoding of Java ``LongSerializer`` bytes agrees with the Python codec, extremes included; JSON Schema
wire records decode by the subject's latest schema, others name what is wrong."""

from __future__ import annotations

import json

import pytest

from streamjoin.core.avro import wire_header
from streamjoin.core.codec import encode
from streamjoin.core.spec import Format, Serde
from streamjoin.kafka.schema_registry import AvroSchemas
from streamjoin.spark.serde import decode

VALUES = [0, 1, -1, 2**31, -(2**31) - 1, 2**32 + 7, 2**63 - 1, -(2**63), 123_456_789_012, -987_654_321]


@pytest.mark.spark
def test_long_bytes_decode_to_the_python_codecs_values(spark) -> None:
    frame = spark.createDataFrame(
        [(encode(v, Format.LONG), v) for v in VALUES] + [(b"\x01\x02\x03", None), (None, None)], "raw binary, v long"
    )
    value, error = decode(frame["raw"], Serde(format=Format.LONG))
    rows = frame.select("v", value.alias("decoded"), error.alias("error")).collect()
    assert [(r["decoded"], r["error"]) for r in rows[: len(VALUES)]] == [(v, None) for v in VALUES]
    assert rows[-2]["decoded"] is None and rows[-2]["error"] == "undecodable-value: long needs 8 bytes, got 3"
    assert (rows[-1]["decoded"], rows[-1]["error"]) == (None, None)  # a tombstone: no value, no error


@pytest.mark.spark
def test_json_schema_wire_records_decode_with_the_subjects_latest_schema(spark) -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "at": {"type": "object", "properties": {"x": {"type": "number"}}}},
    }
    schemas = AvroSchemas("t-value", json.dumps(schema), ((3, "{}"), (5, json.dumps(schema))))
    raws = [wire_header(3) + b'{"n": 1, "at": {"x": 2.5}, "extra": true}', wire_header(5) + b'{"at": null}',
            b'{"n": 1}', wire_header(4) + b'{"n": 1}', wire_header(5) + b"[1, 2", None]  # fmt: skip
    frame = spark.createDataFrame([(r,) for r in raws], "raw binary")
    value, error = decode(frame["raw"], Serde(format=Format.JSON_SCHEMA), schemas)
    rows = [
        (r["v"] and r["v"].asDict(recursive=True), r["e"])
        for r in frame.select(value.alias("v"), error.alias("e")).collect()
    ]
    prefix = "undecodable-value: "
    assert rows == [
        ({"n": 1, "at": {"x": 2.5}}, None),
        ({"n": None, "at": None}, None),
        (None, prefix + "not the Confluent wire format (magic byte 0, 4-byte schema id): starts with 0x7B226E223A"),
        (None, prefix + "schema id 4 is not a version of subject 't-value' (its ids: [3, 5])"),
        (None, prefix + "the JSON text of schema id 5 of subject 't-value' is not JSON matching its fields: [1, 2"),
        (None, None),
    ]
