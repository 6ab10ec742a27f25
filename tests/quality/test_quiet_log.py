"""A check's log says what a person needs, not GX's own chatter (about 230 lines per check before)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest


def test_creating_the_gx_context_and_data_source_logs_nothing_below_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    from streamjoin.quality.validate import _context  # imports GX (its import logged ~100 INFO lines before)

    context = _context(tmp_path / "docs")
    context.data_sources.add_spark(name="p", persist=False).add_dataframe_asset(name="enriched")  # 26 lines each
    chatter = [r for r in caplog.records if r.name.startswith("great_expectations") and r.levelno < logging.WARNING]
    assert chatter == [], [r.getMessage() for r in chatter[:3]]
    assert not [r for r in caplog.records if "DeprecationWarning" in r.getMessage()]


def test_the_jvm_s_stderr_lines_keep_their_own_level() -> None:
    """What the in-task check's JVM writes on stderr (Airflow logs a task's stderr as errors) is relayed to a
    logger at each line's level: Spark's WARN and INFO lines, its banner and the JVM's notices are no errors."""
    import io

    from streamjoin.spark.session import relay_jvm_stderr

    stderr = io.BytesIO(
        b"Picked up JAVA_TOOL_OPTIONS: -XX:TieredStopAtLevel=1\n"
        b"WARNING: Using incubator modules: jdk.incubator.vector\n"
        b"26/11/27 12:15:56 WARN NativeCodeLoader: Unable to load native-hadoop library for your platform\n"
        b"Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties\n"
        b"26/11/27 12:16:35 INFO SparkContext: Running Spark version 4.1.1\n"
        b"26/11/27 12:16:36 ERROR Executor: Exception in task 0.0\n"
        b"java.lang.IllegalStateException: boom\n"
        b"\tat org.apache.spark.Foo.bar(Foo.scala:1)\n"
        b"\n"
    )
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    log = logging.getLogger("test.jvm")
    log.addHandler(Keep())
    log.setLevel(logging.DEBUG)
    log.propagate = False
    relay_jvm_stderr(stderr, log)
    assert [(r.levelname, r.getMessage()[:24]) for r in records] == [
        ("INFO", "Picked up JAVA_TOOL_OPTIO"[:24]),
        ("WARNING", "WARNING: Using incubator"),
        ("WARNING", "26/11/27 12:15:56 WARN N"),
        ("INFO", "Using Spark's default lo"),
        ("INFO", "26/11/27 12:16:35 INFO S"),
        ("ERROR", "26/11/27 12:16:36 ERROR "),
        ("ERROR", "java.lang.IllegalStateEx"),
        ("ERROR", "\tat org.apache.spark.Foo"),
    ]
