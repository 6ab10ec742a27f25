"""What the Stream jobs pages show of one pipeline (:class:`JobView`), from its job files' typed records
(:mod:`streamjoin.core.job_files`), the owner's supervision policy and the input topics' end offsets.

:func:`job_view` is pure: the caller reads the files, the clock, the driver's liveness and Kafka; the page
(:mod:`streamjoin.airflow.status_page`) only renders the result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streamjoin.core.job_files import BatchCounts, DriverRecord, HistoryEntry, JobFailure, JobStatus, SupervisorRecord
from streamjoin.core.job_history import Point, Recent, breaks, recent, series
from streamjoin.core.supervision import Policy, State, assess, lag

#: a pipeline whose job never ran (no driver, no status)
NOT_STARTED = "not started"
#: alive, progressed, then none for the policy's ``stale_after`` while input waits: the owner restarts it
HUNG = "hung"
#: down for good until a redeploy: the job recorded a terminal failure, or the owner gave up (a crash loop)
FAILED = "failed"
#: states in which a batch may be running (the page then names it rather than "no batch")
RUNNING = ("healthy", "lagging", "starting", HUNG)
#: how far back the list's sparkline goes (seconds)
TREND_SECONDS = 3600.0


@dataclass(frozen=True)
class JobView:
    """One pipeline as the pages show it. ``state``: a :class:`~streamjoin.core.supervision.State` value,
    :data:`HUNG`, :data:`FAILED` or :data:`NOT_STARTED`; ``failure``: the error the driver's run recorded, or
    why the owner gave up; ``last_batch``: the last batch's counts, ``totals`` the query's."""

    pipeline: str
    state: str
    reason: str
    lag: Mapping[str, int]
    batch_id: int | None
    last_batch_time: str | None
    last_batch: BatchCounts
    duration_ms: int | None
    input_rps: float | None
    processed_rps: float | None
    totals: BatchCounts
    restarts: tuple[float, ...]
    gave_up_at: float | None
    failure: str | None
    recent: Recent
    recent_text: str
    in_progress: tuple[int, float] | None
    spark_ui: str | None
    alive: bool
    trend: tuple[Point, ...]
    trend_breaks: tuple[float, ...]
    quality: str | None = None
    quality_verdict: str | None = None
    #: the Data Docs of the check ``quality`` describes (a URL the page can open)
    quality_docs: str | None = None
    #: the pipeline's join stages in order, each in a few words (one for ``join:``, several for ``joins:``)
    stages: tuple[str, ...] = ()

    @property
    def total_lag(self) -> int:
        return sum(self.lag.values())

    @property
    def started(self) -> bool:
        return self.state != NOT_STARTED

    def to_json(self) -> dict[str, Any]:
        """The row of ``/api/jobs``."""
        return {
            "pipeline": self.pipeline, "state": self.state, "reason": self.reason, "failure": self.failure,
            "batch_id": self.batch_id, "last_batch_time": self.last_batch_time,
            "last_batch": self.last_batch.to_json(), "totals": self.totals.totals_json(),
            "input_rps": self.input_rps, "processed_rps": self.processed_rps, "duration_ms": self.duration_ms,
            "recent": {"seconds": self.recent.seconds, "batches": self.recent.batches, "records": self.recent.records,
                       "rows_per_second": self.recent.rows_per_second},
            "recent_text": self.recent_text,
            "in_progress": None if self.in_progress is None
            else {"batch_id": self.in_progress[0], "seconds": self.in_progress[1]},
            "lag": dict(self.lag), "restarts": len(self.restarts), "gave_up_at": self.gave_up_at,
            "quality": self.quality, "quality_verdict": self.quality_verdict, "quality_docs": self.quality_docs,
            "stages": list(self.stages),
        }  # fmt: skip


def run_failure(failure: JobFailure | None, driver: DriverRecord | None) -> JobFailure | None:
    """``failure`` if the driver launched last recorded it (not an earlier run)."""
    started = None if driver is None else driver.started_at
    return failure if failure is not None and started is not None and failure.at >= started else None


def job_view(
    pipeline: str,
    *,
    status: JobStatus | None,
    driver: DriverRecord | None,
    supervisor: SupervisorRecord,
    failure: JobFailure | None,
    history: Sequence[HistoryEntry],
    alive: bool,
    stopped: bool,
    latest: Mapping[str, Mapping[Any, int]],
    planned: tuple[int, float] | None,
    policy: Policy,
    now: float,
    quality: tuple[str, str, str | None] | None = None,
    stages: Sequence[str] = (),
) -> JobView:
    """The pipeline's view at ``now`` (epoch s).

    :param failure: the failure the job recorded last (its driver's run's, or an earlier one's)
    :param alive: the driver is running; ``stopped``: it was asked to stop
    :param latest: the input topics' end offsets (``{}``: Kafka did not answer, no lag known)
    :param planned: (batch id, when planned) of the batch planned and not committed yet, if any
    :param policy: the owner's policy (:attr:`SupervisorRecord.policy`), which judges health as the owner does
    :param quality: the last quality check's (text, verdict, Data Docs URL)
    :param stages: the join stages in a few words each (:func:`streamjoin.core.join_plan.stage_label`)
    """
    started = driver is not None or status is not None
    health = assess(
        alive=alive, stopped=stopped, status=status, started_at=driver.started_at if driver else None,
        lag_by_topic=lag(latest, status.end_offsets if status else {}), now=now, policy=policy,
    )  # fmt: skip
    cause = run_failure(failure, driver)
    state, reason = health.state.value, health.reason
    if not started:
        state, reason = NOT_STARTED, "the job was never started"
    elif not alive and supervisor.gave_up_at is not None:
        last = supervisor.last
        state, reason = FAILED, last.reason if last is not None and last.state == FAILED else "the owner gave up"
    elif not alive and not stopped and cause is not None and not cause.transient:
        state, reason = FAILED, f"stopped on an error a restart cannot fix: {cause.describe()}"
    elif health.state is State.STALE and health.committed and health.total_lag > 0:
        state, reason = HUNG, f"{health.reason} while {health.total_lag:,} records wait"
    if cause is not None:
        failed = cause.describe()
    elif state == FAILED:
        failed = reason
    else:
        failed = None
    lags = health.lag if started else {}  # a job that never ran is not behind anything yet
    activity = recent(history, now)
    running = state in RUNNING
    in_progress = None if planned is None or not running else (planned[0], max(0.0, now - planned[1]))
    hour = [e for e in history if now - e.t <= TREND_SECONDS]
    # no batch of this driver yet: the history's last batch is an earlier run's, not "idle: caught up"
    began = driver.started_at if driver is not None else None
    starting = max(0.0, now - began) if state == State.STARTING.value and began is not None else None
    return JobView(
        pipeline=pipeline, state=state, reason=reason, lag=lags,
        batch_id=status.batch_id if status else None, last_batch_time=status.last_batch_time if status else None,
        last_batch=status.counts if status else BatchCounts(), duration_ms=status.duration_ms if status else None,
        input_rps=status.input_rps if status else None, processed_rps=status.processed_rps if status else None,
        totals=status.totals if status else BatchCounts(), restarts=tuple(supervisor.restarts),
        gave_up_at=supervisor.gave_up_at, failure=failed, recent=activity,
        recent_text=activity.text(sum(lags.values()) if lags else None, running, in_progress, starting) if started
        else NOT_STARTED,
        in_progress=in_progress, spark_ui=status.spark_ui if status else None, alive=alive,
        trend=tuple(series(hour, "input_rps")), trend_breaks=tuple(breaks(hour)),
        quality=quality[0] if quality else None, quality_verdict=quality[1] if quality else None,
        quality_docs=quality[2] if quality else None, stages=tuple(stages),
    )  # fmt: skip
