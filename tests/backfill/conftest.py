"""Backfill tests: one local SparkSession per pytest process, and a seed-style spec on unique topics."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from streamjoin.spark.session import build_session

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = build_session(
        "streamjoin-backfill-tests",
        master="local[2]",
        shuffle_partitions=2,
        extra_conf={"spark.ui.enabled": "false", "spark.sql.adaptive.enabled": "false"},
    )
    yield session
    session.stop()
