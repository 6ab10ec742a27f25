"""Repartitioning a join input through an internal topic (seed 003's remedy, Kafka Streams' ``repartition()``).

An input with ``repartition: true`` is copied, record by record, to ``<pipeline>-<input>-repartition``, a
topic with the partition count of the co-partitioned side, and the join reads that topic instead:

* placement: a record with a key goes to ``murmur2(serialized key) % partitions`` (Java's default
  partitioner, :func:`~streamjoin.core.partitioner.partition_for`), so equal keys of both sides meet in
  the same partition; a record without a key (it joins nothing by key) goes to ``source partition %
  partitions``;
* bytes, timestamp: unchanged (key and value are not decoded: an undecodable record reaches the join and
  is dead-lettered there as it would be on the input topic); the source coordinates travel in headers;
* order: the records of one copy step are written in the merge order of the batch ordering rule over their
  source partitions (running max of the timestamp per source partition, then source partition, then
  offset). A source partition's records keep their offset order, so every key keeps its order.

The join, its batch plan and reprocessing then see a spec whose repartitioned inputs read the internal
topic (:func:`join_view`); everything else about the join is unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from streamjoin.core.partitioner import partition_for
from streamjoin.core.spec import PipelineSpec

#: headers carrying a copied record's coordinates on the source topic
SOURCE_HEADERS = ("source_topic", "source_partition", "source_offset")


@dataclass(frozen=True)
class Repartitioned:
    """One repartitioned input: where its records come from and where they go."""

    input: str
    source: str
    internal: str


def repartitioned(spec: PipelineSpec) -> list[Repartitioned]:
    """The inputs of ``spec`` that ask to be repartitioned, in spec order."""
    return [
        Repartitioned(name, inp.topic, spec.repartition_topic(name))
        for name, inp in spec.inputs.items()
        if inp.repartition
    ]


def join_view(spec: PipelineSpec, partitions: int | None = None) -> PipelineSpec:
    """``spec`` as the join reads it: each repartitioned input reads its internal topic (idempotent).

    :param partitions: the internal topics' partition count (the co-partitioned side's, found on the broker):
        the view's ``kafka.partitions``, which is the join's task count
    """
    moved = repartitioned(spec)
    if not moved:
        return spec
    inputs = dict(spec.inputs)
    for item in moved:
        inputs[item.input] = inputs[item.input].model_copy(update={"topic": item.internal, "repartition": False})
    update: dict[str, object] = {"inputs": inputs}
    if partitions is not None:
        update["kafka"] = spec.kafka.model_copy(update={"partitions": partitions})
    return spec.model_copy(update=update)


def target_partition(key: bytes | None, source_partition: int, partitions: int) -> int:
    """The internal topic's partition for a record: murmur2 of the serialized key, as Java's default
    partitioner; without a key, its source partition modulo the count."""
    if key is None:
        return source_partition % partitions
    return partition_for(key, partitions)


class AlreadyWritten:
    """A copy step run again after a crash: per internal partition, its first ``written[p]`` records already
    reached the topic (one idempotent producer keeps a partition's order), so they are skipped.

    :param written: internal partition -> records the interrupted run wrote there
    """

    def __init__(self, written: Mapping[int, int]) -> None:
        self.written = dict(written)
        self._seen: dict[int, int] = {}

    def skip(self, partition: int) -> bool:
        """Whether the next record of the step (in copy order) bound for ``partition`` is already there."""
        self._seen[partition] = self._seen.get(partition, 0) + 1
        return self._seen[partition] <= self.written.get(partition, 0)
