"""Offsets of a job's input partitions from the broker: where they start and end, and offsets-for-time
(the :class:`streamjoin.core.batch_plan.OffsetIndex` the streaming job plans its batches with).

One admin client serves a job's whole life: planning a batch asks the broker a few dozen times.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Sequence

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ListOffsetsResultInfo, OffsetSpec

from streamjoin.core.batch_plan import TopicPartition as TP
from streamjoin.core.errors import KafkaUnavailableError
from streamjoin.kafka.admin import Deadline, admin_client
from streamjoin.kafka.client_config import KafkaClientConfig, KafkaTarget

#: offsets-for-time finds no record that late: any offset past the end does (the planner clamps it)
PAST_THE_END = sys.maxsize
#: seconds between two asks for a partition whose answer was a retriable error
_RETRY_PAUSE_S = 0.25
#: per-partition answers to ListOffsets that a second ask can cure: Kafka's protocol calls them retriable,
#: but librdkafka hands a partition's error over without that flag
_RETRIABLE = frozenset({
    KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.REPLICA_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.OFFSET_NOT_AVAILABLE, KafkaError.FENCED_LEADER_EPOCH,
    KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.REQUEST_TIMED_OUT, KafkaError._TRANSPORT, KafkaError._TIMED_OUT,
})  # fmt: skip


def _retriable(exc: Exception) -> bool:
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return isinstance(error, KafkaError) and not error.fatal() and (error.retriable() or error.code() in _RETRIABLE)


class KafkaOffsets:
    """Offsets of partitions of one cluster.

    :param kafka: the cluster: ``bootstrap.servers``, librdkafka settings (security included) or a
        :class:`~streamjoin.kafka.client_config.KafkaClientConfig`.
    :param timeout: seconds per request.
    """

    def __init__(self, kafka: KafkaTarget, *, timeout: float = 10.0) -> None:
        self.cluster = KafkaClientConfig.of(kafka)
        self.timeout = timeout
        self._admin: AdminClient | None = None

    @property
    def _where(self) -> str:
        return self.cluster.describe()

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = admin_client(self.cluster.librdkafka())
        return self._admin

    def partitions(self, topics: Iterable[str]) -> list[TP]:
        """Every partition of ``topics``; a missing topic is an error naming it."""
        found: list[TP] = []
        for topic in sorted(set(topics)):
            try:
                meta = self.admin.list_topics(topic=topic, timeout=self.timeout)
            except KafkaException as exc:
                raise KafkaUnavailableError(
                    f"no metadata for `{topic}` from {self._where} within {self.timeout:g} s: {exc}"
                ) from exc
            info = meta.topics.get(topic)
            if info is None or info.error is not None or not info.partitions:
                reason = info.error if info is not None and info.error is not None else "no such topic"
                raise KafkaUnavailableError(f"topic `{topic}` at {self._where}: {reason}")
            found += [(topic, p) for p in sorted(info.partitions)]
        return found

    def _list(self, partitions: Sequence[TP], spec: OffsetSpec) -> dict[TP, ListOffsetsResultInfo]:
        """``spec`` of each partition. A retriable error (a leader moving or not yet serving a partition just
        created: NOT_LEADER_FOR_PARTITION, LEADER_NOT_AVAILABLE) asks again for that partition until the
        timeout; any other error, or one still there then, is a :class:`KafkaUnavailableError`."""
        found: dict[TP, ListOffsetsResultInfo] = {}
        deadline = Deadline(self.timeout)
        pending = list(partitions)
        while pending:
            # the latest offset read committed: a transactional writer's open transaction is not there yet
            futures = self.admin.list_offsets(
                {TopicPartition(topic, partition): spec for topic, partition in pending},
                isolation_level=IsolationLevel.READ_COMMITTED,
                request_timeout=self.timeout,
            )
            retry: list[TP] = []
            for tp, future in futures.items():
                try:
                    found[(tp.topic, tp.partition)] = future.result(timeout=self.timeout)
                except Exception as exc:
                    if not _retriable(exc) or deadline.passed:
                        raise KafkaUnavailableError(f"offsets of `{tp.topic}` [{tp.partition}]: {exc}") from exc
                    retry.append((tp.topic, tp.partition))
            if retry:
                time.sleep(min(_RETRY_PAUSE_S, deadline.left(0.0)))
            pending = retry
        return found

    def earliest(self, partitions: Sequence[TP]) -> dict[TP, int]:
        return {tp: info.offset for tp, info in self._list(partitions, OffsetSpec.earliest()).items()}

    def latest(self, partitions: Sequence[TP]) -> dict[TP, int]:
        return {tp: info.offset for tp, info in self._list(partitions, OffsetSpec.latest()).items()}

    def offsets_for_time(self, partitions: Sequence[TP], ts: int) -> dict[TP, int]:
        found = self._list(partitions, OffsetSpec.for_timestamp(ts))
        return {tp: info.offset if info.offset >= 0 else PAST_THE_END for tp, info in found.items()}

    def first_timestamps(self, partitions: Sequence[TP]) -> dict[TP, int | None]:
        """Timestamp of each partition's first record still held (None: the partition holds none)."""
        found = self._list(partitions, OffsetSpec.for_timestamp(0))
        return {tp: info.timestamp if info.offset >= 0 and info.timestamp >= 0 else None for tp, info in found.items()}

    def max_timestamp(self, partitions: Sequence[TP]) -> int | None:
        stamps = [info.timestamp for info in self._list(partitions, OffsetSpec.max_timestamp()).values()]
        stamps = [ts for ts in stamps if ts is not None and ts >= -1]
        return max(stamps) if stamps else None
