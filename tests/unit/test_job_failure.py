"""Why a job stopped: the job records its failure (``failure.json``) and exits with a code that says whether a
restart can help; the owner reads it (restart after a backoff, or give up and alert at once)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamjoin.core.errors import (
    CheckpointLockedError,
    CorruptCheckpointError,
    KafkaUnavailableError,
    KernelMissingError,
    MissingTopicError,
)
from streamjoin.core.job_files import EXIT_TERMINAL, EXIT_TRANSIENT, JobFailure, PipelineFiles
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.supervision import Event, Health, Policy, State, restart_delay, watch_step


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (CorruptCheckpointError("/c/query/metadata", "not JSON"), False),
        (CheckpointLockedError("/c", "host:1", 12.0), False),
        (KafkaUnavailableError("broker down"), True),
        (RuntimeError("Py4JJavaError: task failed"), True),  # not known to be permanent
        (MissingTopicError("out", "join output", "127.0.0.1:9092"), False),
        (KernelMissingError(".local/jars/kernel/streamjoin-kernel.jar"), False),
    ],
)
def test_a_failure_says_whether_a_restart_can_help(error: Exception, transient: bool) -> None:
    failure = JobFailure.of(error, at=5.0)
    assert failure.transient is transient
    assert failure.exit_code == (EXIT_TRANSIENT if transient else EXIT_TERMINAL)
    assert failure.describe().startswith(type(error).__name__ + ": ")


def test_only_the_failure_of_the_driver_launched_last_counts(tmp_path: Path) -> None:
    files = PipelineFiles(tmp_path)
    assert files.failure() is None and files.run_failure() is None
    files.record_failure(JobFailure.of(CorruptCheckpointError("/m", "bad"), at=time.time()))
    assert files.failure() is not None and not files.failure().transient  # type: ignore[union-attr]
    assert files.run_failure() is None  # no driver was launched: whose failure is it?
    time.sleep(0.01)
    files.record_driver(pid=1, pgid=1, log_path="/l", name="x")  # a new driver, started after that failure
    assert files.run_failure() is None
    files.record_failure(JobFailure.of(KafkaUnavailableError("away")))
    assert files.run_failure() == files.failure()
    (tmp_path / "failure.json").write_text('{"error": "X"}')  # a torn or foreign record is no failure
    assert files.failure() is None


def test_restarts_back_off_exponentially_within_the_window() -> None:
    policy = Policy(window=600, backoff=10, backoff_max=45)
    now = 1_000.0
    assert restart_delay([], now, policy) == 0  # the first death: at once
    assert restart_delay([now - 5], now, policy) == 10
    assert restart_delay([now - 50, now - 5], now, policy) == 20
    assert restart_delay([now - 90, now - 50, now - 5], now, policy) == 40
    assert restart_delay([now - 99, now - 90, now - 50, now - 5], now, policy) == 45  # capped
    assert restart_delay([now - 700], now, policy) == 0  # out of the window


def test_a_dead_driver_fires_only_once_its_backoff_ended() -> None:
    dead = Health(State.DEAD, "no driver")

    def step(now: float, restart_after: float | None) -> Event | None:
        return watch_step(dead, "run", waiting=False, lagging_since=None, now=now, watch_until=now + 60,
                          policy=Policy(), restart_after=restart_after)[0]  # fmt: skip

    assert step(100.0, None) is Event.DEAD
    assert step(100.0, 130.0) is None
    assert step(130.0, 130.0) is Event.DEAD
    stopped = watch_step(Health(State.STOPPED, ""), "stop", waiting=False, lagging_since=None, now=100.0,
                         watch_until=160.0, policy=Policy(), restart_after=130.0)  # fmt: skip
    assert stopped[0] is Event.STOPPED  # a stop is not held back by a backoff


def test_the_job_records_a_terminal_failure_and_exits_with_its_code(tmp_path: Path) -> None:
    """The real entry point, before Spark starts: a spec that cannot run is refused, recorded, terminal."""
    spec = tmp_path / "broken.yaml"
    spec.write_text("name: broken\njoin: {shape: nope}\n")
    checkpoint = tmp_path / "checkpoint"
    done = subprocess.run(
        [sys.executable, str(PROJECT_HOME / "jobs" / "stream_join.py"), "--spec", str(spec),
         "--bootstrap", "127.0.0.1:1", "--checkpoint", str(checkpoint)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    failure = PipelineFiles(checkpoint).failure()
    assert failure is not None, done.stderr[-2000:]
    assert failure.error == "SpecError" and not failure.transient
    assert done.returncode == EXIT_TERMINAL
    assert f"streamjoin failed: {failure.describe()[:60]}" in done.stderr
    assert "a person must act before a restart" in done.stderr


def test_a_stale_driver_is_hung_only_while_input_waits() -> None:
    def step(lag: dict[str, int]) -> Event | None:
        health = Health(State.STALE, "last progress 200s ago", lag)
        return watch_step(health, "run", waiting=False, lagging_since=None, now=0.0, watch_until=60.0,
                          policy=Policy())[0]  # fmt: skip

    assert step({"clicks": 3}) is Event.HUNG
    assert step({"clicks": 0}) is None  # idle: nothing to do, nothing stuck
    slow_start = Health(State.STALE, "no batch committed 200s after start", {"clicks": 3}, committed=False)
    assert watch_step(slow_start, "run", waiting=False, lagging_since=None, now=0.0, watch_until=60.0,
                      policy=Policy())[0] is None  # fmt: skip


def test_the_hung_alert_says_the_owner_restarted_it_not_that_a_task_failed() -> None:
    from streamjoin.airflow.notifiers import build_alert
    from streamjoin.airflow.operators.supervise import JobHung

    alert = build_alert({"exception": JobHung("seed: the driver made no progress (last progress 200s ago)")})
    assert alert.payload["event"] == "streamjoin.job_hung"
    assert alert.subject == "[streamjoin] seed: job hung" and "failed" not in alert.subject
    assert "made no progress" in alert.text


@pytest.mark.parametrize("answer", ["refused", "away", "accepted"])
def test_a_driver_dead_of_a_transient_error_under_a_refused_password_fails_the_owner_at_once(
    answer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A password revoked under a running job reaches it as a broker gone away (transient): the owner asks the
    cluster before backing off, and a refused connection fails the task at once naming it (no backoff, no crash
    loop verdict). Away or accepted: the backoff as before (a second death within the window waits)."""
    from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook
    from streamjoin.airflow.operators.supervise import StreamJobFailure, SuperviseStreamJoinOperator
    from streamjoin.core.errors import KafkaAuthenticationError
    from streamjoin.core.job_files import SupervisorRecord
    from streamjoin.core.spec import load_spec

    def checked_config(self: StreamJoinKafkaHook, timeout: float = 20.0) -> None:
        if answer == "refused":
            raise KafkaAuthenticationError("connection 'k'", "SASL authentication error: invalid credentials")
        if answer == "away":
            raise KafkaUnavailableError("connection 'k': no answer within 10 s")

    monkeypatch.setattr(StreamJoinKafkaHook, "checked_config", checked_config)
    files = PipelineFiles(tmp_path / "checkpoint")
    files.record_driver(None, None, str(tmp_path / "driver.log"), "streamjoin-x")
    files.record_failure(JobFailure.of(KafkaUnavailableError("no metadata: Broker transport failure")))
    record = SupervisorRecord(restarts=[time.time() - 60])  # one restart in the window: the next one backs off
    files.save_supervisor(record)
    owner = SuperviseStreamJoinOperator(task_id="own_job", spec_path="include/pipelines/clicks_per_region.yaml",
                                        kafka_conn_id="k", policy=Policy())  # fmt: skip
    spec = load_spec(PROJECT_HOME / "include" / "pipelines" / "clicks_per_region.yaml")
    if answer == "refused":
        with pytest.raises(StreamJobFailure, match="a restart cannot fix: KafkaAuthenticationError") as failed:
            owner._backing_off(spec, files, record)
        assert "invalid credentials" in str(failed.value) and "Broker transport failure" in str(failed.value)
        assert files.supervisor().gave_up_at is not None
    else:
        assert owner._backing_off(spec, files, record) is True  # waits 10 s before the second restart
        assert files.supervisor().gave_up_at is None and files.supervisor().restart_after is not None


