"""What the status pages say about a pipeline's quality checks: each published day's latest check, whatever it
decided, the day that changed last (written or checked) first, never an older day's verdict while a newer one
is unchecked. Stdlib only (file times and the JSON files the check and the publishing write:
:mod:`streamjoin.quality.results`, :mod:`streamjoin.core.publish`).

A day's latest check is one of:

* passed (the day is published);
* FAILED, the day quarantined (its first version failed: nothing of it is published);
* FAILED, a recomputation of a published day: dropped, the day keeps the version of an earlier run
  (``_FAILED_RECHECK.json`` beside its ``_CHECK_RESULT.json``);
* published with force over its failed check, by whom and why (``_FORCED.json``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from streamjoin.core.backfill import DAILY_DIR
from streamjoin.core.publish import FORCED_FILE
from streamjoin.quality.results import QUARANTINE_FILE, RECHECK_FILE, RESULT_FILE, CheckResult

#: a published day partition (staging and temporary folders beside it have other names)
DAY_PARTITION = re.compile(r"^date=(\d{4}-\d{2}-\d{2})$")

PASSED = "passed"
FAILED = "FAILED"
FORCED = "published with force"
NOT_CHECKED = "not checked"


@dataclass(frozen=True)
class QualityStatus:
    """The latest check of one published day."""

    day: str
    #: :data:`PASSED`, :data:`FAILED`, :data:`FORCED` or :data:`NOT_CHECKED`
    verdict: str
    text: str
    quarantined: bool
    #: the check shown, whose Data Docs the pages link (None: the day was never checked); when the data
    #: changed after it, the check of the data before
    result: CheckResult | None
    #: a failed recomputation's check: the run whose version of the day stays published
    published_from: str | None = None
    #: ``_FORCED.json``: who published the day over its failed check, in which run, why
    forced: dict[str, Any] | None = None

    @property
    def failed(self) -> bool:
        return self.verdict == FAILED


def _data_time(partition: Path) -> float:
    """When the day's data was written: its newest data file (not ``_``/``.`` files such as the check's);
    0 without any."""
    times = [p.stat().st_mtime for p in partition.iterdir() if p.is_file() and not p.name.startswith(("_", "."))]
    return max(times, default=0.0)


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _read(path: Path) -> tuple[float, CheckResult] | None:
    """(when it was written, the check) of a check file; None without one."""
    if not path.exists():
        return None
    return path.stat().st_mtime, CheckResult.from_dict(json.loads(path.read_text()))


def _forced_text(result: CheckResult, forced: dict[str, Any]) -> str:
    who = forced.get("user") or "an unknown user"
    text = f"{result.summary()}; published with force over the failed check by {who} (run {forced.get('run_id')})"
    reason = str(forced.get("reason") or "").strip()
    return text + (f": {reason}" if reason else "; no reason given")


def _one(partition: Path, day: str) -> tuple[float, QualityStatus]:
    """(when the partition last changed, its status)."""
    written = _data_time(partition)
    quarantined = (partition / QUARANTINE_FILE).exists()
    found = _read(partition / RESULT_FILE)
    checked, result = found if found is not None else (None, None)
    forced_file = partition / FORCED_FILE
    forced = json.loads(forced_file.read_text()) if forced_file.exists() else None
    # the check's own files are written after the data they checked; data newer than the check: not checked
    if result is None or checked is None or written > checked:
        text = f"{day}: not checked since its data was written at {_when(written)}" if written else f"{day}: empty"
        if result is not None:
            text += f" (the check before: {'passed' if result.success else 'FAILED'})"
        if quarantined:
            text += "; quarantined"
        return written, QualityStatus(day, NOT_CHECKED, text, quarantined, result, forced=forced)
    recheck = _read(partition / RECHECK_FILE)
    if recheck is not None and recheck[0] >= checked:
        again = recheck[1]
        version = f"run {result.dag_run_id}" + (", published with force" if forced else "")
        text = f"{again.summary()}; not published: the published version is from {version}"
        return recheck[0], QualityStatus(day, FAILED, text, quarantined, again, result.dag_run_id, forced)
    if forced is not None and not result.success:
        return checked, QualityStatus(day, FORCED, _forced_text(result, forced), quarantined, result, forced=forced)
    text = result.summary()
    if quarantined:
        text += "; quarantined: nothing of the day is published"
    return checked, QualityStatus(day, PASSED if result.success else FAILED, text, quarantined, result, forced=forced)


def quality_days(output_path: str | Path, limit: int | None = None) -> list[QualityStatus]:
    """Each published day's (``<output_path>/daily/date=YYYY-MM-DD``) latest check, the day written or checked
    last first; at most ``limit``."""
    found: list[tuple[float, str, QualityStatus]] = []
    daily = Path(output_path) / DAILY_DIR
    for partition in daily.iterdir() if daily.is_dir() else ():
        match = DAY_PARTITION.match(partition.name)
        if match is None or not partition.is_dir():
            continue
        try:
            changed, status = _one(partition, match.group(1))
        except (OSError, ValueError):  # replaced while read (a swap in progress): the next refresh sees it
            continue
        found.append((changed, status.day, status))
    ordered = [status for _, _, status in sorted(found, key=lambda f: (f[0], f[1]), reverse=True)]
    return ordered if limit is None else ordered[:limit]


def quality_status(output_path: str | Path) -> QualityStatus | None:
    """The status of the published day that was written or checked last; None without any."""
    days = quality_days(output_path, 1)
    return days[0] if days else None

