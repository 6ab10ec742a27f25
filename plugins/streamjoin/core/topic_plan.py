"""Which Kafka topics a pipeline needs, with partitions, replication and configs: a pure plan.

``ProvisionTopicsOperator`` computes the plan and hands it to :func:`streamjoin.kafka.admin.ensure_topics`,
which creates what is missing and checks what exists.

=================  ==============================  ===============  ==========================================
Topic              Role                            cleanup.policy   Partitions
=================  ==============================  ===============  ==========================================
stream input       ``input-stream``                delete           ``kafka.partitions``, co-partition group
table input        ``input-table``                 compact          ``kafka.partitions``, co-partition group
global table       ``input-global-table``          compact          ``kafka.partitions`` on creation; any count
                                                                    is fine (every task reads all partitions)
join output        ``output`` / ``output-table``   delete / compact ``kafka.partitions`` (a table-table join
                                                                    emits a table: its changelog is compacted)
aggregate output   ``aggregate-output``            compact          ``kafka.partitions`` (a changelog table)
dead letters       ``dead-letter``                 delete, 14 days  ``kafka.partitions``
repartitioned      ``repartition``                 as its input's   the co-partition group's: an existing
input's internal                                                    member's count, else ``kafka.partitions``
topic
batch markers      ``batch-markers``               compact          1 (``output.delivery: exactly_once``: each
                                                                    write task's last committed batch)
=================  ==============================  ===============  ==========================================

Why a co-partition group: a key-based join reads partition *p* of both inputs in the same task, so both
must have the same partition count (and the same partitioner, murmur2) or a key's records meet nothing.
Kafka Streams checks this at startup; so do we, before the job starts. A foreign-key join re-keys the
left table internally (as Kafka Streams' subscription topics do), so its inputs form no group.

An input with ``repartition: true`` leaves the group (its topic may have any count); its internal topic
``<pipeline>-<input>-repartition`` (:mod:`streamjoin.core.repartition`) takes its place, with the count of
the group's existing topics (:meth:`TopicPlan.resolved`), as Kafka Streams sizes repartition topics.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from streamjoin.core.errors import SpecError
from streamjoin.core.shapes import traits
from streamjoin.core.spec import PipelineSpec, Role

#: Dead letters are read by humans, later: keep them longer than Kafka's 7-day default.
DEAD_LETTER_RETENTION_MS = 14 * 24 * 3600 * 1000

COMPACT = "compact"
DELETE = "delete"


class TopicRole(StrEnum):
    INPUT_STREAM = "input-stream"
    INPUT_TABLE = "input-table"
    INPUT_GLOBAL_TABLE = "input-global-table"
    OUTPUT = "output"
    OUTPUT_TABLE = "output-table"
    AGGREGATE_OUTPUT = "aggregate-output"
    DEAD_LETTER = "dead-letter"
    REPARTITION = "repartition"
    BATCH_MARKERS = "batch-markers"


_INPUT_ROLES = {
    Role.STREAM: TopicRole.INPUT_STREAM,
    Role.TABLE: TopicRole.INPUT_TABLE,
    Role.GLOBAL_TABLE: TopicRole.INPUT_GLOBAL_TABLE,
}


@dataclass(frozen=True)
class TopicSpec:
    """One topic as the pipeline needs it.

    :param name: topic name
    :param partitions: partition count to create it with
    :param replication_factor: replicas per partition
    :param config: topic configs to create it with (``cleanup.policy``, ``retention.ms``, ...)
    :param role: what the pipeline uses it for
    :param copartition_group: topics sharing a group must have equal partition counts; ``None``: no constraint
    """

    name: str
    partitions: int
    replication_factor: int
    config: Mapping[str, str] = field(hash=False)
    role: TopicRole
    copartition_group: str | None = None

    def __post_init__(self) -> None:  # a frozen plan must not share a mutable dict with its caller
        object.__setattr__(self, "config", MappingProxyType(dict(self.config)))

    @property
    def compacted(self) -> bool:
        """Whether the plan wants the log compacted (a table: the latest value per key must survive)."""
        return COMPACT in self.config.get("cleanup.policy", DELETE).split(",")

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "partitions": self.partitions,
            "replication_factor": self.replication_factor,
            "config": dict(self.config),
            "role": self.role.value,
            "copartition_group": self.copartition_group,
        }


@dataclass(frozen=True)
class TopicPlan:
    """All topics of one pipeline, inputs first, in a stable order."""

    pipeline: str
    topics: tuple[TopicSpec, ...] = field(default_factory=tuple)

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.topics]

    def topic(self, name: str) -> TopicSpec:
        for spec in self.topics:
            if spec.name == name:
                return spec
        raise KeyError(name)

    def copartition_groups(self) -> dict[str, list[TopicSpec]]:
        """Group name -> its topics, in plan order."""
        groups: dict[str, list[TopicSpec]] = {}
        for spec in self.topics:
            if spec.copartition_group is not None:
                groups.setdefault(spec.copartition_group, []).append(spec)
        return groups

    def resolved(self, existing_partitions: Mapping[str, int]) -> TopicPlan:
        """The plan with each internal repartition topic sized as the other members of its co-partition group
        that exist (their count is a fact), else as planned. Existing topics keep their own count.

        :param existing_partitions: topic -> partition count, of the topics that exist
        """
        groups = self.copartition_groups()
        topics = []
        for spec in self.topics:
            if spec.role is TopicRole.REPARTITION and spec.name not in existing_partitions and spec.copartition_group:
                counts = [
                    existing_partitions[m.name]
                    for m in groups[spec.copartition_group]
                    if m.role is not TopicRole.REPARTITION and m.name in existing_partitions
                ]
                if counts:
                    spec = replace(spec, partitions=counts[0])
            topics.append(spec)
        return TopicPlan(self.pipeline, tuple(topics))

    @property
    def max_replication_factor(self) -> int:
        return max((t.replication_factor for t in self.topics), default=0)


def plan_topics(spec: PipelineSpec) -> TopicPlan:
    """The topics ``spec`` reads and writes, with the partitions, replication and configs they need.

    :param spec: the pipeline spec
    :raises SpecError: ``kafka.min_insync_replicas`` exceeds the replication factor (acks=all writes would
        always fail), or one topic name is used for two different purposes
    """
    kafka = spec.kafka
    if kafka.min_insync_replicas is not None and kafka.min_insync_replicas > kafka.replication_factor:
        raise SpecError(
            f"<pipeline {spec.name}>",
            "kafka.min_insync_replicas",
            kafka.min_insync_replicas,
            f"at most kafka.replication_factor ({kafka.replication_factor}); with more, every acks=all write fails",
        )
    common: dict[str, str] = {}
    if kafka.min_insync_replicas is not None:
        common["min.insync.replicas"] = str(kafka.min_insync_replicas)

    def topic(name: str, role: TopicRole, policy: str, group: str | None = None, **extra: str) -> TopicSpec:
        config = {"cleanup.policy": policy, **common, **extra}
        return TopicSpec(name, kafka.partitions, kafka.replication_factor, config, role, group)

    copartitioned = [stage for stage in spec.stages if traits(stage.shape).copartitioned]
    group = f"{spec.name}:join" if copartitioned else None
    # a chain's results keep the first stage's left input's partitioning: a later co-partitioned stage's right
    # input joins that input's partitions
    members = {name for stage in copartitioned for name in (stage.left, stage.right)} | {spec.stages[0].left}
    topics: list[TopicSpec] = []
    for name, input_ in spec.inputs.items():
        role = _INPUT_ROLES[input_.role]
        policy = DELETE if input_.role is Role.STREAM else COMPACT
        member = input_.role is not Role.GLOBAL_TABLE and not input_.repartition
        member = member and (name in members or not spec.chained)
        topics.append(topic(input_.topic, role, policy, group if member else None))
    for name, input_ in spec.inputs.items():  # internal topics keep their input's cleanup policy
        if input_.repartition:
            policy = DELETE if input_.role is Role.STREAM else COMPACT
            topics.append(topic(spec.repartition_topic(name), TopicRole.REPARTITION, policy, group))
    # the last stage's output, and an earlier stage's of its own
    for stage, sink in [(stage, stage.output) for stage in spec.earlier_joins] + [(spec.join, spec.output)]:
        if sink is None or sink.topic is None:
            continue
        if traits(stage.shape).table_result:
            topics.append(topic(sink.topic, TopicRole.OUTPUT_TABLE, COMPACT))
        else:
            topics.append(topic(sink.topic, TopicRole.OUTPUT, DELETE))
    if spec.aggregate is not None and spec.aggregate.output.topic is not None:
        topics.append(topic(spec.aggregate.output.topic, TopicRole.AGGREGATE_OUTPUT, COMPACT))
    topics.append(
        topic(spec.dead_letter_topic, TopicRole.DEAD_LETTER, DELETE, **{"retention.ms": str(DEAD_LETTER_RETENTION_MS)})
    )
    if spec.exactly_once:
        markers = topic(spec.marker_topic, TopicRole.BATCH_MARKERS, COMPACT)
        topics.append(replace(markers, partitions=1))
    _check_unique(spec.name, topics)
    return TopicPlan(spec.name, tuple(topics))


def _check_unique(pipeline: str, topics: list[TopicSpec]) -> None:
    seen: dict[str, TopicRole] = {}
    for spec in topics:
        if spec.name in seen:
            raise SpecError(
                f"<pipeline {pipeline}>",
                "topics",
                spec.name,
                f"a distinct topic per purpose: {spec.name!r} is both {seen[spec.name].value} and {spec.role.value}",
            )
        seen[spec.name] = spec.role
