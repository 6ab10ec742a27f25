"""The batch processing-order rule: in which order a task processes the records of one batch.

Kafka Streams' partition group keeps one queue per input (topic, partition) and always takes the head
of the queue with the smallest timestamp. We compute the same order for a whole batch at once:

* each (topic, partition) queue is read in offset order and never reordered;
* a record's *effective timestamp* is the running max of ``ts`` in its own queue up to and including
  it (an out-of-order record waits behind the larger timestamp before it);
* queues are merged by effective timestamp; ties go by role rank (global table 0, table 1, stream 2:
  a table update at time t is visible to a stream record at time t), then the input's position in
  ``spec.inputs``, then partition, then offset;
* global-table records are not time-synchronised: they come before every other record of the batch,
  by input position, partition and offset (the "bootstrap" of a global table).

``ReferenceEngine.replay_batch`` and the Spark engine (for every micro-batch) use this order;
``ReferenceEngine.replay`` uses file order, and both agree whenever the file already is in this order.
"""

from __future__ import annotations

from collections.abc import Iterable

from streamjoin.core.batch_plan import SourceOrder
from streamjoin.core.records import Record
from streamjoin.core.shapes import ROLE_RANK, Role
from streamjoin.core.spec import PipelineSpec


def input_positions(spec: PipelineSpec) -> dict[str, tuple[int, Role]]:
    """topic -> (position of its input in ``spec.inputs``, role)."""
    return {inp.topic: (position, inp.role) for position, inp in enumerate(spec.inputs.values())}


def source_orders(spec: PipelineSpec) -> dict[str, SourceOrder]:
    """topic -> its place in the merge order at equal effective timestamps (role rank, input position)."""
    return {
        topic: SourceOrder(rank=ROLE_RANK[role], position=position)
        for topic, (position, role) in input_positions(spec).items()
    }


def effective_timestamps(records: Iterable[Record]) -> dict[tuple[str, int, int], int]:
    """(topic, partition, offset) -> running max of ``ts`` within the (topic, partition) queue, in offset order."""
    queues: dict[tuple[str, int], list[Record]] = {}
    for record in records:
        queues.setdefault((record.topic, record.partition), []).append(record)
    effective: dict[tuple[str, int, int], int] = {}
    for (topic, partition), queue in queues.items():
        running: int | None = None
        for record in sorted(queue, key=lambda r: r.offset):
            running = record.ts if running is None else max(running, record.ts)
            effective[(topic, partition, record.offset)] = running
    return effective


def processing_order(records: Iterable[Record], spec: PipelineSpec) -> list[Record]:
    """The records in the order a Kafka Streams task would process them (see the module docstring).

    :param records: the batch; offsets must be unique within each (topic, partition).
    :param spec: gives each topic's role and input position.
    :raises ValueError: a record's topic is not an input of the pipeline, or an offset repeats.
    """
    batch = list(records)
    positions = input_positions(spec)
    seen: set[tuple[str, int, int]] = set()
    for record in batch:
        if record.topic not in positions:
            raise ValueError(
                f"record on topic {record.topic!r} is not an input of pipeline {spec.name!r} "
                f"(inputs: {sorted(positions)})"
            )
        coordinates = (record.topic, record.partition, record.offset)
        if coordinates in seen:
            raise ValueError(f"offset {record.offset} appears twice in {record.topic!r} partition {record.partition}")
        seen.add(coordinates)
    effective = effective_timestamps(batch)

    def sort_key(record: Record) -> tuple[int, int, int, int, int, int]:
        position, role = positions[record.topic]
        if role is Role.GLOBAL_TABLE:
            return (0, 0, 0, position, record.partition, record.offset)
        eff = effective[(record.topic, record.partition, record.offset)]
        return (1, eff, ROLE_RANK[role], position, record.partition, record.offset)

    return sorted(batch, key=sort_key)
