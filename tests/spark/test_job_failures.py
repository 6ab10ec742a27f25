"""A job's failure says whether a restart can help, across the JVM border: the streaming job's entry point
(``jobs/stream_join.py``'s ``main``) runs against the test broker, fails, and records its failure
(``failure.json``) and exit code. Terminal (a person must act, the owner never restarts): the kernel's jar
missing, an output topic missing, a record of a partition the pipeline does not have, a batch run again in
another task count than its markers say, a batch's records deleted from Kafka before it ran, a result larger than
its output topic takes (the last four: the kernel's ``TerminalKernelException``). Transient (a restart may help):
the kernel's ``TransientKernelException`` in a write task. In this process's Spark session (the entry point's
``build_session`` returns it), except the missing jar: a spark-submit job without the kernel's jar."""

from __future__ import annotations

import dataclasses
import os
import secrets
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from job_modules import job_module
from streamjoin.core.job_files import EXIT_TERMINAL, EXIT_TRANSIENT, QUERY_DIR, JobFailure, OffsetLog, PipelineFiles
from streamjoin.core.plans import KERNEL_JAR, PROJECT_HOME, connector_jars
from streamjoin.core.spec import PipelineSpec, parse_spec
from streamjoin.core.topic_plan import plan_topics
from streamjoin.kafka.admin import delete_topics, ensure_topics
from streamjoin.kafka.clients import consume_all

pytestmark = [pytest.mark.spark, pytest.mark.kafka]
FAULT = "streamjoin.kernel.fault"  # TransactionalTask.FAULT


