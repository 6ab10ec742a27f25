"""Publishing a reprocessed day: staged beside the published tree, swapped in only when allowed.

Layout under an output's ``<files.path>/daily/`` (names starting with ``_`` or ``.`` are skipped by Spark
and Parquet readers):

* ``date=D/``: the published day (with ``_CHECK_RESULT.json``; ``_QUARANTINED`` when the first computation
  of the day failed its check and nothing better was ever published; ``_FORCED.json`` when someone
  published it over a failed check with ``force``);
* ``_staging/date=D/``: a reprocessed day waiting for its check (``jobs/reprocess_day.py --stage``);
* ``_staging/date=D.lock``: which run is reprocessing the day (one at a time);
* ``_staging/date=D.outcome.json``: what the reprocessing application did to the day (:class:`DayOutcome`),
  read by the Airflow task that reports it;
* ``.date=D.new-*`` / ``.date=D.old-*``: a swap in progress (a killed run's are tidied by :func:`recover`).

:func:`decide` says what a check's verdict does to the day; :func:`swap_in` does it with renames, so a
reader sees the old day or the new one, never a mix. Stdlib and :class:`~streamjoin.core.storage.Storage`
only: the Spark job and the Airflow worker both use it.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime
from enum import StrEnum
from typing import Any

from streamjoin.core.backfill import DAILY_DIR
from streamjoin.core.storage import Storage, join

STAGING_DIR = "_staging"
FORCED_FILE = "_FORCED.json"
#: test knob: seconds to wait between writing the new day aside and swapping it in (to kill a run there)
PAUSE_ENV = "STREAMJOIN_REPROCESS_PAUSE_BEFORE_SWAP"


def staged_location(files_location: str, day: date) -> str:
    """Where a reprocessed day waits for its check: ``<files.path>/daily/_staging/date=D``."""
    return join(files_location, DAILY_DIR, STAGING_DIR, f"date={day.isoformat()}")


def lock_location(files_location: str, day: date) -> str:
    return staged_location(files_location, day) + ".lock"


def outcome_location(files_location: str, day: date) -> str:
    """Where the reprocessing application records what it did to the day (:class:`DayOutcome`)."""
    return staged_location(files_location, day) + ".outcome.json"


# ----------------------------------------------------------------------------------------------- verdict


class Action(StrEnum):
    PUBLISH = "publish"  # the check passed: swap the staged day in
    FORCE = "force"  # the check failed, ``force`` given: swap it in anyway, recorded in _FORCED.json
    QUARANTINE = "quarantine"  # the check failed and nothing is published: the staged day goes in, quarantined
    KEEP = "keep"  # the check failed: the published (or quarantined) day stays, the staged one is dropped


def decide(passed: bool, *, force: bool, published_exists: bool) -> Action:
    """What a check's verdict does to the day (see the module docstring)."""
    if passed:
        return Action.PUBLISH
    if force:
        return Action.FORCE
    return Action.KEEP if published_exists else Action.QUARANTINE


@dataclass(frozen=True)
class ForcedRecord:
    """Who published a day over a failed check, when, what had failed and why (``reason``: what the user gave
    with ``force``, if anything)."""

    day: str
    dag_id: str
    run_id: str
    user: str | None
    failed: list[str]
    summary: str
    at: str
    reason: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


@dataclass(frozen=True)
class DayOutcome:
    """What one reprocessing application did to a checked day, for the Airflow task that reports it
    (``_staging/date=D.outcome.json``): the :class:`Action` its check decided, where the day is (``path``, the
    published partition), what became of it in words (``consequence``: alerts and logs say it), the check
    (a :class:`~streamjoin.quality.results.CheckResult` as its dict), ``_FORCED.json``'s path when forced, and
    which run made it (``dag_id``, ``run_id``: a reader ignores another run's). Counts as the job's
    ``streamjoin reprocess`` line; ``seconds``: compute and stage, ``check_seconds``: check and publish."""

    pipeline: str
    day: str
    action: str
    path: str
    consequence: str
    check: dict[str, Any] | None = None
    forced_file: str | None = None
    dag_id: str | None = None
    run_id: str | None = None
    left_records: int | None = None
    input_rows: int = 0
    results: int = 0
    dead_letters: int = 0
    seconds: float = 0.0
    check_seconds: float = 0.0

    @property
    def published(self) -> bool:
        """Consumers get the new day (passed, or forced over a failed check)."""
        return self.action in (Action.PUBLISH, Action.FORCE)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> DayOutcome:
        """:raises ValueError: not an outcome (names the missing fields)"""
        needed = ("pipeline", "day", "action", "path", "consequence")
        missing = [n for n in needed if not isinstance(data, dict) or data.get(n) is None]
        if missing:
            raise ValueError(f"not a day outcome record: {missing} missing in {str(data)[:300]}")
        Action(data["action"])  # an unknown action is an error, not a silent success
        known = {f: data[f] for f in cls.__dataclass_fields__ if f in data}
        return cls(**known)


def write_outcome(storage: Storage, location: str, outcome: DayOutcome) -> None:
    storage.write_text(location, json.dumps(outcome.to_json(), indent=2, default=str))


