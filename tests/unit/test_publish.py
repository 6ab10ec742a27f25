"""Publishing a reprocessed day: the verdict's decision, the swap, the one-run-per-day lock (local files)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from streamjoin.core.publish import (
    Action,
    DayBusy,
    DayLock,
    DayOutcome,
    decide,
    lock_location,
    outcome_location,
    read_outcome,
    staged_location,
    staging_path,
    swap_in,
    write_outcome,
)
from streamjoin.core.storage import LocalStorage

DAY = date(2026, 11, 20)


@pytest.mark.parametrize(
    ("passed", "force", "published", "action"),
    [
        (True, False, False, Action.PUBLISH),
        (True, False, True, Action.PUBLISH),  # a passing check replaces the day there (and lifts a quarantine)
        (True, True, True, Action.PUBLISH),
        (False, False, False, Action.QUARANTINE),  # nothing published yet: the day goes in, quarantined
        (False, False, True, Action.KEEP),  # the published (or quarantined) day stays
        (False, True, True, Action.FORCE),
        (False, True, False, Action.FORCE),
    ],
)
def test_what_a_verdict_does_to_the_day(passed: bool, force: bool, published: bool, action: Action) -> None:
    assert decide(passed, force=force, published_exists=published) is action


def test_a_staged_day_is_swapped_in_whole(tmp_path: Path) -> None:
    files = str(tmp_path / "enriched")
    staged, target = Path(staged_location(files, DAY)), tmp_path / "enriched" / "daily" / f"date={DAY}"
    assert staged == tmp_path / "enriched" / "daily" / "_staging" / f"date={DAY}"
    target.mkdir(parents=True)
    (target / "old.parquet").write_text("old")
    staged.mkdir(parents=True)
    (staged / "new.parquet").write_text("new")
    swap_in(LocalStorage(), str(staged), str(target))
    assert sorted(p.name for p in target.iterdir()) == ["new.parquet"] and not staged.exists()
    assert sorted(p.name for p in target.parent.iterdir()) == ["_staging", f"date={DAY}"]  # no .old-* left


def test_a_day_staged_beside_its_target_survives_the_swap(tmp_path: Path) -> None:
    """The Spark job writes ``.date=D.new-*`` beside ``_staging/date=D`` and swaps it in there."""
    storage = LocalStorage()
    target = staged_location(str(tmp_path), DAY)
    staging = staging_path(storage, target)
    Path(staging).mkdir(parents=True)
    (Path(staging) / "part-0.parquet").write_text("rows")
    swap_in(storage, staging, target)
    assert sorted(p.name for p in Path(target).iterdir()) == ["part-0.parquet"]


def test_one_reprocess_per_pipeline_day(tmp_path: Path) -> None:
    lock = DayLock(LocalStorage(), lock_location(str(tmp_path), DAY), "clicks", DAY)
    running = {("streamjoin_reprocess", "run-1")}

    def active(dag_id: str, run_id: str) -> bool:
        return (dag_id, run_id) in running

    lock.acquire("streamjoin_reprocess", "run-1", active)
    lock.acquire("streamjoin_reprocess", "run-1", active)  # the same run again (a retry): allowed
    with pytest.raises(DayBusy) as refused:
        lock.acquire("streamjoin_backfill_clicks", "scheduled-1", active)
    assert str(refused.value).startswith(
        f"clicks {DAY} is being reprocessed by run 'run-1' of DAG 'streamjoin_reprocess'"
    )
    lock.release("streamjoin_backfill_clicks", "scheduled-1")  # not the holder: nothing happens
    assert (lock.holder() or {}).get("run_id") == "run-1"

    running.clear()  # the holder's run ended without releasing (killed): its lock is taken over
    lock.acquire("streamjoin_backfill_clicks", "scheduled-1", active)
    assert (lock.holder() or {}).get("run_id") == "scheduled-1"
    lock.release("streamjoin_backfill_clicks", "scheduled-1")
    assert lock.holder() is None


def test_the_outcome_record_round_trips_and_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    """What the reprocessing application writes, the Airflow task reads back the same; a record it cannot read
    (torn, unknown action) is an error naming what is wrong, never taken for a published day."""
    location = outcome_location(str(tmp_path), DAY)
    assert location == f"{tmp_path}/daily/_staging/date=2026-11-20.outcome.json"
    assert read_outcome(LocalStorage(), location) is None
    outcome = DayOutcome(pipeline="p", day=DAY.isoformat(), action=Action.FORCE.value, path="/x/date=2026-11-20",
                         consequence="published with force", check={"success": False}, forced_file="/x/_FORCED.json",
                         dag_id="d", run_id="r", left_records=49, input_rows=61, results=48, seconds=1.5)  # fmt: skip
    write_outcome(LocalStorage(), location, outcome)
    back = read_outcome(LocalStorage(), location)
    assert back == outcome and back.published
    assert not DayOutcome.from_json({**outcome.to_json(), "action": "keep"}).published
    with pytest.raises(ValueError, match="'action'"):
        DayOutcome.from_json({**outcome.to_json(), "action": None})
    with pytest.raises(ValueError, match="'archive'"):
        DayOutcome.from_json({**outcome.to_json(), "action": "archive"})
