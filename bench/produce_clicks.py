"""Fill the seed's input topics for benchmarks: N users with regions, M clicks (Java LongSerializer values).

Keys are partitioned with murmur2 like Java clients, so both topics are co-partitioned.
"""

from __future__ import annotations

import random
import struct
import time

from confluent_kafka import Producer

REGIONS = ["europe", "americas", "asia", "africa", "oceania"]


def produce(
    bootstrap: str,
    clicks_topic: str,
    regions_topic: str,
    users: int,
    clicks: int,
    seed: int = 7,
    base: int | None = None,
) -> float:
    """Returns the seconds it took. Regions first (ts = base, default two hours ago), then clicks spread
    over the hour after."""
    rng = random.Random(seed)
    producer = _producer(bootstrap)
    started = time.monotonic()
    base = int(time.time() * 1000) - 2 * 3_600_000 if base is None else base
    keys = [f"user{i}".encode() for i in range(users)]
    for i, key in enumerate(keys):
        _produce(producer, regions_topic, key, rng.choice(REGIONS).encode(), base + i % 1000)
    pack = struct.Struct(">q").pack
    step = 3_600_000 / max(clicks, 1)
    for i in range(clicks):
        _produce(
            producer, clicks_topic, keys[rng.randrange(users)], pack(rng.randint(1, 20)), base + 1000 + int(i * step)
        )
    producer.flush(120)
    return time.monotonic() - started


def produce_views(bootstrap: str, views_topic: str, users: int, views: int, seed: int = 11) -> float:
    """Ad views for the stream-stream benchmark: same users and hour as the clicks (string values)."""
    rng = random.Random(seed)
    producer = _producer(bootstrap)
    started = time.monotonic()
    base = int(time.time() * 1000) - 2 * 3_600_000
    step = 3_600_000 / max(views, 1)
    for i in range(views):
        _produce(producer, views_topic, f"user{rng.randrange(users)}".encode(), b"view", base + 1000 + int(i * step))
    producer.flush(120)
    return time.monotonic() - started


def _producer(bootstrap: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "partitioner": "murmur2_random",  # Java's partitioner: co-partitioning depends on it
            "linger.ms": 50,
            "batch.num.messages": 10000,
            "queue.buffering.max.messages": 1_000_000,
            "compression.type": "lz4",
        }
    )


def _produce(producer: Producer, topic: str, key: bytes, value: bytes, ts: int) -> None:
    while True:
        try:
            producer.produce(topic, value=value, key=key, timestamp=ts)
            return
        except BufferError:
            producer.poll(0.05)
