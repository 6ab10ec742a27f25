"""Spark's decoding of Java ``LongSerializer`` bytes agrees with the Python codec, extremes included."""

from __future__ import annotations

import pytest

from streamjoin.core.codec import encode
from streamjoin.core.spec import Format, Serde
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
