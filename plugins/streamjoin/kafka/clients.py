"""Producing and reading records with confluent-kafka, partitioned as Java clients and Spark partition them.

Every wait is bounded and a timeout says what was expected, what came and the last record seen.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from streamjoin.core import codec
from streamjoin.core.errors import ConsumeTimeoutError, DeliveryError, KafkaUnavailableError
from streamjoin.core.spec import Format, Serde
from streamjoin.kafka.client_config import KafkaClientConfig, KafkaTarget
from streamjoin.kafka.offsets import KafkaOffsets

#: ``(topic, key, value, timestamp_ms, headers)``; ``None`` key/value/timestamp are allowed (a null
#: value is a tombstone; a null timestamp lets the producer stamp the current time).
RecordTuple = tuple[
    str, bytes | None, bytes | None, int | None, Sequence[tuple[str, bytes]] | Mapping[str, bytes] | None
]

Headers = tuple[tuple[str, bytes | None], ...]


def producer_config(kafka: KafkaTarget, **overrides: Any) -> dict[str, Any]:
    """Config for a confluent-kafka producer that puts each key where Java clients and Spark put it.

    :param kafka: the cluster: ``bootstrap.servers``, librdkafka settings or a :class:`KafkaClientConfig`
    :param overrides: further librdkafka settings (dots as in librdkafka: pass a dict with ``**``)
    """
    return {
        **KafkaClientConfig.of(kafka).librdkafka(),
        # librdkafka's default partitioner, consistent_random, hashes keys with CRC32; Java clients,
        # Kafka Streams and Spark's Kafka sink use murmur2 (streamjoin.core.partitioner). With the default,
        # a key produced from Python would land on a different partition than the same key written by
        # the join job, and a co-partitioned join would silently never see the two meet.
        "partitioner": "murmur2_random",
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        # Bounds how long a record may wait for delivery before its callback reports an error.
        "message.timeout.ms": 30_000,
        **overrides,
    }


def _headers(headers: Sequence[tuple[str, bytes]] | Mapping[str, bytes] | None) -> list[tuple[str, bytes]] | None:
    if not headers:
        return None
    return list(headers.items()) if isinstance(headers, Mapping) else list(headers)


def produce_records(kafka: KafkaTarget, records: Iterable[RecordTuple], *, timeout: float = 30.0, **config: Any) -> int:
    """Produce records and wait until every one is acknowledged.

    :param kafka: the cluster (``bootstrap.servers``, librdkafka settings or a :class:`KafkaClientConfig`)
    :param records: ``(topic, key_bytes, value_bytes, timestamp_ms, headers)`` tuples
    :param timeout: seconds to wait for all acknowledgements
    :param config: extra producer settings
    :return: the number of records delivered
    :raises DeliveryError: any record failed (all are attempted first)
    """
    producer = Producer(producer_config(kafka, **config))
    failures: list[tuple[str, KafkaError]] = []

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append((message.topic() or "?", error))

    total = 0
    first_topic = "?"
    for topic, key, value, timestamp, headers in records:
        if total == 0:
            first_topic = topic
        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": on_delivery}
        if timestamp is not None:
            kwargs["timestamp"] = int(timestamp)
        if (hdrs := _headers(headers)) is not None:
            kwargs["headers"] = hdrs
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:  # the local queue is full: let deliveries drain, then retry
                producer.poll(0.1)
            except KafkaException as exc:
                raise DeliveryError(topic, 1, total + 1, str(exc)) from exc
        total += 1
        producer.poll(0)
    remaining = producer.flush(timeout)
    if failures:
        topic, error = failures[0]
        transient = all(e.retriable() for _, e in failures)
        raise DeliveryError(topic, len(failures) + remaining, total, error.str(), transient=transient)
    if remaining:
        raise DeliveryError(first_topic, remaining, total, f"not acknowledged within {timeout:g} s", transient=True)
    return total


@dataclass(frozen=True)
class ConsumedRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()

    def __str__(self) -> str:
        return (
            f"{self.topic}[{self.partition}]@{self.offset} ts={self.timestamp} "
            f"key={self.key!r} value={self.value!r}" + (f" headers={list(self.headers)!r}" if self.headers else "")
        )


def _partitions(kafka: KafkaClientConfig, topic: str, timeout: float) -> list[int]:
    return [p for _, p in KafkaOffsets(kafka, timeout=timeout).partitions([topic])]


def consume_all(
    kafka: KafkaTarget, topic: str, timeout: float = 30.0, expected: int | None = None, *, committed_only: bool = True
) -> list[ConsumedRecord]:
    """Read ``topic`` from the beginning, without a consumer group's committed offsets.

    Without ``expected``: reads until every partition's current end. With ``expected``: waits until at
    least that many records have arrived (the writer may still be writing), then reads on to the ends.

    :param kafka: the cluster (``bootstrap.servers``, librdkafka settings or a :class:`KafkaClientConfig`)
    :param topic: the topic to read
    :param timeout: seconds in all
    :param expected: the number of records to wait for
    :param committed_only: read committed (transactions' records once committed, never an aborted one: what
        a consumer of an ``exactly_once`` pipeline must do); False also returns open and aborted ones
    :return: the records, ordered by partition, then offset
    :raises ConsumeTimeoutError: not all expected records (or not the ends) within ``timeout``
    """
    started = time.monotonic()
    cluster = KafkaClientConfig.of(kafka)
    partitions = _partitions(cluster, topic, timeout)
    consumer = Consumer(
        {
            **cluster.librdkafka(),
            "group.id": f"streamjoin-read-{uuid.uuid4().hex[:12]}",  # required; never committed
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "socket.timeout.ms": 10_000,
            "fetch.wait.max.ms": 100,  # an idle partition answers in 0.1 s, not 0.5 s: the end is seen sooner
            "isolation.level": "read_committed" if committed_only else "read_uncommitted",
        }
    )
    records: list[ConsumedRecord] = []
    at_end = dict.fromkeys(partitions, False)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        while True:
            left = timeout - (time.monotonic() - started)
            enough = expected is None or len(records) >= expected
            if enough and all(at_end.values()):
                break
            if left <= 0:
                wanted = f"{expected} records" if expected is not None else "records up to the end offsets"
                last = str(records[-1]) if records else "none"
                raise ConsumeTimeoutError(topic, wanted, len(records), timeout, last)
            for message in consumer.consume(num_messages=500, timeout=min(0.2, left)):
                error = message.error()
                partition = message.partition() or 0
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        at_end[partition] = True
                        continue
                    if error.fatal() or not error.retriable():
                        raise KafkaUnavailableError(f"reading `{topic}` from {cluster.describe()}: {error.str()}")
                    continue
                at_end[partition] = False
                records.append(_record(message))
    finally:
        consumer.close()
    return sorted(records, key=lambda r: (r.partition, r.offset))


def _bytes(data: str | bytes | None) -> bytes | None:
    return data.encode() if isinstance(data, str) else data


def _record(message: Message) -> ConsumedRecord:
    _, timestamp = message.timestamp()
    raw: Any = message.headers() or []
    pairs = raw.items() if isinstance(raw, Mapping) else raw
    headers = tuple((str(key), _bytes(value)) for key, value in pairs)
    return ConsumedRecord(
        message.topic() or "", message.partition() or 0, message.offset() or 0, timestamp,
        _bytes(message.key()), _bytes(message.value()), headers,
    )  # fmt: skip


def end_offsets(kafka: KafkaTarget, topic: str, *, timeout: float = 10.0) -> dict[int, int]:
    """Partition -> the offset the next record will get (the high watermark)."""
    offsets = KafkaOffsets(kafka, timeout=timeout)
    return {p: o for (_, p), o in sorted(offsets.latest(offsets.partitions([topic])).items())}


def offsets_for_time(kafka: KafkaTarget, topic: str, ts_ms: int, *, timeout: float = 10.0) -> dict[int, int]:
    """Partition -> offset of the first record with timestamp >= ``ts_ms``; where no record is that late,
    the end offset (where a reader starting at ``ts_ms`` begins)."""
    offsets = KafkaOffsets(kafka, timeout=timeout)
    partitions = offsets.partitions([topic])
    ends = offsets.latest(partitions)
    found = offsets.offsets_for_time(partitions, ts_ms)
    return {p: min(found[(t, p)], ends[(t, p)]) for t, p in sorted(partitions)}


def _format(serde: Serde | Format) -> Format:
    return serde.format if isinstance(serde, Serde) else Format(serde)


def encode(value: Any, serde: Serde | Format) -> bytes | None:
    """Bytes for ``value`` in the spec's format: string (UTF-8), long (8-byte big-endian signed, as Java's
    LongSerializer), json (compact). ``None`` stays ``None`` (a tombstone / null key)."""
    return codec.encode(value, _format(serde))


def decode(data: bytes | None, serde: Serde | Format) -> Any:
    """The inverse of :func:`encode`."""
    return codec.decode(data, _format(serde))
