"""Fill the seed's input topics for benchmarks: N users with regions, M clicks (Java LongSerializer values),
and compute the expected answer while producing.

Keys are partitioned with murmur2 like Java clients, so both topics are co-partitioned. Regions are
written first, with timestamps earlier than every click; a small share of the clicks (``unknown_share``)
comes from users that have no region and count for ``UNKNOWN``.
"""

from __future__ import annotations

import random
import struct
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from confluent_kafka import Producer

REGIONS = ["europe", "americas", "asia", "africa", "oceania"]
UNKNOWN = "UNKNOWN"
#: the two-table enrichment's product categories; ``OTHER`` for a product the products table does not list
CATEGORIES = ["books", "games", "music", "garden", "toys", "tools", "food", "sports"]
OTHER = "OTHER"
#: the stream-stream benchmark's join window: views and clicks of a user at most this far apart (inclusive)
WINDOW_MS = 10_000


@dataclass
class Produced:
    """What was produced and the answer every correct run must give."""

    seconds: float
    base: int  #: timestamp of the first region record (ms); clicks from base + 1000 on
    clicks: int  #: clicks produced: the number of enriched clicks of the stream-table join
    totals: dict[str, int]  #: clicks summed per region (``UNKNOWN`` for users without a region)
    #: per user, the sorted timestamps of their clicks (only with ``keep_times``: the stream-stream answer)
    click_times: dict[str, list[int]] = field(default_factory=dict, repr=False)
    #: per user with clicks, (region or ``UNKNOWN``, their last click's count) (only with ``keep_last``: the
    #: table-table join's final table, clicks read as a table)
    last_clicks: dict[str, tuple[str, int]] = field(default_factory=dict, repr=False)
    #: each user's region, an index into :data:`REGIONS` (user ``user{i}`` at ``i``; set by :func:`produce`)
    region_of: bytes = field(default=b"", repr=False)


def produce(
    bootstrap: str,
    clicks_topic: str,
    regions_topic: str,
    users: int,
    clicks: int,
    seed: int = 7,
    base: int | None = None,
    unknown_share: float = 0.02,
    keep_times: bool = False,
    keep_last: bool = False,
    encode_click: Callable[[int], bytes] | None = None,
    encode_region: Callable[[str], bytes] | None = None,
) -> Produced:
    """Regions first (ts = base + i % 1000, default base two hours ago), then clicks spread over the hour
    after. Users ``user0 .. user{users-1}`` have a region; a click comes with probability ``unknown_share``
    from one of ``users // 50 + 1`` users after them, who have none. The values are Java LongSerializer's
    bytes and the region's text, unless ``encode_click`` (of a count, 1..20) and ``encode_region`` (of a
    region's name) give others (e.g. Avro): each called once per distinct value."""
    rng = random.Random(seed)
    producer = _producer(bootstrap)
    started = time.monotonic()
    base = int(time.time() * 1000) - 2 * 3_600_000 if base is None else base
    region_of = bytearray(users)  # index into REGIONS
    encoded = [r.encode() if encode_region is None else encode_region(r) for r in REGIONS]
    for i in range(users):
        region = rng.randrange(len(REGIONS))
        region_of[i] = region
        _produce(producer, regions_topic, f"user{i}".encode(), encoded[region], base + i % 1000)
    sums = [0] * (len(REGIONS) + 1)  # the last one is UNKNOWN
    unknown_users = users // 50 + 1
    times: dict[str, list[int]] = {}
    last: dict[str, tuple[int, int]] = {}
    pack = struct.Struct(">q").pack
    click_values = [b""] + [pack(n) if encode_click is None else encode_click(n) for n in range(1, 21)]
    step = 3_600_000 / max(clicks, 1)
    for i in range(clicks):
        if rng.random() < unknown_share:
            user = users + rng.randrange(unknown_users)
            region = len(REGIONS)
        else:
            user = rng.randrange(users)
            region = region_of[user]
        n = rng.randint(1, 20)
        sums[region] += n
        key = f"user{user}"
        ts = base + 1000 + int(i * step)
        if keep_times:
            times.setdefault(key, []).append(ts)
        if keep_last:
            last[key] = (region, n)
        _produce(producer, clicks_topic, key.encode(), click_values[n], ts)
    producer.flush(120)
    totals = {name: total for name, total in zip([*REGIONS, UNKNOWN], sums, strict=True) if total}
    names = [*REGIONS, UNKNOWN]
    last_clicks = {key: (names[region], n) for key, (region, n) in last.items()}
    return Produced(time.monotonic() - started, base, clicks, totals, times, last_clicks, bytes(region_of))


