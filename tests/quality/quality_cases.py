"""Data of the quality tests: the seed spec's paths, a clean day of enriched output and its defects.

The clean day of ``clicks_per_region`` has 200 clicks of 50 users on 2026-01-02; users u000 and u001
have no region (matched=false, region UNKNOWN), so the match rate is 0.96; the newest click is 10 min
before midnight. Each defect changes exactly one property of it.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[2]
SPEC_PATH = PROJECT / "include" / "pipelines" / "clicks_per_region.yaml"
SUITE_PATH = PROJECT / "include" / "expectations" / "clicks_per_region.yaml"
DAY = date(2026, 1, 2)
DAY_MS = 86_400_000
START_MS = int(datetime.combine(DAY, datetime.min.time(), UTC).timestamp() * 1000)
N_CLICKS, N_USERS = 200, 50
REGIONS = ("europe", "americas", "asia", "africa")  # the suite's set, as the demo data
NO_REGION = {0, 1}  # users without a region in the table: 4% of clicks unmatched
ENRICHED_SCHEMA = (
    "key string, value struct<region: string, clicks: long>, ts long, matched boolean, "
    "src_topic string, src_partition int, src_offset long"
)
AGGREGATE_SCHEMA = "key string, value long, ts long"

Row = list[Any]


def clean_rows(*, missing_region: set[int] = NO_REGION) -> list[Row]:
    """Enriched output of a clean day: one row per click, in click order."""
    rows = []
    for i in range(N_CLICKS):
        user = i % N_USERS
        matched = user not in missing_region
        region = REGIONS[user % len(REGIONS)] if matched else "UNKNOWN"
        ts = START_MS + (i + 1) * (DAY_MS - 600_000) // N_CLICKS  # newest: 10 min before the day ends
        rows.append([f"u{user:03d}", (region, 1 + i % 5), ts, matched, "user-clicks", i % 4, i // 4])
    return rows


def null_key(rows: list[Row]) -> list[Row]:
    rows[7][0] = None
    return rows


def right_side_dropped(rows: list[Row]) -> list[Row]:
    """The region table lost 20% of the users (10 of 50): their clicks are unmatched, region UNKNOWN."""
    dropped = {f"u{u:03d}" for u in range(10, 20)}
    for row in rows:
        if row[0] in dropped:
            row[1], row[3] = ("UNKNOWN", row[1][1]), False
    return rows


def duplicated(rows: list[Row]) -> list[Row]:
    return rows + [list(r) for r in rows[40:50]]


def negative_count(rows: list[Row]) -> list[Row]:
    rows[3][1] = (rows[3][1][0], -3)
    return rows


def stale(rows: list[Row]) -> list[Row]:
    """Nothing arrived in the last ~7 hours of the day: every ts squeezed into the first 70% of it."""
    for row in rows:
        row[2] = START_MS + (row[2] - START_MS) * 7 // 10
    return rows


def incomplete(rows: list[Row]) -> list[Row]:
    """Three clicks of the day have no output."""
    return rows[:100] + rows[103:]
