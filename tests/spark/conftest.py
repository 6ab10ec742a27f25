"""One local SparkSession for the Spark tests (UI off, few shuffle partitions, a 3 GiB driver heap)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from streamjoin.spark.session import build_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = build_session(
        "streamjoin-tests",
        master="local[2]",
        shuffle_partitions=2,
        # one JVM runs the whole tier (hundreds of small batches): Spark's default 1g heap ran out in CI
        extra_conf={"spark.ui.enabled": "false", "spark.sql.adaptive.enabled": "false", "spark.driver.memory": "3g"},
    )
    yield session
    session.stop()
