"""Provision a pipeline's topics from its :class:`~streamjoin.core.topic_plan.TopicPlan` (confluent-kafka).

:func:`ensure_topics` checks before it acts, so a plan that cannot work changes nothing on the cluster:

1. replication factor larger than the broker count -> :class:`ReplicationFactorError`;
2. existing topics of a co-partition group with different partition counts, or a missing member whose
   planned count differs from an existing member's -> :class:`CoPartitioningError` (as Kafka Streams
   refuses to start); a missing internal repartition topic is planned with its group's existing count;
3. an existing topic the plan wants compacted (a table) whose ``cleanup.policy`` lacks ``compact`` ->
   :class:`TopicConfigError`;
4. the broker validates the missing topics (``validate_only``), then creates them and we wait until
   every partition has a leader, so producers can write at once.

Re-running it is a no-op that reports every topic as ``ok``. Every broker call is bounded by ``timeout``.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata, ConfigResource, NewTopic

from streamjoin.core.errors import (
    CoPartitioningError,
    KafkaUnavailableError,
    ReplicationFactorError,
    StreamJoinError,
    TopicConfigError,
    TopicProvisionError,
)
from streamjoin.core.topic_plan import COMPACT, TopicPlan, TopicSpec

CREATED = "created"
OK = "ok"


@dataclass(frozen=True)
class TopicState:
    """A topic as the broker describes it."""

    name: str
    partitions: int
    replication_factor: int
    config: Mapping[str, str]

    @property
    def cleanup_policy(self) -> str:
        return self.config.get("cleanup.policy", "delete")


@dataclass(frozen=True)
class TopicOutcome:
    """What :func:`ensure_topics` did with one topic: ``created``, or ``ok`` (existed and fits the plan); or
    what it would do (:func:`check_plan`): ``create``, or ``exists``."""

    name: str
    status: str
    partitions: int
    replication_factor: int
    cleanup_policy: str
    role: str
    warnings: tuple[str, ...] = ()

    def summary(self) -> str:
        line = (
            f"{self.name}: {self.status} ({self.role}, {self.partitions} partitions, "
            f"RF {self.replication_factor}, cleanup.policy={self.cleanup_policy})"
        )
        return line + "".join(f"; WARNING: {w}" for w in self.warnings)


@dataclass(frozen=True)
class ProvisionReport:
    pipeline: str
    brokers: int
    topics: tuple[TopicOutcome, ...] = field(default_factory=tuple)

    @property
    def created(self) -> list[str]:
        return [t.name for t in self.topics if t.status == CREATED]

    @property
    def already_ok(self) -> list[str]:
        return [t.name for t in self.topics if t.status == OK]

    @property
    def warnings(self) -> list[str]:
        return [f"{t.name}: {w}" for t in self.topics for w in t.warnings]

    def as_dict(self) -> dict[str, Any]:
        """A small, JSON-able summary (an XCom)."""
        return {
            "pipeline": self.pipeline,
            "brokers": self.brokers,
            "created": self.created,
            "already_ok": self.already_ok,
            "partitions": {t.name: t.partitions for t in self.topics},
            "warnings": self.warnings,
        }


#: librdkafka's syslog level for admin clients: notices and worse. Its informational lines are not news: each
#: client destroyed after a multi-partition ListOffsets logs "BGQUEUE ... Purging 1 unserved events from
#: background queue" (level 6) on stderr, which Airflow's triggerer and task logs show as [error] lines
ADMIN_LOG_LEVEL = 5


def admin_client(admin_config: Mapping[str, Any]) -> AdminClient:
    """An AdminClient whose socket waits are bounded (librdkafka would otherwise retry for a minute) and that
    logs notices and worse (:data:`ADMIN_LOG_LEVEL`)."""
    config = {"socket.timeout.ms": 10_000, "socket.connection.setup.timeout.ms": 10_000,
              "log_level": ADMIN_LOG_LEVEL, **admin_config}  # fmt: skip
    return AdminClient(config)


class Deadline:
    """A time budget shared by several broker calls."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._end = time.monotonic() + timeout

    def left(self, minimum: float = 0.5) -> float:
        return max(minimum, self._end - time.monotonic())

    @property
    def passed(self) -> bool:
        return time.monotonic() >= self._end


def _metadata(admin: AdminClient, bootstrap: str, timeout: float, topic: str | None = None) -> ClusterMetadata:
    try:
        return admin.list_topics(topic=topic, timeout=timeout)
    except KafkaException as exc:
        raise KafkaUnavailableError(f"no metadata from Kafka at {bootstrap} within {timeout:.0f} s: {exc}") from exc


def _result(future: concurrent.futures.Future[Any], deadline: Deadline, what: str, topic: str) -> Any:
    try:
        return future.result(timeout=deadline.left())
    except concurrent.futures.TimeoutError as exc:
        raise KafkaUnavailableError(f"{what} {topic!r}: no answer within {deadline.timeout:.0f} s") from exc