def produce_views(bootstrap: str, views_topic: str, users: int, views: int, produced: Produced, seed: int = 11) -> int:
    """Ad views for the stream-stream benchmark: same users and hour as the clicks of ``produced`` (which
    must have been made with ``keep_times``), string values. Returns the number of inner-join pairs of
    views and clicks of one user at most :data:`WINDOW_MS` apart (both bounds inclusive)."""
    rng = random.Random(seed)
    producer = _producer(bootstrap)
    step = 3_600_000 / max(views, 1)
    view_times: dict[str, list[int]] = {}
    for i in range(views):
        key = f"user{rng.randrange(users)}"
        ts = produced.base + 1000 + int(i * step)
        view_times.setdefault(key, []).append(ts)
        _produce(producer, views_topic, key.encode(), b"view", ts)
    producer.flush(120)
    return join_pairs(view_times, produced.click_times, WINDOW_MS)


def enrichment(
    produced: Produced,
    users: int,
    clicks: int,
    products: int,
    totals: dict[str, int],
    seed: int = 13,
    unknown_share: float = 0.02,
    unlisted_share: float = 0.05,
) -> Iterator[tuple[str, bytes, bytes, int]]:
    """The two-table enrichment's records, ``(input, key, value, ts)``: first the products table (``p0 ..
    p{products-1}``, each a category; the first tenth written twice, the second value the latest), then
    ``clicks`` clicks as JSON ``{"product": "p..", "clicks": n}`` of the users of ``produced`` (whose regions
    are on its regions topic), at the times of its clicks. A click comes from a user without a region with
    probability ``unknown_share`` (``UNKNOWN``) and points at a product the table does not list with probability
    ``unlisted_share`` (``OTHER``). Adds each click's ``n`` to ``totals["<region>/<category>"]`` as it yields it."""
    rng = random.Random(seed)
    category_of = [rng.randrange(len(CATEGORIES)) for _ in range(products)]
    for i in range(products):
        yield "products", f"p{i}".encode(), CATEGORIES[category_of[i]].encode(), produced.base + i % 1000
    for i in range(products // 10):  # an update: the global table keeps the latest
        category_of[i] = (category_of[i] + 1) % len(CATEGORIES)
        yield "products", f"p{i}".encode(), CATEGORIES[category_of[i]].encode(), produced.base + 1000
    unknown_users, unlisted = users // 50 + 1, products // 20 + 1
    step = 3_600_000 / max(clicks, 1)
    for i in range(clicks):
        if rng.random() < unknown_share:
            user, region = users + rng.randrange(unknown_users), UNKNOWN
        else:
            user = rng.randrange(users)
            region = REGIONS[produced.region_of[user]]
        if rng.random() < unlisted_share:
            product, category = products + rng.randrange(unlisted), OTHER
        else:
            product = rng.randrange(products)
            category = CATEGORIES[category_of[product]]
        n = rng.randint(1, 20)
        group = f"{region}/{category}"
        totals[group] = totals.get(group, 0) + n
        value = f'{{"product":"p{product}","clicks":{n}}}'.encode()
        yield "clicks", f"user{user}".encode(), value, produced.base + 1000 + int(i * step)


def produce_enrich(
    bootstrap: str,
    clicks_topic: str,
    products_topic: str,
    produced: Produced,
    users: int,
    clicks: int,
    products: int,
    unknown_share: float = 0.02,
) -> Produced:
    """Writes :func:`enrichment`'s records (products on ``products_topic``, clicks on ``clicks_topic``); the
    answer: ``clicks`` enriched clicks, ``totals`` the clicks summed per ``<region>/<category>``."""
    producer = _producer(bootstrap)
    started = time.monotonic()
    totals: dict[str, int] = {}
    topics = {"products": products_topic, "clicks": clicks_topic}
    for name, key, value, ts in enrichment(produced, users, clicks, products, totals, unknown_share=unknown_share):
        _produce(producer, topics[name], key, value, ts)
    producer.flush(120)
    return Produced(time.monotonic() - started, produced.base, clicks, totals)


def join_pairs(left: dict[str, list[int]], right: dict[str, list[int]], window_ms: int) -> int:
    """Pairs (l, r) of the same key with ``|l - r| <= window_ms``; each list sorted."""
    pairs = 0
    for key, lefts in left.items():
        rights = right.get(key)
        if rights:
            for ts in lefts:
                pairs += bisect_right(rights, ts + window_ms) - bisect_left(rights, ts - window_ms)
    return pairs


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
