"""``streamjoin replay``: the TopologyTestDriver-like command, run as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from streamjoin.core.plans import PROJECT_HOME


@pytest.mark.spark
def test_replay_prints_the_emitted_changelog(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "streamjoin.cli", "replay", "include/pipelines/clicks_per_region.yaml",
         "--events", "include/examples/clicks_per_region.jsonl", "--out", str(out), "--sources"],
        cwd=PROJECT_HOME, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    totals = [(r["key"], r["value"]) for r in rows if r["topic"] == "clicks-per-region"]
    assert totals == [("europe", 13), ("americas", 4), ("UNKNOWN", 7), ("asia", 5), ("UNKNOWN", 9)]
    alice = {"topic": "user-clicks", "partition": 0, "offset": 2}  # the file's third line (file order: offsets)
    assert rows[0] == {
        "topic": "enriched-clicks",
        "key": "alice",
        "value": {"region": "europe", "clicks": 13},
        "ts": 2000,
        "source": alice,
    }
    assert next(r for r in rows if r["topic"] == "clicks-per-region")["source"] == alice
    lines = [json.loads(line) for line in (PROJECT_HOME / "include/examples/clicks_per_region.jsonl").open()]
    for row in rows:  # every output names the click that produced it (file order: the offset is the line)
        click = lines[row["source"]["offset"]]
        assert click["topic"] == row["source"]["topic"] == "user-clicks" and click["ts"] == row["ts"], row
        assert row["topic"] != "enriched-clicks" or click["key"] == row["key"], row


def test_replay_names_the_bad_line(tmp_path: Path) -> None:
    events = tmp_path / "bad.jsonl"
    events.write_text('{"topic": "user-clicks", "key": "a", "value": 1}\n')
    done = subprocess.run(
        [sys.executable, "-m", "streamjoin.cli", "replay", "include/pipelines/clicks_per_region.yaml",
         "--events", str(events)],
        cwd=PROJECT_HOME, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert f"{events}:1: missing ['ts']" in done.stderr