def describe_topics(
    admin_config: Mapping[str, Any], names: Iterable[str], *, timeout: float = 30.0
) -> dict[str, TopicState]:
    """Partition count, replication factor and configs of those ``names`` that exist.

    :param admin_config: confluent-kafka client config with ``bootstrap.servers``
    :param names: topics to describe; missing ones are left out of the result
    :param timeout: seconds for all broker calls together
    """
    admin = admin_client(admin_config)
    return _describe(admin, str(admin_config.get("bootstrap.servers")), list(names), Deadline(timeout))


def _describe(admin: AdminClient, bootstrap: str, names: list[str], deadline: Deadline) -> dict[str, TopicState]:
    meta = _metadata(admin, bootstrap, deadline.left())
    present = [n for n in names if n in meta.topics and meta.topics[n].partitions]
    if not present:
        return {}
    resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in present]
    futures = admin.describe_configs(resources, request_timeout=deadline.left())
    states: dict[str, TopicState] = {}
    for resource, future in futures.items():
        name = resource.name
        try:
            entries = _result(future, deadline, "describing configs of", name)
        except KafkaException as exc:
            raise TopicProvisionError(name, "describe configs", str(exc)) from exc
        partitions = meta.topics[name].partitions
        replicas = max((len(p.replicas) for p in partitions.values()), default=0)
        config = {key: entry.value for key, entry in entries.items() if entry.value is not None}
        states[name] = TopicState(name, len(partitions), replicas, config)
    return states


def _check_copartitioning(plan: TopicPlan, existing: Mapping[str, TopicState]) -> None:
    for members in plan.copartition_groups().values():
        # Compare against an existing member first: its count is a fact, a planned count only an intent.
        ordered = sorted(members, key=lambda t: t.name not in existing)
        reference = ordered[0]
        ref_count = existing[reference.name].partitions if reference.name in existing else reference.partitions
        for other in ordered[1:]:
            count = existing[other.name].partitions if other.name in existing else other.partitions
            if count != ref_count:
                left, right = sorted(
                    [(reference.name, ref_count), (other.name, count)], key=lambda x: plan.names.index(x[0])
                )
                raise CoPartitioningError(left[0], left[1], right[0], right[1])


def _warnings(planned: TopicSpec, actual: TopicState) -> tuple[str, ...]:
    notes = []
    if actual.partitions != planned.partitions:
        notes.append(f"has {actual.partitions} partitions, the spec's kafka.partitions is {planned.partitions}")
    if actual.replication_factor != planned.replication_factor:
        notes.append(f"replication factor {actual.replication_factor}, the spec asks {planned.replication_factor}")
    if not planned.compacted and COMPACT in actual.cleanup_policy.split(","):
        notes.append(f"cleanup.policy={actual.cleanup_policy}: compaction drops earlier records of a key")
    for key, value in planned.config.items():
        if key != "cleanup.policy" and actual.config.get(key) != value:
            notes.append(f"{key} is {actual.config.get(key)!r}, the plan says {value!r}")
    return tuple(notes)


def ensure_topics(admin_config: Mapping[str, Any], plan: TopicPlan, *, timeout: float = 30.0) -> ProvisionReport:
    """Create the plan's missing topics and check the existing ones; idempotent.

    :param admin_config: confluent-kafka client config with ``bootstrap.servers``
    :param plan: from :func:`~streamjoin.core.topic_plan.plan_topics`
    :param timeout: seconds for all broker calls together
    :raises ReplicationFactorError: more replicas asked than brokers (nothing created)
    :raises CoPartitioningError: partition counts differ inside a co-partition group (nothing created)
    :raises TopicConfigError: an existing table topic is not compacted (nothing created)
    :raises TopicProvisionError: the broker refused a topic
    :raises KafkaUnavailableError: the cluster did not answer in time
    """
    deadline = Deadline(timeout)
    bootstrap = str(admin_config.get("bootstrap.servers"))
    admin = admin_client(admin_config)
    brokers = len(_metadata(admin, bootstrap, deadline.left()).brokers)
    for planned in plan.topics:
        if planned.replication_factor > brokers:
            raise ReplicationFactorError(planned.name, planned.replication_factor, brokers)

    existing = _describe(admin, bootstrap, plan.names, deadline)
    plan = _sized(plan, existing)
    _validate(plan, existing)

    missing = [t for t in plan.topics if t.name not in existing]
    raced = _create(admin, missing, deadline) if missing else set()
    if raced:  # another client created some of them since we looked: check those as existing topics
        existing.update(_describe_until_listed(admin, bootstrap, sorted(raced), deadline))
        _validate(plan, existing)
    created = [t for t in missing if t.name not in raced]
    outcomes = []
    for planned in plan.topics:
        if planned.name in existing:
            actual = existing[planned.name]
            outcomes.append(_outcome(planned, OK, actual, _warnings(planned, actual)))
        else:
            outcomes.append(_outcome(planned, CREATED, None, ()))
    if created:
        _wait_for_leaders(admin, bootstrap, created, deadline)
    return ProvisionReport(plan.pipeline, brokers, tuple(outcomes))


