"""Builds the SparkSession from explicit settings; local vs cluster is decided by spark-submit, not here."""

from __future__ import annotations

import os

from pyspark import SparkConf
from pyspark.sql import SparkSession

from streamjoin.core.plans import connector_jars, kernel_jars
from streamjoin.kafka.client_config import SPARK_REDACTION_REGEX


def build_session(
    app_name: str,
    *,
    master: str | None = None,
    shuffle_partitions: int = 4,
    with_kafka: bool = True,
    extra_conf: dict[str, str] | None = None,
) -> SparkSession:
    """One place that creates the session. ``master`` only for tests and local tools; jobs get it from
    spark-submit."""
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
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def _venv_python() -> str:
    import sys

    return sys.executable
