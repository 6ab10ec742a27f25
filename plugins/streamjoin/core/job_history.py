"""What the status page shows of a job's history (:class:`~streamjoin.core.job_files.HistoryEntry`): series
to plot, the job's starts, and the recent rate. Pure: no Airflow, no Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from streamjoin.core.job_files import HistoryEntry

#: the window of the recent rate (seconds)
RECENT_WINDOW = 300.0
#: a running job writes an entry at least a minute after the previous one (a batch's, or an idle one:
#: spark.heartbeat.HISTORY_IDLE_EVERY); a longer silence than this, beyond the batch's own duration, is a
#: period without a job, which the charts do not draw a line across
QUIET_GAP = 150.0

Point = tuple[float, float]


def series(entries: Sequence[HistoryEntry], field: str, scale: float = 1.0) -> list[Point]:
    """``(t, value * scale)`` of every entry with a number in ``field``, in time order."""
    points = []
    for entry in entries:
        value = entry.value(field)
        if value is not None:
            points.append((entry.t, value * scale))
    return sorted(points)


def job_starts(entries: Sequence[HistoryEntry]) -> list[float]:
    """When a new run of the job (a start, restart or redeploy: a new ``run_id``) wrote its first entry,
    the first run excluded."""
    starts, previous = [], None
    for entry in entries:
        run = entry.run_id
        if run is not None and previous is not None and run != previous:
            starts.append(entry.t)
        previous = run if run is not None else previous
    return starts


def breaks(entries: Sequence[HistoryEntry]) -> list[float]:
    """When the job wrote again after a period with no job: a new run (``run_id``), or a silence longer
    than :data:`QUIET_GAP` plus the batch's own duration."""
    out: list[float] = []
    previous: HistoryEntry | None = None
    for entry in sorted(entries, key=lambda e: e.t):
        t = entry.t
        if previous is not None:
            run, before = entry.run_id, previous.run_id
            silence = t - previous.t - (entry.duration_ms or 0) / 1000
            if (run is not None and before is not None and run != before) or silence > QUIET_GAP:
                out.append(t)
        previous = entry
    return out


@dataclass(frozen=True)
class Recent:
    """The batches of the last ``seconds`` before now: how many, the records they read, since when idle."""

    batches: int
    records: int
    seconds: float
    last_batch_age: float | None

    @property
    def rows_per_second(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    def text(
        self, lag: int | None, running: bool = True, in_progress: tuple[int, float] | None = None,
        starting: float | None = None,
    ) -> str:  # fmt: skip
        """For a person: the rate over the window; without a batch in it, the batch in progress
        (``(batch id, seconds it has run)``) if there is one, that the job is starting (``starting``: seconds since
        its driver started, no batch committed since: the last batch, if any, is an earlier run's), ``idle`` if
        the job runs and nothing waits (``lag`` 0; None: unknown), else how long since the last batch."""
        minutes = f"{self.seconds / 60:g} min"
        if starting is not None and in_progress is None:
            before = "" if self.last_batch_age is None else f" (last batch {_age(self.last_batch_age)} ago, before it)"
            return f"starting: no batch since the job started {_age(starting)} ago{before}"
        if self.batches:
            return (f"{self.rows_per_second:,.1f} rows/s over the last {minutes} "
                    f"({self.records:,} rows, {self.batches} batch{'es' if self.batches != 1 else ''})")  # fmt: skip
        since = "" if self.last_batch_age is None else f", last batch {_age(self.last_batch_age)} ago"
        if running and in_progress is not None:
            batch_id, seconds = in_progress
            return f"batch {batch_id} running for {_age(seconds)}{since}"
        if running and lag == 0:
            return f"idle: caught up{since}"
        waiting = f" with {lag:,} records waiting" if lag else ""
        return f"no batch in the last {minutes}{waiting}{since}"


def recent(entries: Sequence[HistoryEntry], now: float, window: float = RECENT_WINDOW) -> Recent:
    """The batches (entries with a ``batch_id``) of the last ``window`` seconds before ``now``."""
    batches = [e for e in entries if e.batch_id is not None]
    inside = [e for e in batches if now - e.t <= window]
    last = max((e.t for e in batches), default=None)
    return Recent(
        batches=len(inside), records=sum(e.input_records for e in inside), seconds=window,
        last_batch_age=None if last is None else max(0.0, now - last),
    )  # fmt: skip


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
