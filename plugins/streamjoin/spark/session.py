"""Builds the SparkSession from explicit settings; local vs cluster is decided by spark-submit, not here."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import threading
from typing import IO

from pyspark import SparkConf
from pyspark.sql import SparkSession

from streamjoin.core.jvm_archive import java_options
from streamjoin.core.plans import PROJECT_HOME, connector_jars, kernel_jars
from streamjoin.kafka.client_config import SPARK_REDACTION_REGEX


def build_session(
    app_name: str,
    *,
    master: str | None = None,
    shuffle_partitions: int = 4,
    with_kafka: bool = True,
    extra_conf: dict[str, str] | None = None,
    jvm_log: logging.Logger | None = None,
) -> SparkSession:
    """One place that creates the session. ``master`` only for tests and local tools; jobs get it from
    spark-submit.

    :param jvm_log: when this process starts the JVM (no spark-submit around it), the JVM's stderr goes to this
        logger, each line at its own level (:func:`relay_jvm_stderr`), not to the process's stderr: Airflow
        logs a task's stderr as errors, Spark's WARN and INFO lines included
    """
    os.environ.setdefault("PYSPARK_PYTHON", os.environ.get("PYSPARK_PYTHON") or _venv_python())
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    conf = {
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # each micro-batch is cached once and read a few times: building a compressed cache costs more
        # (1.3-2.0 s vs 0.9 s for 600k decoded records on 2 cores) than the memory it saves
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        # every micro-batch plans the same queries again: with Spark's default of 100 cached generated
        # classes, a join with an aggregate (~140 classes a batch) evicted them all, recompiled ~100 a
        # batch and ran them cold in the JVM (join+sum/batch 88k -> 129k records/s on 2 cores)
        "spark.sql.codegen.cache.maxEntries": "2000",
        # every batch local-checkpoints its ordered events; their blocks are freed when the JVM collects
        # the frame, and Spark only forces a collection every 30 minutes by default
        "spark.cleaner.periodicGC.interval": "2min",
        # no delay scheduling: a micro-batch's tasks should start at once, not wait up to 3 s per stage for
        # the node that holds an HDFS block; and in local mode (no periodic revive of offers) a task set that
        # prefers the DataNode's host over the driver's never started at all
        "spark.locality.wait": "0s",
        # ...except for the executor a task's state store is loaded in (the kernel's stages prefer it, and a
        # move reloads the store from the checkpoint): wait longer than a kernel task runs before moving it;
        # an executor that is gone is no one's preference (StoreLocatedRDD), so nothing waits for it
        "spark.locality.wait.process": "10s",
        # Kafka options carry the JAAS config (a password) and PEM keys: hide them in the UI, event log, plans
        "spark.redaction.regex": SPARK_REDACTION_REGEX,
        "spark.sql.redaction.options.regex": SPARK_REDACTION_REGEX,
        **(extra_conf or {}),
    }
    if "spark.jars" not in conf and not SparkConf().contains("spark.jars"):
        # under spark-submit the jars come with --jars; run directly, take the Maven-resolved connector (with
        # Kafka) and the engine kernel's jar
        jars = connector_jars() if with_kafka else kernel_jars()
        if jars:
            conf["spark.jars"] = ",".join(jars)
    if "spark.driver.extraJavaOptions" not in conf and not _jvm_running() and (options := java_options(PROJECT_HOME)):
        conf["spark.driver.extraJavaOptions"] = options  # this process starts the driver's JVM: the class archive
    for key, value in conf.items():
        builder = builder.config(key, value)
    if jvm_log is not None:
        _start_jvm(conf, master, app_name, jvm_log)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


#: a log4j line of Spark's console layout: ``26/11/27 12:16:35 WARN SparkSession: ...``
_LOG4J = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ")
#: the first line of a Java exception a log4j line goes on with: ``java.lang.IllegalStateException: ...``
_EXCEPTION = re.compile(r"^([a-z_$][\w$]*\.)+[\w$]*(Exception|Error|Throwable)\b")
_LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
           "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}  # fmt: skip


def jvm_line_level(line: str, previous: int) -> int:
    """The level of a line the JVM wrote on stderr: its log4j level; a stack trace's or message's continuation
    (an exception's first line, indented, ``Caused by``) that of the line before; the JVM's own notices
    (``WARNING: ...``) a warning; anything else (Spark's banner, ``Picked up ...``) info."""
    found = _LOG4J.match(line)
    if found:
        return _LEVELS[found.group(1)]
    if line.startswith(("\t", " ", "Caused by", "... ")) or _EXCEPTION.match(line):
        return previous
    return logging.WARNING if line.startswith("WARNING:") else logging.INFO


def relay_jvm_stderr(stream: IO[bytes], log: logging.Logger) -> None:
    """Log each line of ``stream`` at its level (:func:`jvm_line_level`) until it ends."""
    level = logging.INFO
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", errors="replace").rstrip("\n")
        level = jvm_line_level(line, level)
        if line:
            log.log(level, "%s", line)


def _start_jvm(conf: dict[str, str], master: str | None, app_name: str, log: logging.Logger) -> None:
    """Start the JVM as ``SparkSession.builder`` would (the same settings on spark-submit's command line), its
    stderr relayed to ``log``; nothing when a JVM is there already (spark-submit, an earlier session)."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    if _jvm_running():
        return
    settings = SparkConf()
    for key, value in {**conf, "spark.app.name": app_name, **({"spark.master": master} if master else {})}.items():
        settings.set(key, value)
    gateway = launch_gateway(settings, popen_kwargs={"stderr": subprocess.PIPE})
    stderr = gateway.proc.stderr
    threading.Thread(target=relay_jvm_stderr, args=(stderr, log), name="jvm-stderr", daemon=True).start()
    SparkContext._ensure_initialized(gateway=gateway)


def _jvm_running() -> bool:
    """A JVM is there already: spark-submit's, or an earlier session's."""
    from pyspark import SparkContext

    return SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ


def _venv_python() -> str:
    import sys

    return sys.executable
