"""Errors of the streamjoin package.

Each error carries its data as attributes and says whether restarting from the checkpoint can help
(``transient``) or a human must act (``terminal``), so supervisors decide by type, not by message.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def field_path(loc: Iterable[int | str]) -> str:
    """A validation error's location as users write it: ``inputs.clicks.topic``, ``expectations[0].kwargs``
    (pydantic's internal steps, ``function-...``, ``constrained-...`` and a mapping key's ``[key]``, left out)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not str(part).startswith(("function-", "constrained-")) and part != "[key]":
            out += f".{part}" if out else str(part)
    return out


def value_at(data: Any, loc: Iterable[int | str]) -> Any:
    """The value at ``loc`` inside ``data`` (as read from YAML), or the deepest one that exists; where ``loc``
    names a mapping's key (pydantic's ``[key]`` step), the key, never the value beside it (a secret, maybe)."""
    loc = list(loc)
    for index, part in enumerate(loc):
        if loc[index + 1 : index + 2] == ["[key]"]:
            return part
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return data
    return data


class StreamJoinError(Exception):
    """Base class. ``transient`` tells a supervisor whether a restart from the checkpoint may help."""

    transient: bool = False


class SpecError(StreamJoinError):
    """A pipeline spec is invalid: names the file, the path inside it, the bad value and what is allowed."""

    def __init__(self, file: str, path: str, value: Any, expected: str) -> None:
        self.file, self.path, self.value, self.expected = file, path, value, expected
        super().__init__(f"{file}: {path or '<root>'}: got {value!r}; expected {expected}")


class CorruptCheckpointError(StreamJoinError):
    """A checkpoint file cannot be read: the job refuses to start rather than start over from nothing.
    Terminal: a human decides whether to repair the file or move the checkpoint aside."""

    def __init__(self, path: Any, problem: str) -> None:
        self.path, self.problem = str(path), problem
        super().__init__(f"{path}: {problem}")


class CheckpointLockedError(StreamJoinError):
    """Another driver holds the checkpoint's lease: two drivers on one checkpoint would both write its
    batches. Terminal for this driver (the other one is running)."""

    def __init__(self, path: Any, owner: str, expires_in: float) -> None:
        self.path, self.owner, self.expires_in = str(path), owner, expires_in
        super().__init__(
            f"{path}: the checkpoint is held by {owner} (lease renewed, expires in {expires_in:.0f} s if that "
            "driver dies); stop that driver first (stop marker or the stop DAG), or wait for the lease to expire"
        )


class StateLayoutError(StreamJoinError):
    """The checkpoint's state was written by the DataFrame engine of a release before the kernel ran every
    shape: its tables are files the kernel does not read. Terminal: starting from it would lose the state
    without a word."""

    def __init__(self, path: Any, version: int, pipeline: str, found: Iterable[str]) -> None:
        self.path, self.version, self.pipeline, self.found = str(path), version, pipeline, sorted(found)
        super().__init__(
            f"{path}: state version {version} of pipeline {pipeline or '<unnamed>'!r} holds "
            f"{', '.join(self.found)}, written by the DataFrame engine of an earlier streamjoin release; this "
            "release keeps its state in Spark's state store and cannot read it. Either reprocess: move the "
            "checkpoint aside and run the pipeline again from its topics (the stream restarts from its offsets "
            "policy), or finish this checkpoint with the earlier release first"
        )


class CoPartitioningError(StreamJoinError):
    """Two topics that must be co-partitioned have different partition counts."""

    def __init__(self, left_topic: str, left_partitions: int, right_topic: str, right_partitions: int) -> None:
        self.left_topic, self.left_partitions = left_topic, left_partitions
        self.right_topic, self.right_partitions = right_topic, right_partitions
        super().__init__(
            f"topics {left_topic!r} ({left_partitions} partitions) and {right_topic!r} "
            f"({right_partitions} partitions) must be co-partitioned (same partition count) for the join; "
            f"recreate one of them, or repartition one side: `repartition: true` on its input in the spec "
            f"(an internal topic with the other side's count)"
        )


class TopicConfigError(StreamJoinError):
    """An existing topic has a config that contradicts the plan (e.g. a table topic not compacted)."""

    def __init__(self, topic: str, key: str, expected: str, actual: str) -> None:
        self.topic, self.key, self.expected, self.actual = topic, key, expected, actual
        super().__init__(f"topic {topic!r}: {key} is {actual!r}, expected {expected!r}")


class ReplicationFactorError(StreamJoinError):
    """The spec asks for more replicas than the cluster has brokers."""

    def __init__(self, topic: str, replication_factor: int, brokers: int) -> None:
        self.topic, self.replication_factor, self.brokers = topic, replication_factor, brokers
        super().__init__(
            f"topic {topic!r}: replication factor {replication_factor} is larger than the "
            f"{brokers} broker(s) of the cluster; lower kafka.replication_factor in the spec"
        )


class KafkaUnavailableError(StreamJoinError):
    """The broker could not be reached in time."""

    transient = True


class SuiteError(StreamJoinError):
    """A quality suite file is invalid: names the file, the field inside it, the bad value and what is allowed.

    Terminal: a human must fix the file (``include/expectations/<pipeline>.yaml``).
    """

    def __init__(self, file: str, field: str, value: Any, expected: str) -> None:
        self.file, self.field, self.value, self.expected = file, field, value, expected
        super().__init__(f"{file}: {field or '<root>'}: got {value!r}; expected {expected}")