def test_a_driver_dead_of_a_terminal_failure_while_no_owner_watched_is_not_restarted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner's task starts (a new DAG run) and finds the driver dead of a terminal failure it recorded (the
    kernel refused a record of a partition the pipeline does not have): it gives up at once, naming the
    failure, and launches nothing."""
    from streamjoin.airflow.operators import supervise
    from streamjoin.core.errors import JvmError
    from streamjoin.core.spec import load_spec
    from streamjoin.kafka.client_config import KafkaClientConfig

    spec = load_spec(PROJECT_HOME / "include" / "pipelines" / "clicks_per_region.yaml")
    files = PipelineFiles(tmp_path / "checkpoint")
    files.record_driver(None, None, str(tmp_path / "driver.log"), "streamjoin-x")
    time.sleep(0.01)  # the failure comes after the driver's start: it is that driver's
    terminal = JvmError("dev.streamjoin.kernel.TerminalKernelException", "a record of Kafka partition 2 but the "
                        "pipeline has 2 partitions; a person must act", transient=False)  # fmt: skip
    files.record_failure(JobFailure.of(terminal))

    def launch(*args: object, **kwargs: object) -> None:
        raise AssertionError("the owner restarted a job that died of a terminal failure")

    spec_path = "include/pipelines/clicks_per_region.yaml"
    owner = supervise.SuperviseStreamJoinOperator(task_id="own_job", spec_path=spec_path, policy=Policy())
    monkeypatch.setattr(supervise, "pipeline_files", lambda _spec: files)
    monkeypatch.setattr(supervise, "launch_job", launch)
    monkeypatch.setattr(owner, "_setup", lambda check=True: (spec, KafkaClientConfig.of("127.0.0.1:1")))
    with pytest.raises(supervise.StreamJobFailure, match=r"a restart cannot fix: JvmError: dev\.streamjoin\.kernel"):
        owner.execute({})
    record = files.supervisor()
    assert record.gave_up_at is not None and record.restarts == []
    assert record.last is not None and "TerminalKernelException" in record.last.reason


class _JavaClass:
    """What py4j gives for a Java class: its name and superclass (enough for ``jvm_error``)."""

    def __init__(self, *names: str) -> None:
        self.names = names

    def getName(self) -> str:  # py4j: the Java method's name
        return self.names[0]

    def getSuperclass(self) -> _JavaClass | None:
        return _JavaClass(*self.names[1:]) if len(self.names) > 1 else None


class _Java:
    """A Java throwable as py4j presents it."""

    def __init__(self, classes: tuple[str, ...], message: str, cause: _Java | None = None) -> None:
        self.classes, self.message, self.cause = classes, message, cause

    def getClass(self) -> _JavaClass:
        return _JavaClass(*self.classes, "java.lang.Throwable", "java.lang.Object")

    def getMessage(self) -> str:
        return self.message

    def getCause(self) -> _Java | None:
        return self.cause


class _Py4JJavaError(Exception):
    def __init__(self, java: _Java) -> None:
        super().__init__("An error occurred while calling o42.join")
        self.java_exception = java


SPARK = ("org.apache.spark.SparkException", "java.lang.Exception")
ABORTED = "Job aborted due to stage failure: Task 1 in stage 3.0 failed 4 times, most recent failure: Lost task 1.3: "


@pytest.mark.parametrize(
    ("java", "transient", "named"),
    [
        # a task's exception Spark could not send back: only its description names it
        (_Java(SPARK, ABORTED + "dev.streamjoin.kernel.TerminalKernelException: batch 3 was written by 2 tasks\n\tat"),
         False, "dev.streamjoin.kernel.TerminalKernelException: batch 3 was written by 2 tasks"),
        # executors without the kernel's jar
        (_Java(SPARK, ABORTED + "...", _Java(("java.lang.ClassNotFoundException",),
                                              "dev.streamjoin.kernel.KernelTask")),
         False, "run `make setup`"),
        (_Java(SPARK, ABORTED + "...", _Java(("org.apache.kafka.common.errors.TopicAuthorizationException",
                                               "org.apache.kafka.common.errors.AuthorizationException"), "out-topic")),
         False, "grant the Kafka connection's user"),
        # not known to be permanent: transient, naming the root cause
        (_Java(SPARK, ABORTED + "...", _Java(("org.apache.kafka.common.errors.TimeoutException",),
                                              "Topic out not present in metadata after 60000 ms")),
         True, "org.apache.kafka.common.errors.TimeoutException: Topic out not present in metadata"),
    ],
)  # fmt: skip
def test_a_jvm_failure_is_classified_by_its_java_class(java: _Java, transient: bool, named: str) -> None:
    from streamjoin.spark.failures import jvm_error

    assert jvm_error(RuntimeError("the batch failed")) is None  # no Java exception behind it
    try:
        try:
            raise _Py4JJavaError(java)
        except _Py4JJavaError as exc:
            raise RuntimeError("while writing batch 7") from exc  # found behind a Python exception too
    except RuntimeError as outer:
        error = jvm_error(outer)
    assert error is not None and error.transient is transient
    assert named in str(error)
    assert JobFailure.of(error).exit_code == (EXIT_TRANSIENT if transient else EXIT_TERMINAL)
