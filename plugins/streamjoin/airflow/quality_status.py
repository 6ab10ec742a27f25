"""What the status pages say about a pipeline's quality checks: the verdict of the day partition that changed
last (written or checked), never an older day's while a newer one is unchecked. Stdlib only (file times and
the JSON files the check writes: :mod:`streamjoin.quality.results`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from streamjoin.core.backfill import DAILY_DIR
from streamjoin.quality.results import QUARANTINE_FILE, RESULT_FILE, CheckResult, read_check_result

#: a published day partition (staging and temporary folders beside it have other names)
DAY_PARTITION = re.compile(r"^date=(\d{4}-\d{2}-\d{2})$")


@dataclass(frozen=True)
class QualityStatus:
    """The quality of the day partition that changed last."""

    day: str
    #: ``passed``, ``FAILED`` or ``not checked``
    verdict: str
    text: str
    quarantined: bool
    #: the check shown (None: the day was never checked); when the data changed after it, it is the
    #: check of the data before
    result: CheckResult | None

    @property
    def failed(self) -> bool:
        return self.verdict == "FAILED"


def _data_time(partition: Path) -> float:
    """When the day's data was written: its newest data file (not ``_``/``.`` files such as the check's);
    0 without any."""
    times = [p.stat().st_mtime for p in partition.iterdir() if p.is_file() and not p.name.startswith(("_", "."))]
    return max(times, default=0.0)


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _one(partition: Path, day: str) -> tuple[float, QualityStatus]:
    """(when the partition last changed, its status)."""
    written = _data_time(partition)
    result_file, quarantined = partition / RESULT_FILE, (partition / QUARANTINE_FILE).exists()
    result = read_check_result(partition) if result_file.exists() else None
    checked = result_file.stat().st_mtime if result is not None else None
    # the check's own files are written after the data they checked; data newer than the check: not checked
    if result is None or checked is None or written > checked:
        text = f"{day}: not checked since its data was written at {_when(written)}" if written else f"{day}: empty"
        if result is not None:
            text += f" (the check before: {'passed' if result.success else 'FAILED'})"
        if quarantined:
            text += "; quarantined"
        return written, QualityStatus(day, "not checked", text, quarantined, result)
    text = result.summary()
    if quarantined:
        text += "; quarantined"
    return checked, QualityStatus(day, "passed" if result.success else "FAILED", text, quarantined, result)


def quality_status(output_path: str | Path) -> QualityStatus | None:
    """The status of the published day (``<output_path>/daily/date=YYYY-MM-DD``) that was written or checked
    last; None without any."""
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
    return max(found, key=lambda f: (f[0], f[1]))[2] if found else None
