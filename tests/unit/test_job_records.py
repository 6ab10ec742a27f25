"""The typed job records (:mod:`streamjoin.core.job_files`): each written and read back through the job files
unchanged, and each file the previous release wrote (old names, missing keys, unknown keys) read into the
current vocabulary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamjoin.core.job_files import (
    Assessment,
    BatchCounts,
    DriverRecord,
    History,
    HistoryEntry,
    JobFailure,
    JobStatus,
    PipelineFiles,
    SupervisorRecord,
    WatchEvent,
)
from streamjoin.core.supervision import Policy

STATUS = JobStatus(
    pipeline="clicks", query_id="q", run_id="r2", batch_id=9, written_at=1_700_000_100.5,
    last_batch_time="2023-11-14T22:15:00.000+00:00", pid=4242,
    counts=BatchCounts(input_records=40, output_records=31, dead_letters=2, aggregate_updates=5, state_bytes=4096,
                       read_ms=10, write_ms=20, state_ms=3),
    input_rps=12.5, processed_rps=80.0, duration_ms=500, end_offsets={"clicks": {"0": 30, "1": 25}},
    watermarks={"clicks": 1_700_000_000_000}, watermark_ms=1_700_000_000_000,
    totals=BatchCounts(input_records=400, output_records=310, dead_letters=20, aggregate_updates=50),
    spark_ui="http://127.0.0.1:4040",
)  # fmt: skip

#: a status.json of the previous release (before the one vocabulary): names of then, a field no longer written
OLD_STATUS = {
    "pipeline": "clicks", "query_id": "q", "run_id": "r1", "batch_id": 3, "num_input_rows": 12,
    "input_rows_per_second": 1.5, "processed_rows_per_second": 30.0, "batch_duration_ms": 400,
    "end_offsets": {"clicks": {"0": 7}}, "last_batch_time": "2023-11-14T22:13:20.000+00:00",
    "written_at": 1_700_000_000.0, "pid": 11, "watermarks": {}, "watermark_ms": None, "dead_lettered": 1,
    "join_results": 9, "state_bytes": 512, "totals": {"input_records": 100, "dead_lettered": 4, "results": 80},
    "spark_ui": None, "some_field_of_then": [1, 2],
}  # fmt: skip


def test_the_status_is_read_back_as_written(tmp_path: Path) -> None:
    files = PipelineFiles(tmp_path)
    files.write_status(STATUS)
    assert files.status() == STATUS
    assert files.watermark() == 1_700_000_000_000
    written = json.loads((tmp_path / "status.json").read_text())
    assert written["input_records"] == 40 and written["output_records"] == 31 and written["dead_letters"] == 2
    assert written["totals"] == {"input_records": 400, "output_records": 310, "dead_letters": 20,
                                 "aggregate_updates": 50}  # fmt: skip
    for old in ("num_input_rows", "dead_lettered", "join_results", "batch_duration_ms", "input_rows_per_second"):
        assert old not in written and old not in written["totals"]


def test_a_status_of_the_previous_release_reads_in_today_s_names(tmp_path: Path) -> None:
    (tmp_path / "status.json").write_text(json.dumps(OLD_STATUS))
    status = PipelineFiles(tmp_path).status()
    assert status is not None
    assert status.counts == BatchCounts(input_records=12, output_records=9, dead_letters=1, state_bytes=512)
    assert (status.input_rps, status.processed_rps, status.duration_ms) == (1.5, 30.0, 400)
    assert status.totals == BatchCounts(input_records=100, output_records=80, dead_letters=4)
    assert status.end_offsets == {"clicks": {"0": 7}} and status.watermark_ms is None and status.batch_id == 3
    # the current name wins over an old one in the same record
    both = JobStatus.from_json({"dead_lettered": 1, "dead_letters": 6, "results": 2, "output_records": 3})
    assert (both.counts.dead_letters, both.counts.output_records) == (6, 3)
    # a record with almost nothing in it: defaults, not an error
    bare = JobStatus.from_json({"written_at": "1700000000", "batch_id": "x", "end_offsets": {"t": {"0": "n"}}})
    assert bare.written_at == 1_700_000_000.0 and bare.batch_id is None and bare.end_offsets == {"t": {}}
    assert bare.counts == BatchCounts() and bare.totals == BatchCounts()
    (tmp_path / "status.json").write_text("[1, 2]")  # not a record
    assert PipelineFiles(tmp_path).status() is None


def test_batch_counts_round_trip_and_read_the_job_s_old_batch_line() -> None:
    counts = BatchCounts(input_records=3, output_records=2, dead_letters=1, aggregate_updates=4, state_bytes=9)
    assert BatchCounts.from_json(counts.to_json()) == counts
    old_line = {"pipeline": "p", "batch_id": 1, "seconds": 0.2, "join_results": 7, "dead_lettered": 2, "x": 1}
    assert BatchCounts.from_json(old_line) == BatchCounts(output_records=7, dead_letters=2)
    assert counts.plus(counts) == BatchCounts(input_records=6, output_records=4, dead_letters=2, aggregate_updates=8)


def test_history_entries_round_trip_and_old_lines_are_read(tmp_path: Path) -> None:
    history = History(tmp_path / "history.jsonl")
    batch = HistoryEntry(t=100.0, run_id="r", batch_id=0, input_records=30, input_rps=3.0, processed_rps=60.0,
                         duration_ms=500, lag=12, state_bytes=900, dead_letters=2, output_records=28)  # fmt: skip
    idle = HistoryEntry(t=160.0, run_id="r", idle=True, input_rps=0.0, lag=0)
    history.append(batch)
    history.append(idle)
    assert history.read() == [batch, idle]
    lines = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert lines[1] == {"t": 160.0, "run_id": "r", "idle": True, "input_records": 0, "input_rps": 0.0, "lag": 0}
    assert "idle" not in lines[0] and "batch_id" not in lines[1]  # short lines: nothing that is not there
    # a line of the previous release: its names, a field no longer written
    with (tmp_path / "history.jsonl").open("a") as out:
        out.write(json.dumps({"t": 200, "batch_id": 1, "run_id": "r", "num_input_rows": 5, "dead_lettered": 1,
                              "join_results": 4, "batch_duration_ms": 90, "gone": True}) + "\n")  # fmt: skip
    old = history.read()[-1]
    assert (old.input_records, old.dead_letters, old.output_records, old.duration_ms) == (5, 1, 4, 90)
    assert HistoryEntry.from_json({"batch_id": 1}) is None  # no time: not an entry


def test_the_driver_record_round_trips_and_an_old_one_is_read(tmp_path: Path) -> None:
    files = PipelineFiles(tmp_path)
    assert files.driver() is None and not files.driver_alive()
    recorded = files.record_driver(123, 120, "/ck/driver.log", "streamjoin-clicks")
    assert files.driver() == recorded and recorded.started_at is not None
    cluster = files.record_driver(None, None, None, "clicks", driver_id="driver-2026-0001",
                                  master="spark://h:7077", conn_id="spark_cluster")  # fmt: skip
    assert files.driver() == cluster and not files.driver_alive()  # no pid here: not a local process
    (tmp_path / "driver.json").write_text(json.dumps({"pid": 77, "started_at": 5, "log": "/l", "extra": 1}))
    assert files.driver() == DriverRecord(pid=77, pgid=77, started_at=5.0, log="/l")  # pgid: its own group then


def test_the_supervisor_record_round_trips_and_an_old_one_is_read(tmp_path: Path) -> None:
    files = PipelineFiles(tmp_path)
    assert files.supervisor() == SupervisorRecord()  # before the owner wrote one
    record = SupervisorRecord(
        restarts=[10.0, 20.0], lagging_since=15.0, restart_after=30.0, gave_up_at=None,
        last=Assessment("lagging", "lag 20000 > 10000", {"clicks": 20_000}, 25.0),
        policy=Policy(stale_after=60, max_restarts=5).to_json(),
    )  # fmt: skip
    files.save_supervisor(record)
    assert files.supervisor() == record
    assert Policy.from_json(files.supervisor().policy) == Policy(stale_after=60, max_restarts=5)
    # the previous release's record: no policy, a "last" without lag, a stray key
    old = {"restarts": [1, "2", None], "lagging_since": None, "gave_up_at": 9,
           "last": {"state": "failed", "reason": "crash loop", "at": 9}, "note": "x"}  # fmt: skip
    (tmp_path / "supervisor.json").write_text(json.dumps(old))
    read = files.supervisor()
    assert read.restarts == [1.0, 2.0] and read.gave_up_at == 9.0 and read.policy is None
    assert read.last == Assessment("failed", "crash loop", {}, 9.0)
    owner = Policy(stale_after=300, lag_threshold=5)  # no policy recorded: the caller's default stands
    assert Policy.from_json(read.policy, owner) == owner
    assert Policy.from_json({"stale_after": 30, "unknown": 1, "window": "x"}, owner) == Policy(30, 5)


def test_the_watch_event_round_trips_and_an_old_payload_is_read() -> None:
    event = WatchEvent("lagging", "lagging", "lag 12000 > 10000", {"a": 7000, "b": 5000}, 100.0, 400.0)
    assert WatchEvent.from_json(json.loads(json.dumps(event.to_json()))) == event
    assert event.total_lag == 12_000 and event.assessment() == Assessment("lagging", event.reason, event.lag, 400.0)
    old = {"event": "dead", "state": "dead", "reason": "no driver", "lag": {}, "at": 5}  # no lagging_since then
    assert WatchEvent.from_json(old) == WatchEvent("dead", "dead", "no driver", {}, None, 5.0)
    with pytest.raises(ValueError, match="not a watch event"):
        WatchEvent.from_json({"state": "dead"})


def test_the_failure_round_trips(tmp_path: Path) -> None:
    files = PipelineFiles(tmp_path)
    failure = JobFailure("KafkaAuthenticationError", "password refused", False, 12.5)
    files.record_failure(failure)
    assert files.failure() == failure and JobFailure.from_json(failure.to_json()) == failure
