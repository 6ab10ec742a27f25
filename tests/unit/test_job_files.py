"""The offset log the streaming job keeps in its checkpoint: planned before a batch, committed after."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from streamjoin.core.errors import CheckpointLockedError, CorruptCheckpointError
from streamjoin.core.job_files import Lease, OffsetLog, PipelineFiles


def test_a_planned_batch_is_read_back_unchanged_and_counts_once_committed(tmp_path: Path) -> None:
    log = PipelineFiles(tmp_path).offset_log
    assert log.last_committed() is None and log.committed_offsets() is None
    log.set_initial({"clicks": {0: 0, 1: 0}})
    log.plan(0, {"clicks": {0: 5, 1: 7}}, 1)
    assert log.planned(0) == {"clicks": {0: 5, 1: 7}}
    assert log.last_committed() is None  # planned, not done: a restart runs it again
    log.commit(0)
    assert log.last_committed() == 0 and log.committed_offsets() == {"clicks": {0: 5, 1: 7}}
    assert log.initial() == {"clicks": {0: 0, 1: 0}}
    assert PipelineFiles(tmp_path).offset_log.query_id() == log.query_id()


def test_entries_are_in_spark_s_checkpoint_format(tmp_path: Path) -> None:
    """Tools that read Spark's offset logs (and the backfill sensor) read ours."""
    log = OffsetLog(tmp_path)
    log.plan(3, {"b": {1: 2}, "a": {0: 9}}, 1234)
    lines = (tmp_path / "offsets" / "3").read_text().splitlines()
    assert lines == ["v1", '{"batchWatermarkMs": 0, "batchTimestampMs": 1234}', '{"a": {"0": 9}, "b": {"1": 2}}']


def test_old_entries_are_pruned(tmp_path: Path) -> None:
    log = OffsetLog(tmp_path, keep=2)
    for batch in range(5):
        log.plan(batch, {"t": {0: batch}}, 0)
        log.commit(batch)
    assert sorted(p.name for p in (tmp_path / "offsets").iterdir()) == ["3", "4"]
    assert log.committed_offsets() == {"t": {0: 4}}


def test_a_corrupt_file_is_refused_with_its_path(tmp_path: Path) -> None:
    (tmp_path / "metadata").write_text("not json\n")
    with pytest.raises(CorruptCheckpointError, match=r"metadata.*move it aside"):
        OffsetLog(tmp_path).query_id()
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_text("v1\n{}\n")
    with pytest.raises(CorruptCheckpointError, match=r"offsets/0"):
        OffsetLog(tmp_path).planned(0)


def test_a_second_lease_on_a_held_checkpoint_is_refused_naming_the_holder(tmp_path: Path) -> None:
    first, second = Lease(tmp_path), Lease(tmp_path)
    first.acquire(settle=0)
    with pytest.raises(CheckpointLockedError, match=first.owner):
        second.acquire(settle=0)
    first.release()
    second.acquire(settle=0)
    assert second.held and not (tmp_path / "lease.json").read_text().count(first.owner)


def test_an_expired_lease_is_taken_over_and_its_old_holder_notices(tmp_path: Path) -> None:
    dead = Lease(tmp_path, ttl=0.05)
    dead.acquire(settle=0)
    time.sleep(0.1)  # the driver died: nobody renewed it
    alive = Lease(tmp_path)
    alive.acquire(settle=0)
    dead.renew()
    assert alive.held and not dead.held


def test_of_two_drivers_starting_at_once_exactly_one_holds_the_lease(tmp_path: Path) -> None:
    leases = [Lease(tmp_path) for _ in range(4)]
    outcomes: list[str] = []

    def start(lease: Lease) -> None:
        try:
            lease.acquire(settle=0.2)
            outcomes.append("held")
        except CheckpointLockedError:
            outcomes.append("refused")

    threads = [threading.Thread(target=start, args=(lease,)) for lease in leases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "a lease acquisition did not end within 30 s"
    assert sorted(outcomes) == ["held", "refused", "refused", "refused"]


def test_the_lease_of_a_killed_driver_on_this_host_is_taken_over_at_once(tmp_path: Path) -> None:
    """A supervisor restarts a SIGKILLed driver within seconds: it must not wait for the lease to expire."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    held = {"owner": f"{socket.gethostname()}:{dead.pid}:cafe", "expires_at": time.time() + 30}
    (tmp_path / "lease.json").write_text(json.dumps(held))
    Lease(tmp_path).acquire(settle=0)
    alive = {"owner": f"{socket.gethostname()}:{os.getpid()}:beef", "expires_at": time.time() + 30}
    (tmp_path / "lease.json").write_text(json.dumps(alive))
    with pytest.raises(CheckpointLockedError, match="beef"):
        Lease(tmp_path).acquire(settle=0)
