"""Producing and reading records on the real broker; keys land where Java clients put them."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka_helpers import create_topic

from streamjoin.core.errors import ConsumeTimeoutError, DeliveryError
from streamjoin.core.partitioner import partition_for
from streamjoin.kafka.clients import consume_all, end_offsets, offsets_for_time, produce_records, producer_config

pytestmark = pytest.mark.kafka


def test_produced_records_read_back_with_keys_values_timestamps_and_headers(
    kafka_bootstrap: str, topic_factory: Any
) -> None:
    topic = topic_factory("roundtrip")
    create_topic(kafka_bootstrap, topic, 2)
    base = int(time.time() * 1000) - 60_000
    records = [
        (topic, b"alice", b"\x00" * 7 + b"\x01", base, [("source", b"test")]),
        (topic, b"alice", None, base + 1, None),  # a tombstone
        (topic, None, b"no key", base + 2, {"trace": b"1"}),
    ]

    assert produce_records(kafka_bootstrap, records) == 3
    got = consume_all(kafka_bootstrap, topic, timeout=20, expected=3)

    by_value = {r.value: r for r in got}
    assert len(got) == 3
    first, keyless = by_value[b"\x00" * 7 + b"\x01"], by_value[b"no key"]
    assert (first.key, first.timestamp, first.headers) == (b"alice", base, (("source", b"test"),))
    assert (by_value[None].key, by_value[None].timestamp) == (b"alice", base + 1)
    assert by_value[None].offset == first.offset + 1 and by_value[None].partition == first.partition
    assert (keyless.key, keyless.headers) == (None, (("trace", b"1"),))


def test_reading_an_empty_topic_returns_nothing_at_the_ends(kafka_bootstrap: str, topic_factory: Any) -> None:
    """Returning (not ConsumeTimeoutError) means every partition's end was seen, not that time ran out."""
    topic = topic_factory("empty")
    create_topic(kafka_bootstrap, topic, 3)
    assert consume_all(kafka_bootstrap, topic, timeout=30) == []


def test_waiting_for_more_records_than_arrive_says_what_came(kafka_bootstrap: str, topic_factory: Any) -> None:
    topic = topic_factory("short")
    create_topic(kafka_bootstrap, topic, 1)
    produce_records(kafka_bootstrap, [(topic, b"k", f"v{i}".encode(), None, None) for i in range(5)])

    with pytest.raises(ConsumeTimeoutError) as caught:
        consume_all(kafka_bootstrap, topic, timeout=2, expected=7)

    message = str(caught.value)
    assert message.startswith(f"expected 7 records on `{topic}`, got 5 within 2 s; last: ")
    assert f"{topic}[0]@4" in message and "value=b'v4'" in message


def test_producing_to_a_missing_topic_raises(kafka_bootstrap: str, topic_factory: Any) -> None:
    topic = topic_factory("missing")  # never created; the broker does not auto-create topics
    with pytest.raises(DeliveryError) as caught:
        produce_records(kafka_bootstrap, [(topic, b"k", b"v", None, None)], **{"message.timeout.ms": 3000})
    assert (caught.value.topic, caught.value.failed, caught.value.total) == (topic, 1, 1)


def test_end_offsets_and_offsets_for_time(kafka_bootstrap: str, topic_factory: Any) -> None:
    topic = topic_factory("offsets")
    create_topic(kafka_bootstrap, topic, 2)
    base = 1_700_000_000_000
    key0 = next(k for k in (f"k{i}".encode() for i in range(100)) if partition_for(k, 2) == 0)
    produce_records(kafka_bootstrap, [(topic, key0, str(i).encode(), base + 1000 * i, None) for i in range(5)])

    assert end_offsets(kafka_bootstrap, topic) == {0: 5, 1: 0}
    assert offsets_for_time(kafka_bootstrap, topic, base + 2500) == {0: 3, 1: 0}
    assert offsets_for_time(kafka_bootstrap, topic, base) == {0: 0, 1: 0}
    assert offsets_for_time(kafka_bootstrap, topic, base + 10_000) == {0: 5, 1: 0}  # later than all: the end


def test_keys_land_on_the_partition_javas_murmur2_predicts(kafka_bootstrap: str, topic_factory: Any) -> None:
    topic = topic_factory("murmur2")
    partitions = 6
    create_topic(kafka_bootstrap, topic, partitions)
    keys = [f"user-{i}".encode() for i in range(300)] + [bytes([i, 0xFF, i * 7 % 256]) for i in range(60)]

    produce_records(kafka_bootstrap, [(topic, key, b"1", None, None) for key in keys])
    got = consume_all(kafka_bootstrap, topic, timeout=30, expected=len(keys))

    assert len(got) == len(keys)
    wrong = [(r.key, r.partition, partition_for(r.key or b"", partitions)) for r in got]
    wrong = [w for w in wrong if w[1] != w[2]]
    assert wrong == [], f"{len(wrong)} keys on another partition than murmur2 predicts, e.g. {wrong[:3]}"
    assert {r.partition for r in got} == set(range(partitions))


def test_librdkafkas_default_partitioner_would_break_copartitioning(kafka_bootstrap: str, topic_factory: Any) -> None:
    """The control for the test above: without `partitioner: murmur2_random` keys land elsewhere."""
    topic = topic_factory("crc32")
    create_topic(kafka_bootstrap, topic, 6)
    config = producer_config(kafka_bootstrap)
    del config["partitioner"]
    producer = Producer(config)
    keys = [f"user-{i}".encode() for i in range(100)]
    for key in keys:
        producer.produce(topic, key=key, value=b"1")
    assert producer.flush(15) == 0

    got = consume_all(kafka_bootstrap, topic, timeout=30, expected=len(keys))
    assert sum(r.partition != partition_for(r.key or b"", 6) for r in got) > 50