def check_plan(plan: TopicPlan, existing: Mapping[str, TopicState]) -> tuple[list[TopicOutcome], str | None]:
    """What provisioning would do, without doing it: per planned topic ``create`` or ``exists`` (with what
    differs from the plan), and the refusal provisioning would raise (co-partitioning, a table topic that
    is not compacted) as text, or None."""
    plan = _sized(plan, existing)
    outcomes = [
        _outcome(t, "exists", existing[t.name], _warnings(t, existing[t.name]))
        if t.name in existing
        else _outcome(t, "create", None, ())
        for t in plan.topics
    ]
    try:
        _validate(plan, existing)
    except StreamJoinError as exc:
        return outcomes, str(exc)
    return outcomes, None


def _sized(plan: TopicPlan, existing: Mapping[str, TopicState]) -> TopicPlan:
    """Internal repartition topics take the partition count of their group's existing topics."""
    return plan.resolved({name: state.partitions for name, state in existing.items()})


def _validate(plan: TopicPlan, existing: Mapping[str, TopicState]) -> None:
    _check_copartitioning(plan, existing)
    for planned in plan.topics:
        actual = existing.get(planned.name)
        if actual is not None and planned.compacted and COMPACT not in actual.cleanup_policy.split(","):
            raise TopicConfigError(planned.name, "cleanup.policy", COMPACT, actual.cleanup_policy)


def _describe_until_listed(
    admin: AdminClient, bootstrap: str, names: list[str], deadline: Deadline
) -> dict[str, TopicState]:
    """Topics the broker says exist may take a moment to appear in the metadata this client sees."""
    while True:
        states = _describe(admin, bootstrap, names, deadline)
        if len(states) == len(names):
            return states
        if deadline.passed:
            raise KafkaUnavailableError(f"topics {sorted(set(names) - states.keys())} exist but are not listed")
        time.sleep(0.1)


def _outcome(planned: TopicSpec, status: str, actual: TopicState | None, warnings: tuple[str, ...]) -> TopicOutcome:
    source = actual or TopicState(planned.name, planned.partitions, planned.replication_factor, planned.config)
    return TopicOutcome(
        planned.name, status, source.partitions, source.replication_factor, source.cleanup_policy,
        planned.role.value, warnings,
    )  # fmt: skip


def _create(admin: AdminClient, missing: list[TopicSpec], deadline: Deadline) -> set[str]:
    """Validate all, then create all; returns topics someone else created in between."""
    new = [NewTopic(t.name, t.partitions, t.replication_factor, config=dict(t.config)) for t in missing]
    raced: set[str] = set()
    for validate_only in (True, False):
        futures = admin.create_topics(
            new, validate_only=validate_only, request_timeout=deadline.left(), operation_timeout=deadline.left()
        )
        for name, future in futures.items():
            try:
                _result(future, deadline, "creating topic", name)
            except KafkaException as exc:
                error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
                if error is not None and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    raced.add(name)
                    continue
                action = "validating creation" if validate_only else "creation"
                raise TopicProvisionError(name, action, str(exc)) from exc
        new = [n for n in new if n.topic not in raced]
        if not new:
            break
    return raced


def _wait_for_leaders(admin: AdminClient, bootstrap: str, topics: list[TopicSpec], deadline: Deadline) -> None:
    pending = {t.name: t.partitions for t in topics}
    while pending:
        meta = _metadata(admin, bootstrap, deadline.left())
        for name, partitions in list(pending.items()):
            topic = meta.topics.get(name)
            if topic and len(topic.partitions) >= partitions and all(p.leader >= 0 for p in topic.partitions.values()):
                del pending[name]
        if not pending:
            return
        if deadline.passed:
            raise KafkaUnavailableError(
                f"topics {sorted(pending)} were created but have no leader for every partition "
                f"within {deadline.timeout:.0f} s"
            )
        time.sleep(0.1)


def delete_topics(admin_config: Mapping[str, Any], names: Iterable[str], *, timeout: float = 30.0) -> list[str]:
    """Delete those ``names`` that exist and wait until the broker no longer lists them.

    :return: the topics deleted
    """
    deadline = Deadline(timeout)
    bootstrap = str(admin_config.get("bootstrap.servers"))
    admin = admin_client(admin_config)
    meta = _metadata(admin, bootstrap, deadline.left())
    present = [n for n in dict.fromkeys(names) if n in meta.topics]
    if not present:
        return []
    futures = admin.delete_topics(present, request_timeout=deadline.left(), operation_timeout=deadline.left())
    for name, future in futures.items():
        try:
            _result(future, deadline, "deleting topic", name)
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if error is None or error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise TopicProvisionError(name, "deletion", str(exc)) from exc
    while True:
        listed = _metadata(admin, bootstrap, deadline.left()).topics
        if not any(n in listed for n in present):
            return present
        if deadline.passed:
            raise KafkaUnavailableError(f"topics {present} still listed {deadline.timeout:.0f} s after deletion")
        time.sleep(0.1)