class LocalBrokerError(StreamJoinError):
    """The local development broker (``streamjoin.localdev``) could not be started: ports taken, jars or
    Java missing, storage format failed, or the JVM exited. The message ends with what the broker printed."""

    def __init__(self, problem: str, home: object) -> None:
        self.problem, self.home = problem, str(home)
        log = f"{self.home}/broker.log"
        super().__init__(f"local Kafka broker in {self.home}: {problem}\n(see {log} and {self.home}/broker.stdout)")


class TopicProvisionError(StreamJoinError):
    """The broker refused to create or describe a topic (policy violation, invalid config, authorization)."""

    def __init__(self, topic: str, action: str, reason: str) -> None:
        self.topic, self.action, self.reason = topic, action, reason
        super().__init__(f"topic {topic!r}: {action} failed: {reason}")


class DeliveryError(StreamJoinError):
    """Records could not be written to Kafka. Transient when every failure was retriable (timeouts, leader
    changes); terminal otherwise (unknown topic, record too large, authorization)."""

    def __init__(self, topic: str, failed: int, total: int, first_error: str, *, transient: bool = False) -> None:
        self.topic, self.failed, self.total, self.first_error = topic, failed, total, first_error
        self.transient = transient
        super().__init__(f"{failed} of {total} records were not delivered (first on {topic!r}: {first_error})")


class ConsumeTimeoutError(StreamJoinError):
    """Fewer records than expected arrived on a topic within the wait."""

    transient = True

    def __init__(self, topic: str, expected: str, got: int, timeout_s: float, last: str) -> None:
        self.topic, self.expected, self.got, self.timeout_s, self.last = topic, expected, got, timeout_s, last
        super().__init__(f"expected {expected} on `{topic}`, got {got} within {timeout_s:g} s; last: {last}")


class KafkaConfigError(StreamJoinError, ValueError):
    """A Kafka client setting of a connection cannot be used (unknown to the mapping for Spark's Java client,
    missing, or contradictory). Terminal: fix the connection. The message names the setting, never a secret."""

    def __init__(self, source: str, key: str, problem: str) -> None:
        self.source, self.key, self.problem = source, key, problem
        super().__init__(f"{source}: {key}: {problem}")


class KafkaAuthenticationError(StreamJoinError):
    """The cluster refused the connection's credentials or TLS handshake. Terminal: a restart cannot help;
    fix the connection's user, password or certificates."""

    def __init__(self, source: str, reason: str) -> None:
        self.source, self.reason = source, reason
        super().__init__(f"{source}: authentication to Kafka failed: {reason}; check the connection's credentials")


class MissingTopicError(StreamJoinError):
    """A topic the job reads or writes (an input, its output, aggregate output, dead letters or batch markers) does
    not exist. Terminal: the job checks at start; without it the job would fail on it and restart, forever."""

    def __init__(self, topic: str, role: str, where: str) -> None:
        self.topic, self.role, self.where = topic, role, where
        super().__init__(
            f"topic {topic!r} ({role}) does not exist at {where}; create it: run the pipeline's provision_topics "
            "task (its DAG runs it before the job), or create it as `streamjoin plan <spec>` lists it"
        )


class KernelMissingError(StreamJoinError):
    """The engine kernel's classes are not on the classpath of Spark's driver or executors. Terminal: the
    job cannot run a batch without them."""

    def __init__(self, jar: str, detail: str = "") -> None:
        self.jar, self.detail = jar, detail
        super().__init__(
            f"the engine kernel's classes are not on Spark's classpath{f' ({detail})' if detail else ''}: run "
            f"`make setup` to build {jar}, then start the job with it in spark.jars (the launcher adds it once it "
            "is built)"
        )


class JvmError(StreamJoinError):
    """A failure in Spark's JVM (the kernel, a task, Spark itself), kind decided by its Java class
    (``streamjoin.spark.failures``): terminal for a ``TerminalKernelException`` or another class a restart
    cannot cure, transient otherwise. ``java_class`` and ``java_message`` are the deciding exception's."""

    def __init__(self, java_class: str, java_message: str, *, transient: bool, action: str = "") -> None:
        self.java_class, self.java_message, self.transient, self.action = java_class, java_message, transient, action
        super().__init__(f"{java_class}: {java_message}" + (f"; {action}" if action else ""))


class SchemaRegistryUnavailableError(StreamJoinError):
    """The schema registry did not answer (connection refused, timeout, TLS, a 5xx) or its connection has no
    address. Transient: a restart once it answers may help."""

    transient = True

    def __init__(self, where: str, problem: str) -> None:
        self.where, self.problem = where, problem
        super().__init__(f"schema registry {where}: {problem}")


class SchemaRegistryConfigError(StreamJoinError):
    """A serde's schema registry connection is missing or has no address. Terminal: create or fix it."""

    def __init__(self, conn_id: str, problem: str) -> None:
        self.conn_id, self.problem = conn_id, problem
        super().__init__(f"schema registry connection {conn_id!r}: {problem}")


class SchemaRegistrationError(StreamJoinError):
    """The registry refused a pipeline's schema under a subject (incompatible with its versions, invalid), or
    an input's subject has no schema. Terminal: change the schema or the subject's compatibility level."""

    def __init__(self, subject: str, version: int | None, message: str) -> None:
        self.subject, self.version, self.message = subject, version, message
        against = f"its latest version {version}" if version is not None else "no version yet"
        super().__init__(f"schema registry subject {subject!r} ({against}) refused the schema: {message}")


class SparkSubmitError(StreamJoinError):
    """spark-submit exited with an error (or could not start); the message ends with the last lines it printed."""

    def __init__(self, name: str, returncode: int | None, tail: str) -> None:
        self.name, self.returncode, self.tail = name, returncode, tail
        super().__init__(f"{name}: spark-submit exited with {returncode}; last lines:\n{tail}")