def _spec(tmp_path: Path, *, partitions: int = 1, exactly_once: bool = False) -> tuple[PipelineSpec, Path]:
    """A stream-table left join with topic names of its own, written to ``spec.yaml``."""
    suffix = uuid.uuid4().hex[:8]
    text = {"format": "string"}
    data = {
        "name": f"failing_{suffix}",
        "kafka": {"partitions": partitions, "replication_factor": 1},
        "inputs": {
            "views": {"topic": f"views-{suffix}", "role": "stream", "key": text, "value": text},
            "users": {"topic": f"users-{suffix}", "role": "table", "key": text, "value": text},
        },
        "join": {"shape": "stream-table", "kind": "left", "left": "views", "right": "users"},
        "output": {"topic": f"enriched-{suffix}", "delivery": "exactly_once" if exactly_once else "at_least_once"},
        "dead_letter_topic": f"dlq-{suffix}",
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return parse_spec(data, str(path)), path


def _run(spark: Any, spec_path: Path, bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """The job's entry point in this process (its session is this one); returns its exit code."""
    entry = job_module("stream_join")
    monkeypatch.setattr(entry, "build_session", lambda *args, **kwargs: spark)
    return int(entry.main(["--spec", str(spec_path), "--bootstrap", bootstrap, "--checkpoint",
                           str(tmp_path / "ck"), "--home", str(tmp_path), "--available-now"]))  # fmt: skip


def _failure(tmp_path: Path) -> JobFailure:
    failure = PipelineFiles(tmp_path / "ck").failure()
    assert failure is not None, "the job recorded no failure"
    return failure


def _produce(bootstrap: str, topic: str, partition: int, records: int = 1) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    now = int(time.time() * 1000)
    for n in range(records):
        producer.produce(topic, key=f"u{n}".encode(), value=b"/home", partition=partition, timestamp=now + n)
    assert producer.flush(30) == 0


def _cleanup(bootstrap: str, spec: PipelineSpec) -> None:
    delete_topics({"bootstrap.servers": bootstrap}, plan_topics(spec).names, timeout=15)


@pytest.mark.parametrize("missing", ["output", "input-stream"])
def test_a_missing_topic_is_terminal_at_start(
    missing: str, spark: Any, kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, path = _spec(tmp_path)
    plan = plan_topics(spec)
    topic = next(t.name for t in plan.topics if t.role.value == missing)
    others = tuple(t for t in plan.topics if t.name != topic)
    ensure_topics({"bootstrap.servers": kafka_bootstrap}, dataclasses.replace(plan, topics=others))
    try:
        code = _run(spark, path, kafka_bootstrap, tmp_path, monkeypatch)
    finally:
        _cleanup(kafka_bootstrap, spec)
    failure = _failure(tmp_path)
    assert (code, failure.error, failure.transient) == (EXIT_TERMINAL, "MissingTopicError", False), failure
    assert f"topic '{topic}' ({missing}) does not exist" in failure.message
    assert "provision_topics" in failure.message  # what to do
    assert PipelineFiles(tmp_path / "ck").status() is None  # no batch ran


def test_a_record_of_a_partition_the_pipeline_does_not_have_is_terminal(
    spark: Any, kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inputs have 3 partitions, the spec says 2: the kernel's task partitioner refuses partition 2's record
    in a task; Spark fails the job with a SparkException whose cause is the kernel's TerminalKernelException."""
    spec, path = _spec(tmp_path, partitions=2)
    plan = plan_topics(spec)
    inputs = {i.topic for i in spec.inputs.values()}
    wider = tuple(dataclasses.replace(t, partitions=3) if t.name in inputs else t for t in plan.topics)
    ensure_topics({"bootstrap.servers": kafka_bootstrap}, dataclasses.replace(plan, topics=wider))
    try:
        _produce(kafka_bootstrap, spec.left.topic, partition=2)
        code = _run(spark, path, kafka_bootstrap, tmp_path, monkeypatch)
    finally:
        _cleanup(kafka_bootstrap, spec)
    _assert_terminal_kernel_failure(tmp_path, code, "a record of Kafka partition 2 but the pipeline has 2",
                                    "set kafka.partitions")  # fmt: skip


def _assert_terminal_kernel_failure(tmp_path: Path, code: int, starts: str, what_to_do: str) -> None:
    """The job exited terminal, its recorded failure the kernel's TerminalKernelException (``starts``), saying
    what to do."""
    failure = _failure(tmp_path)
    assert (code, failure.error, failure.transient) == (EXIT_TERMINAL, "JvmError", False), failure
    assert failure.message.startswith(f"dev.streamjoin.kernel.TerminalKernelException: {starts}"), failure.message
    assert what_to_do in failure.message


def test_a_batch_written_by_another_task_count_is_terminal(
    spark: Any, kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exactly-once delivery: the markers say an earlier driver of this checkpoint wrote batch 0 in 7 tasks and
    died before its commit; this driver runs batch 0 again in fewer: its output cannot be kept exactly once."""
    spec, path = _spec(tmp_path, exactly_once=True)
    ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan_topics(spec))
    query = tmp_path / "ck" / "query" / "metadata"  # the checkpoint's query id, as OffsetLog writes it
    query.parent.mkdir(parents=True)
    query.write_text('{"id": "earlier-query"}\n')
    try:
        _produce(kafka_bootstrap, spec.left.topic, partition=0)
        producer = Producer({"bootstrap.servers": kafka_bootstrap})
        for task in range(7):  # BatchMarkers.record: key task-<t>, value "<query> <batch> <tasks>"
            producer.produce(spec.marker_topic, key=f"task-{task}".encode(), value=b"earlier-query 0 7", partition=0)
        assert producer.flush(30) == 0
        code = _run(spark, path, kafka_bootstrap, tmp_path, monkeypatch)
    finally:
        _cleanup(kafka_bootstrap, spec)
    _assert_terminal_kernel_failure(tmp_path, code, f"pipeline {spec.name}: batch 0 was written by 7 tasks",
                                    "reprocess the affected days")  # fmt: skip


def test_records_kafka_deleted_before_their_batch_ran_are_terminal_data_loss(
    spark: Any, kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batch 0 was planned over offsets 0-4 of the views' partition 0 and the driver died before it ran; then
    Kafka deleted offsets 0-1 (retention): the kernel's task cannot read the batch whole, so the job stops
    terminal, naming the partition and the offsets, instead of running the batch without them."""
    spec, path = _spec(tmp_path)
    ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan_topics(spec))
    views, users = spec.left.topic, spec.right.topic
    log = OffsetLog(tmp_path / "ck" / QUERY_DIR)
    log.set_initial({views: {0: 0}, users: {0: 0}})
    log.plan(0, {views: {0: 4}, users: {0: 0}}, int(time.time() * 1000))
    try:
        _produce(kafka_bootstrap, views, partition=0, records=4)
        admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
        for future in admin.delete_records([TopicPartition(views, 0, 2)]).values():
            future.result(timeout=30)
        code = _run(spark, path, kafka_bootstrap, tmp_path, monkeypatch)
    finally:
        _cleanup(kafka_bootstrap, spec)
    _assert_terminal_kernel_failure(tmp_path, code, f"Kafka no longer has offset 0 of {views}-0 [0, 4)",
                                    "reprocess the pipeline from a new checkpoint")  # fmt: skip
    assert OffsetLog(tmp_path / "ck" / QUERY_DIR).last_committed() is None


def test_a_transient_kernel_failure_in_a_write_task_is_transient(
    spark: Any, kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exactly-once delivery; the write task of batch 0 dies in its transaction (the kernel's test fault, a
    TransientKernelException): the job exits transient, and a restart from the checkpoint would run it again."""
    spec, path = _spec(tmp_path, exactly_once=True)
    ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan_topics(spec))
    system = spark.sparkContext._jvm.java.lang.System
    system.setProperty(FAULT, "mid_transaction:0:0")
    try:
        _produce(kafka_bootstrap, spec.left.topic, partition=0)
        code = _run(spark, path, kafka_bootstrap, tmp_path, monkeypatch)
    finally:
        system.clearProperty(FAULT)
        _cleanup(kafka_bootstrap, spec)
    failure = _failure(tmp_path)
    assert (code, failure.error, failure.transient) == (EXIT_TRANSIENT, "JvmError", True), failure
    assert failure.message.startswith("dev.streamjoin.kernel.TransientKernelException: test fault"), failure.message


def test_a_batch_whose_tasks_committed_before_the_job_died_is_not_written_again(
    spark: Any, kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exactly-once delivery, two partitions; task 0 of batch 0 commits its transaction (its results, its dead
    letter and its marker) and then fails (the kernel's test fault ``after_commit``): the job exits transient
    before ``commits/0``. The restart runs batch 0 again: task 0 finds its marker and sends nothing, task 1
    writes. Read committed, each result and each dead letter is on its topic once."""
    spec, path = _spec(tmp_path, partitions=2, exactly_once=True)
    ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan_topics(spec))
    system = spark.sparkContext._jvm.java.lang.System
    try:
        for partition in (0, 1):
            _produce(kafka_bootstrap, spec.left.topic, partition=partition, records=3)
            producer = Producer({"bootstrap.servers": kafka_bootstrap})
            producer.produce(spec.left.topic, key=f"dead{partition}".encode(), value=None, partition=partition)
            assert producer.flush(30) == 0
        system.setProperty(FAULT, "after_commit:0:0")
        try:
            code = _run(spark, path, kafka_bootstrap, tmp_path, monkeypatch)
        finally:
            system.clearProperty(FAULT)
        assert (code, _failure(tmp_path).transient) == (EXIT_TRANSIENT, True)
        assert OffsetLog(tmp_path / "ck" / QUERY_DIR).last_committed() is None
        assert _run(spark, path, kafka_bootstrap, tmp_path, monkeypatch) == 0
        results = consume_all(kafka_bootstrap, str(spec.output.topic), timeout=30)
        letters = consume_all(kafka_bootstrap, spec.dead_letter_topic, timeout=30)
    finally:
        _cleanup(kafka_bootstrap, spec)
    assert sorted((r.key or b"", r.value or b"") for r in results) == [
        (f"u{n}".encode(), b'{"left":"/home","right":null}') for n in (0, 0, 1, 1, 2, 2)
    ]
    assert sorted(r.key or b"" for r in letters) == [b"dead0", b"dead1"]
    assert OffsetLog(tmp_path / "ck" / QUERY_DIR).last_committed() == 0


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at_least_once", "exactly_once"])
def test_a_record_larger_than_its_output_topic_takes_is_terminal_naming_the_topic(
    spark: Any, kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exactly_once: bool
) -> None:
    """The output topic takes record batches of at most 2 KiB (``max.message.bytes``) and a view carries 8 KiB of
    random text, which its join result keeps. The broker refuses the write task's record (Kafka's
    RecordTooLargeException, which no retry cures; in a transaction the commit fails with it): the job exits
    terminal, naming the topic and the setting to raise, and batch 0 stays uncommitted."""
    spec, path = _spec(tmp_path, exactly_once=exactly_once)
    output = spec.output.topic
    plan = plan_topics(spec)
    small = tuple(
        dataclasses.replace(t, config={**t.config, "max.message.bytes": "2048"}) if t.name == output else t
        for t in plan.topics
    )  # fmt: skip
    ensure_topics({"bootstrap.servers": kafka_bootstrap}, dataclasses.replace(plan, topics=small))
    try:
        producer = Producer({"bootstrap.servers": kafka_bootstrap})
        producer.produce(spec.left.topic, key=b"u1", value=secrets.token_hex(4096).encode(), partition=0)
        assert producer.flush(30) == 0
        code = _run(spark, path, kafka_bootstrap, tmp_path, monkeypatch)
    finally:
        _cleanup(kafka_bootstrap, spec)
    _assert_terminal_kernel_failure(tmp_path, code, f"writing to Kafka topic '{output}' failed: "
                                    "org.apache.kafka.common.errors.RecordTooLargeException",
                                    f"raise max.message.bytes of topic '{output}'")  # fmt: skip
    assert OffsetLog(tmp_path / "ck" / QUERY_DIR).last_committed() is None


def test_a_job_without_the_kernel_jar_is_terminal_at_start(kafka_bootstrap: str, tmp_path: Path) -> None:
    """spark-submit without the kernel's jar in --jars: the job stops before any batch, terminal, and says to
    build the jar; it never says a restart may help."""
    _, path = _spec(tmp_path)
    jars = [j for j in connector_jars() if not j.endswith(KERNEL_JAR.name)]
    assert len(jars) < len(connector_jars())
    command = [
        str(Path(sys.executable).parent / "spark-submit"), "--master", "local[1]", "--jars", ",".join(jars),
        "--conf", "spark.ui.enabled=false", str(PROJECT_HOME / "jobs" / "stream_join.py"), "--spec", str(path),
        "--bootstrap", kafka_bootstrap, "--checkpoint", str(tmp_path / "ck"), "--home", str(tmp_path),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable})  # fmt: skip
    printed = done.stdout + done.stderr  # spark-submit passes the Python process's stderr on to its stdout
    failure = _failure(tmp_path)
    kind = (done.returncode, failure.error, failure.transient)
    assert kind == (EXIT_TERMINAL, "KernelMissingError", False), printed[-3000:]
    assert "run `make setup`" in failure.message and str(KERNEL_JAR) in failure.message
    assert "a person must act before a restart" in printed and "may help" not in printed
