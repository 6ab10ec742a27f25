"""The job's history file (``history.jsonl``): appended per batch by the heartbeat, bounded, tolerant of a line
torn by a crash; and what the status page derives from it (series, job starts, the recent rate)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from streamjoin.core.job_files import BatchCounts, History, HistoryEntry, PipelineFiles, parse_history, trim_history
from streamjoin.core.job_history import job_starts, recent, series
from streamjoin.spark import heartbeat
from streamjoin.spark.heartbeat import Heartbeat


def test_trim_keeps_the_last_hours_and_at_most_the_newest_entries() -> None:
    entries = [HistoryEntry(t=float(t), batch_id=t) for t in range(0, 1000, 10)]
    assert [e.t for e in trim_history(entries, now=1000, keep_seconds=95, max_entries=100)] == [
        910.0, 920.0, 930.0, 940.0, 950.0, 960.0, 970.0, 980.0, 990.0,
    ]  # fmt: skip
    assert [e.batch_id for e in trim_history(entries, now=1000, keep_seconds=10_000, max_entries=3)] == [
        970,
        980,
        990,
    ]
    assert trim_history(entries, now=1000, keep_seconds=10_000, max_entries=0) == []


def test_a_torn_last_line_is_skipped_and_the_next_append_starts_a_line_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text('{"t": 1.0, "batch_id": 0}\n{"t": 2.0, "batch_id": 1}\n{"t": 3.0, "bat')  # a crash mid-write
    assert [e.batch_id for e in History(path).read()] == [0, 1]
    History(path, keep_seconds=1e12).append(HistoryEntry(t=4.0, batch_id=2))  # a restarted job's first entry
    assert [e.batch_id for e in History(path).read()] == [0, 1, 2]
    assert parse_history('[1, 2]\n{"no_t": 1}\n\n{"t": "x"}\nnot json\n{"t": 5}') == [HistoryEntry(t=5.0)]


def test_appends_are_trimmed_now_and_then_atomically(tmp_path: Path) -> None:
    history = History(tmp_path / "history.jsonl", keep_seconds=3600, max_entries=50, trim_every=20)
    now = time.time()
    history.append(HistoryEntry(t=now - 7200, batch_id=-1))  # older than the window: gone at the first trim
    for batch in range(200):
        history.append(HistoryEntry(t=now - 200 + batch, batch_id=batch))
    kept = history.read()
    assert 50 <= len(kept) < 50 + 20  # trimmed to 50 every 20 appends
    ids = [e.batch_id if e.batch_id is not None else -2 for e in kept]
    assert ids[-1] == 199 and all(i >= 0 for i in ids) and ids == sorted(ids)
    assert not list(tmp_path.glob(".*tmp"))  # no temporary file left behind
    assert [e.batch_id for e in history.read(since=now - 3)] == [197, 198, 199]


def test_the_heartbeat_appends_one_entry_per_batch_and_marks_idle_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = time.time()
    clock = [base]
    monkeypatch.setattr(heartbeat, "time", SimpleNamespace(time=lambda: clock[0]))  # the heartbeat's clock only
    files = PipelineFiles(tmp_path)
    beat = Heartbeat(files, "p", "query", "run-1", spark_ui="http://127.0.0.1:4040")
    started = base - 5
    beat.batch(0, 30, started, 1.5, {"clicks": {0: 30}}, None, BatchCounts(dead_letters=2, state_bytes=900), lag=12)
    beat.batch(1, 12, started + 3, 0.5, {"clicks": {0: 42}}, None, BatchCounts(state_bytes=950), lag=0)
    for seconds in (1, 30, 59, 61, 90, 125):  # caught up: an idle entry a minute after the last entry
        clock[0] = base + seconds
        beat.idle()
    entries = files.history.read()
    assert [e.batch_id for e in entries] == [0, 1, None, None]
    first, second, idle, _ = entries
    assert first.input_records == 30 and first.lag == 12 and first.duration_ms == 1500
    assert first.processed_rps == 20.0 and first.dead_letters == 2 and first.state_bytes == 900
    assert second.input_rps == 4.0  # 12 rows, 3 s after the previous batch started
    assert idle.idle is True and idle.lag == 0 and idle.input_records == 0
    assert [round(e.t - base) for e in entries[2:]] == [61, 125]
    assert {e.run_id for e in entries} == {"run-1"}
    assert files.status() is not None and files.status().spark_ui == "http://127.0.0.1:4040"  # type: ignore[union-attr]
    # a restarted job (new run id) goes on appending to the same history
    Heartbeat(files, "p", "query", "run-2").batch(2, 5, clock[0], 0.2, {"clicks": {0: 47}})
    assert len(job_starts(files.history.read())) == 1
    assert json.loads((tmp_path / "history.jsonl").read_text().splitlines()[-1])["run_id"] == "run-2"


def test_series_starts_and_the_recent_rate_come_from_the_entries() -> None:
    now = 10_000.0
    entries = [
        HistoryEntry(t=now - 900, batch_id=0, run_id="a", input_records=600, input_rps=2.0, lag=5),
        HistoryEntry(t=now - 240, batch_id=1, run_id="b", input_records=300, input_rps=1.0, lag=0),
        HistoryEntry(t=now - 60, batch_id=2, run_id="b", input_records=150, input_rps=2.5, lag=None),
        HistoryEntry(t=now - 30, run_id="b", idle=True, input_records=0, input_rps=0.0, lag=0),
    ]
    assert series(entries, "lag") == [(now - 900, 5.0), (now - 240, 0.0), (now - 30, 0.0)]  # None left out
    assert series(entries, "input_rps", 10) == [(now - 900, 20.0), (now - 240, 10.0), (now - 60, 25.0), (now - 30, 0.0)]
    assert job_starts(entries) == [now - 240]
    busy = recent(entries, now, window=300)
    assert (busy.batches, busy.records, busy.rows_per_second) == (2, 450, 1.5)
    assert busy.text(lag=0) == "1.5 rows/s over the last 5 min (450 rows, 2 batches)"
    quiet = recent(entries, now + 600, window=300)  # no batch in the window: a caught-up job is idle, not "0.0"
    assert quiet.text(lag=0) == "idle: caught up, last batch 11 min ago"
    assert quiet.text(lag=40) == "no batch in the last 5 min with 40 records waiting, last batch 11 min ago"
    assert quiet.text(lag=0, running=False) == "no batch in the last 5 min, last batch 11 min ago"
    assert recent([], now).text(lag=None) == "no batch in the last 5 min"
