"""Small frames of state rows: the values come back as given, and reading them needs no Python worker."""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame

from streamjoin.spark.local_frames import local_frame

SCHEMA = "topic string, __partition int, max_ts long"


@pytest.mark.spark
def test_rows_come_back_with_their_types_nulls_and_extreme_longs(spark) -> None:
    rows = [
        {"topic": "user-clicks", "__partition": 3, "max_ts": 2**63 - 1},
        {"topic": "user-regions", "__partition": 0, "max_ts": -(2**63)},
        {"topic": 'quote " and \\ backslash', "__partition": 1, "max_ts": None},
        {"topic": "no max_ts key", "__partition": 2},
    ]
    frame = local_frame(spark, rows, SCHEMA)
    assert frame.schema.simpleString() == "struct<topic:string,__partition:int,max_ts:bigint>"
    got = [r.asDict() for r in frame.collect()]
    assert got == [{"max_ts": None, **row} for row in rows]


@pytest.mark.spark
def test_an_empty_frame_keeps_its_schema(spark) -> None:
    frame = local_frame(spark, [], "key string, rval struct<region: string>, rts long")
    assert frame.count() == 0
    assert frame.schema.simpleString() == "struct<key:string,rval:struct<region:string>,rts:bigint>"


@pytest.mark.spark
def test_reading_it_runs_no_python_rdd(spark) -> None:
    """``createDataFrame(list)`` scans a Python RDD, which starts Python workers on every read; a local
    frame is generated from a literal in the JVM."""

    def lineage(frame: DataFrame) -> str:
        return str(frame._jdf.queryExecution().toRdd().toDebugString())

    assert "PythonRDD" in lineage(spark.createDataFrame([("t", 0, 1)], SCHEMA))
    assert "PythonRDD" not in lineage(local_frame(spark, [{"topic": "t", "__partition": 0, "max_ts": 1}], SCHEMA))
