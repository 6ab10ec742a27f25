"""``streamjoin replay``: the TopologyTestDriver-like command, run as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_spark_scenarios import assert_same

from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.records import Emitted, Record
from streamjoin.core.reference import ReferenceEngine
from streamjoin.core.spec import load_spec
from streamjoin.examples import functions as examples

SEED_SPEC = "include/pipelines/clicks_per_region.yaml"
#: the shipped spec's Spark SQL projections, as the reference engine runs them (it cannot run Spark SQL)
SEED_FUNCTIONS = {"joiner": examples.region_or_unknown, "group_by": examples.region, "value": examples.clicks}


def _replay(events: str | Path, *options: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    """``streamjoin replay`` of the seed's spec, run as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "streamjoin.cli", "replay", SEED_SPEC, "--events", str(events), *options],
        cwd=PROJECT_HOME, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


@pytest.mark.spark
def test_replay_prints_the_emitted_changelog(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    done = _replay("include/examples/clicks_per_region.jsonl", "--out", str(out), "--sources")
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


#: two partitions (users a and b on 0, c and d on 1) whose file order is not the batch ordering rule's: b's
#: region changes at 3000 before b's click at 2100 in the file; d's region at 2250 comes after d's click at
#: 2300; a's click at 2000 comes after b's at 2100 (out of order in its partition); a's region is deleted; a
#: keyless click (KIP-962: UNKNOWN) and a click without a value (a dead letter)
BATCH_EVENTS: list[dict[str, Any]] = [
    {"topic": "user-regions", "key": "a", "value": "europe", "ts": 1000, "partition": 0},
    {"topic": "user-regions", "key": "b", "value": "americas", "ts": 1000, "partition": 0},
    {"topic": "user-regions", "key": "c", "value": "asia", "ts": 1500, "partition": 1},
    {"topic": "user-regions", "key": "b", "value": "asia", "ts": 3000, "partition": 0},
    {"topic": "user-clicks", "key": "b", "value": 4, "ts": 2100, "partition": 0},
    {"topic": "user-clicks", "key": "c", "value": 7, "ts": 2200, "partition": 1},
    {"topic": "user-clicks", "key": "a", "value": 13, "ts": 2000, "partition": 0},
    {"topic": "user-clicks", "key": "d", "value": 5, "ts": 2300, "partition": 1},
    {"topic": "user-regions", "key": "a", "value": None, "ts": 2400, "partition": 0},
    {"topic": "user-clicks", "key": None, "value": 6, "ts": 2700, "partition": 0},
    {"topic": "user-clicks", "key": "a", "value": 2, "ts": 3400, "partition": 0},
    {"topic": "user-clicks", "key": "b", "value": 1, "ts": 3100, "partition": 0},
    {"topic": "user-clicks", "key": "d", "value": None, "ts": 3200, "partition": 1},
    {"topic": "user-regions", "key": "d", "value": "africa", "ts": 2250, "partition": 1},
]


@pytest.mark.spark
def test_replay_batch_equals_the_reference_engine_in_the_batch_ordering_rule(tmp_path: Path) -> None:
    """``--batch``: the file as one micro-batch, in the batch ordering rule: what
    ``ReferenceEngine.replay_batch`` emits (per output topic, in order; the dead letters), which is not what
    the file order gives for these events."""
    events = tmp_path / "events.jsonl"
    events.write_text("".join(json.dumps(e) + "\n" for e in BATCH_EVENTS))
    out = tmp_path / "out.jsonl"
    done = _replay(events, "--batch", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    got = [Emitted(r["topic"], r["key"], r["value"], r["ts"], tuple((r.get("headers") or {}).items()))
           for r in map(json.loads, out.read_text().splitlines())]  # fmt: skip
    spec = load_spec(PROJECT_HOME / SEED_SPEC)
    records = [Record(e["topic"], e["key"], e["value"], e["ts"], e["partition"]) for e in BATCH_EVENTS]
    expected = ReferenceEngine(spec, functions=SEED_FUNCTIONS).replay_batch(records)
    assert_same(expected, got, spec.dead_letter_topic, "replay --batch")
    in_file_order = ReferenceEngine(spec, functions=SEED_FUNCTIONS).replay(records)
    joined = [r for r in expected if r.topic == spec.output.topic]
    assert [r for r in in_file_order if r.topic == spec.output.topic] != joined  # the events tell the modes apart
    totals = {r.key: r.value for r in got if r.topic == "clicks-per-region"}
    assert totals == {"americas": 4, "asia": 8, "europe": 13, "africa": 5, "UNKNOWN": 8}


def test_replay_names_the_bad_line(tmp_path: Path) -> None:
    events = tmp_path / "bad.jsonl"
    events.write_text('{"topic": "user-clicks", "key": "a", "value": 1}\n')
    done = _replay(events, timeout=60)
    assert done.returncode != 0
    assert f"{events}:1: missing ['ts']" in done.stderr