def read_outcome(storage: Storage, location: str) -> DayOutcome | None:
    """The recorded outcome; None without one."""
    text = storage.read_text(location)
    return None if text is None else DayOutcome.from_json(json.loads(text))


def record_forced(storage: Storage, partition: str, record: ForcedRecord) -> str:
    path = join(partition, FORCED_FILE)
    storage.write_text(path, record.to_json())
    return path


def read_forced(storage: Storage, partition: str) -> dict[str, Any] | None:
    text = storage.read_text(join(partition, FORCED_FILE))
    return None if text is None else json.loads(text)


# -------------------------------------------------------------------------------------------- the swap


def _parent(target: str) -> str:
    return target.rstrip("/").rsplit("/", 1)[0]


def _beside(target: str, name: str) -> str:
    return join(_parent(target), name)


def _name(target: str) -> str:
    return target.rstrip("/").rsplit("/", 1)[-1]


def staging_path(storage: Storage, target: str) -> str:
    """A fresh hidden directory beside ``target`` for its new content (after cleaning up a killed run's)."""
    recover(storage, target)
    return _beside(target, f".{_name(target)}.new-{uuid.uuid4().hex[:8]}")


def swap_in(storage: Storage, staging: str, target: str) -> None:
    """Rename the old directory aside, the staged one in, then delete the old one. A killed run leaves
    either the old or the new one under the target's name (:func:`recover` tidies up). ``staging`` may
    live elsewhere on the same filesystem (``_staging/date=D`` moving to ``date=D``)."""
    pause = float(os.environ.get(PAUSE_ENV, "0") or 0)
    if pause:
        print(f"streamjoin reprocess staged {staging}; swapping in {pause}s", flush=True)
        time.sleep(pause)
    storage.mkdirs(_parent(target))  # (not recover(): the staging directory may be a sibling it would drop)
    old = _beside(target, f".{_name(target)}.old-{uuid.uuid4().hex[:8]}")
    if storage.exists(target):
        storage.rename(target, old)
    if storage.exists(staging):  # (a day without any result has nothing staged)
        storage.rename(staging, target)
    storage.delete(old)


def recover(storage: Storage, target: str) -> None:
    """Undo what a killed run left: drop staged directories; if the partition was renamed aside but the
    new one never swapped in, put the old one back."""
    parent, name = _parent(target), _name(target)
    siblings = storage.children(parent)
    if not siblings:
        storage.mkdirs(parent)
        return
    for staged in siblings:
        if staged.startswith(f".{name}.new-"):
            storage.delete(join(parent, staged))
    for old in sorted(s for s in siblings if s.startswith(f".{name}.old-")):
        if not storage.exists(target):
            storage.rename(join(parent, old), target)
        else:
            storage.delete(join(parent, old))


# -------------------------------------------------------------------------------------------- the lock


class DayBusy(RuntimeError):
    """Another run is reprocessing the same pipeline-day."""

    def __init__(self, pipeline: str, day: date, holder: dict[str, Any]) -> None:
        self.pipeline, self.day, self.holder = pipeline, day, holder
        super().__init__(
            f"{pipeline} {day} is being reprocessed by run {holder.get('run_id')!r} of DAG {holder.get('dag_id')!r} "
            f"(since {holder.get('since')}): one reprocess per pipeline and day at a time; wait for that run to "
            "finish, then trigger again"
        )


@dataclass(frozen=True)
class DayLock:
    """One reprocess of a pipeline-day at a time: a file created only if absent (``Storage.create_new``),
    naming the run that holds it. A lock whose run is over (``is_active`` says so) is taken over."""

    storage: Storage
    path: str
    pipeline: str
    day: date

    def holder(self) -> dict[str, Any] | None:
        text = self.storage.read_text(self.path)
        return None if text is None else json.loads(text)

    def acquire(self, dag_id: str, run_id: str, is_active: Callable[[str, str], bool]) -> None:
        """Take the lock for the run (again, if it already holds it: a retry).

        :param is_active: ``(dag_id, run_id) -> bool``: is that run still queued or running?
        :raises DayBusy: another active run holds it
        """
        mine = {"dag_id": dag_id, "run_id": run_id, "since": datetime.now(UTC).isoformat(timespec="seconds")}
        for _ in range(3):
            if self.storage.create_new(self.path, json.dumps(mine)):
                return
            holder = self.holder()
            if holder is None:
                continue  # released meanwhile
            same = (holder.get("dag_id"), holder.get("run_id")) == (dag_id, run_id)
            if not same and is_active(str(holder.get("dag_id")), str(holder.get("run_id"))):
                raise DayBusy(self.pipeline, self.day, holder)
            self.storage.delete(self.path)  # ours from an earlier try, or its run is over
        raise DayBusy(self.pipeline, self.day, self.holder() or {})

    def release(self, dag_id: str, run_id: str) -> None:
        """Drop the lock if that run holds it."""
        holder = self.holder()
        if holder is not None and (holder.get("dag_id"), holder.get("run_id")) == (dag_id, run_id):
            self.storage.delete(self.path)
