"""Demo data. Seed 000's sample, in its spirit: users click, regions change, some users have no region yet.

=========  ===================  =====================  ===========================================
Offset     user-regions         user-clicks            clicks-per-region after
=========  ===================  =====================  ===========================================
0-4 s      alice, dana: europe
           bob, eve: americas
           chao: asia
10-15 s                         alice 13, bob 4,       europe 20, americas 7, asia 20,
                                chao 20, dana 7,       UNKNOWN 9 (frank has no region yet)
                                eve 3, frank 9
20 s       bob -> asia                                 (only later clicks count for asia)
21-23 s                         bob 5, alice 6         asia 25, europe 26
30 s       frank -> africa
31 s                            frank 2                africa 2
32 s                            eve (null value)       dead-lettered (null-value), counted: a
                                                       stream record without a value (a keyless
                                                       click would count for UNKNOWN: KIP-962;
                                                       a keyless region: compacted topics refuse it)
=========  ===================  =====================  ===========================================
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from streamjoin.core.backfill import DAY_MS, day_start_ms
from streamjoin.core.plans import resolve
from streamjoin.core.spec import PipelineSpec

#: Sample events of the other example pipelines: ``<dir>/<pipeline>.jsonl``, ``ts`` in ms from the demo start.
EXAMPLES_DIR = "include/examples"
#: The demo's records start this long before the end of the demo day (fresh for the freshness check).
DEMO_BEFORE_DAY_END_MS = 10 * 60_000

#: The per-region totals the stream-table semantics imply for :func:`sample_records`.
EXPECTED_TOTALS = {"europe": 26, "americas": 7, "asia": 25, "UNKNOWN": 9, "africa": 2}


@dataclass(frozen=True)
class SampleRecord:
    topic: str
    key: str | None
    value: object
    offset_ms: int


def sample_records(clicks_topic: str = "user-clicks", regions_topic: str = "user-regions") -> list[SampleRecord]:
    regions = [("alice", "europe", 0), ("bob", "americas", 1000), ("chao", "asia", 2000), ("dana", "europe", 3000),
               ("eve", "americas", 4000), ("bob", "asia", 20_000), ("frank", "africa", 30_000)]  # fmt: skip
    clicks = [("alice", 13, 10_000), ("bob", 4, 11_000), ("chao", 20, 12_000), ("dana", 7, 13_000),
              ("eve", 3, 14_000), ("frank", 9, 15_000), ("bob", 5, 21_000), ("alice", 6, 23_000),
              ("frank", 2, 31_000), ("eve", None, 32_000)]  # fmt: skip
    records = [SampleRecord(regions_topic, user, region, at) for user, region, at in regions]
    records += [SampleRecord(clicks_topic, user, n, at) for user, n, at in clicks]
    return sorted(records, key=lambda r: r.offset_ms)


def example_events(pipeline: str, directory: str = EXAMPLES_DIR) -> list[SampleRecord]:
    """The sample events of an example pipeline, in file order (the order they are produced in)."""
    path = resolve(directory) / f"{pipeline}.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [SampleRecord(row["topic"], row.get("key"), row.get("value"), int(row["ts"])) for row in rows]


def demo_records(spec: PipelineSpec) -> list[SampleRecord]:
    """What a pipeline's demo produces: the seed-000 sample above for ``clicks_per_region``, else the
    pipeline's example events."""
    if spec.name == "clicks_per_region":
        return sample_records(spec.left.topic, spec.right.topic)
    return example_events(spec.name)


def has_demo(spec: PipelineSpec, directory: str = EXAMPLES_DIR) -> bool:
    """Whether the pipeline ships a demo: sample data, an output to files and a quality suite to check."""
    sample = spec.name == "clicks_per_region" or (resolve(directory) / f"{spec.name}.jsonl").is_file()
    return sample and spec.output.files is not None and spec.quality is not None


def demo_day(now_ms: int) -> tuple[date, int]:
    """The demo's day (yesterday, UTC: a day that is over, so it can be reprocessed and checked) and the
    timestamp its records start at (shortly before the day's end)."""
    day = (datetime.fromtimestamp(now_ms / 1000, UTC) - timedelta(days=1)).date()
    return day, day_start_ms(day) + DAY_MS - DEMO_BEFORE_DAY_END_MS
