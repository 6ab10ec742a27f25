"""A generated day of seed-style events with out-of-order and late records, around one UTC day."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from streamjoin.core.backfill import DAY_MS, day_start_ms
from streamjoin.core.codec import encode
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.spec import Format, PipelineSpec

# recent, not fixed: the broker deletes records older than its 7-day retention
DAY = datetime.now(UTC).date() - timedelta(days=3)
USERS = [f"u{n:02d}" for n in range(12)]
REGIONS = ["EU", "US", "APAC"]
SEED_SPEC = PROJECT_HOME / "include" / "pipelines" / "clicks_per_region.yaml"


def day_events(spec: PipelineSpec, *, seed: int = 7, clicks: int = 400) -> tuple[list[tuple], list[tuple]]:
    """(phase 1, phase 2) record tuples for ``produce_records``.

    Phase 1 spans the day before and the day (regions change during the day, clicks jitter up to a
    minute out of order); phase 2 holds the next day's first records, each followed by a *late* click
    of the day on the same key (same partition), and a region tombstone.
    """
    rng = random.Random(seed)
    clicks_topic, regions_topic = spec.left.topic, spec.right.topic
    start = day_start_ms(DAY)

    def click(user: str, ts: int) -> tuple:
        return (clicks_topic, user.encode(), encode(rng.randint(1, 9), Format.LONG), ts, [])

    def region(user: str, value: str | None, ts: int) -> tuple:
        return (regions_topic, user.encode(), encode(value, Format.STRING), ts, [])

    phase1: list[tuple] = []
    for user in USERS[:-2]:  # the last two users have no region: the left join gives UNKNOWN
        phase1.append(region(user, rng.choice(REGIONS), start - DAY_MS + rng.randint(0, 3_600_000)))
    events: list[tuple[int, tuple]] = []
    for _ in range(clicks):
        ts = start - 6 * 3_600_000 + rng.randint(0, DAY_MS + 6 * 3_600_000 - 120_000)
        produced_at = ts + rng.randint(-60_000, 60_000)  # out of order within a minute
        events.append((produced_at, click(rng.choice(USERS), ts)))
    for _ in range(20):
        ts = start + rng.randint(0, DAY_MS - 1)
        events.append((ts, region(rng.choice(USERS[:-2]), rng.choice(REGIONS), ts)))
    phase1 += [record for _, record in sorted(events, key=lambda e: e[0])]
    phase2: list[tuple] = []
    end = start + DAY_MS
    for n, user in enumerate(USERS[:6]):
        phase2.append(click(user, end + 60_000 * (n + 1)))  # the next day
        phase2.append(click(user, end - 30_000 * (n + 1)))  # late: the day, after the next day's record
    phase2.append(region(USERS[0], None, end + 600_000))
    phase2.append(click(USERS[0], end + 700_000))
    return phase1, phase2


def write_seed_spec(directory: Path, make_topic: Callable[[str], str], name: str = "clicks_per_region") -> Path:
    """The seed pipeline on unique topics, with its files under ``directory/output``."""
    data = yaml.safe_load(SEED_SPEC.read_text())
    data["name"] = name
    data["inputs"]["clicks"]["topic"] = make_topic("user-clicks")
    data["inputs"]["regions"]["topic"] = make_topic("user-regions")
    data["output"]["topic"] = make_topic("enriched-clicks")
    data["output"]["files"]["path"] = str(directory / "output" / "enriched")
    data["aggregate"]["output"]["topic"] = make_topic("clicks-per-region")
    data["aggregate"]["output"]["files"]["path"] = str(directory / "output" / "per_region")
    data["dead_letter_topic"] = make_topic("dlq")
    data.pop("quality", None)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
