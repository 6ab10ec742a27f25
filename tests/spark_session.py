"""The local SparkSession the tests (and ``bench/profile_batch.py``) run in-process Spark on."""

from __future__ import annotations

import os
import sys
from typing import Any


def local_session(app_name: str) -> Any:
    """Local SparkSession: UI off, two cores and shuffle partitions, a 3 GiB driver heap (one JVM runs
    hundreds of small replays: Spark's default 1 GiB heap ran out in CI)."""
    from streamjoin.spark.session import build_session

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return build_session(
        app_name,
        master="local[2]",
        shuffle_partitions=2,
        extra_conf={"spark.ui.enabled": "false", "spark.sql.adaptive.enabled": "false", "spark.driver.memory": "3g"},
    )
