"""Supervision decisions: health from a status record, consumer lag, restart budget in a window, and the
events the owner's trigger fires (:func:`watch_step`). Pure but for :func:`observe`, which reads the job files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any

from streamjoin.core.job_files import JobStatus, PipelineFiles


class State(StrEnum):
    HEALTHY = "healthy"
    STARTING = "starting"  # alive, no batch committed yet
    STALE = "stale"  # alive, but no progress record for too long
    LAGGING = "lagging"  # alive and progressing, lag above the threshold
    DEAD = "dead"
    STOPPED = "stopped"  # stopped on purpose (stop marker / stop operator)


@dataclass(frozen=True)
class Policy:
    """:param stale_after: seconds without a fresh status record before an alive job counts as stale
    :param lag_threshold: total lag (records) above which a job lags
    :param lag_grace: seconds lag may stay above the threshold before it alerts
    :param max_restarts: restarts allowed within ``window`` seconds; one more is a crash loop
    :param backoff: seconds before the second restart within the window (the first is at once), doubling for
        each further one, at most ``backoff_max``"""

    stale_after: float = 120.0
    lag_threshold: int = 10_000
    lag_grace: float = 300.0
    max_restarts: int = 3
    window: float = 900.0
    backoff: float = 10.0
    backoff_max: float = 300.0

    def to_json(self) -> dict[str, float]:
        return {f.name: float(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None, default: Policy | None = None) -> Policy:
        """The policy of ``data`` (a :class:`~streamjoin.core.job_files.SupervisorRecord`'s ``policy``):
        unknown fields ignored, missing ones ``default``'s."""
        base = default or cls()
        known = {f.name: type(getattr(base, f.name)) for f in fields(cls)}
        given = {k: known[k](v) for k, v in (data or {}).items() if k in known and isinstance(v, int | float)}
        return replace(base, **given)


def partition_lag(
    latest: Mapping[str, Mapping[Any, int]], committed: Mapping[str, Mapping[str, int]]
) -> dict[tuple[str, int], int]:
    """Per topic-partition: latest offset minus the job's committed end offset (a partition the job has not
    committed yet counts from offset 0)."""
    return {
        (topic, int(p)): max(0, int(end) - int(committed.get(topic, {}).get(str(p), 0)))
        for topic, parts in latest.items()
        for p, end in parts.items()
    }


def lag(latest: Mapping[str, Mapping[Any, int]], committed: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """Per topic: the sum of its partitions' :func:`partition_lag`."""
    out: dict[str, int] = {topic: 0 for topic in latest}
    for (topic, _), n in partition_lag(latest, committed).items():
        out[topic] += n
    return out


@dataclass(frozen=True)
class Health:
    state: State
    reason: str
    lag: dict[str, int] = field(default_factory=dict)
    #: this run of the driver has committed a batch (a slow start is not a hang)
    committed: bool = True

    @property
    def total_lag(self) -> int:
        return sum(self.lag.values())


def assess(
    *,
    alive: bool,
    stopped: bool,
    status: JobStatus | None,
    started_at: float | None,
    lag_by_topic: Mapping[str, int],
    now: float,
    policy: Policy,
) -> Health:
    """The job's health from liveness, its status record and its lag."""
    lags = dict(lag_by_topic)
    if not alive:
        return Health(State.STOPPED if stopped else State.DEAD, "stopped on purpose" if stopped else "no driver", lags)
    written = status.written_at if status is not None else None
    if written is not None and started_at is not None and written < started_at:
        written = None  # a record of an earlier run
    if written is None:
        since = now - (started_at or now)
        if since > policy.stale_after:
            return Health(State.STALE, f"no batch committed {since:.0f}s after start", lags, committed=False)
        return Health(State.STARTING, "no batch committed yet", lags, committed=False)
    age = now - written
    if age > policy.stale_after:
        return Health(State.STALE, f"last progress {age:.0f}s ago", lags)
    total = sum(lags.values())
    if total > policy.lag_threshold:
        return Health(State.LAGGING, f"lag {total} > {policy.lag_threshold}", lags)
    return Health(State.HEALTHY, f"batch {status.batch_id if status else '?'}, lag {total}", lags)


def restarts_in_window(restarts: Sequence[float], now: float, window: float) -> list[float]:
    return [t for t in restarts if now - t <= window]


def may_restart(restarts: Sequence[float], now: float, policy: Policy) -> bool:
    """Crash-loop protection: at most ``max_restarts`` restarts within the window."""
    return len(restarts_in_window(restarts, now, policy.window)) < policy.max_restarts


def restart_delay(restarts: Sequence[float], now: float, policy: Policy) -> float:
    """Seconds to wait before restarting a driver that died on a transient error: none for the first death in
    the window, then ``backoff`` doubling with each restart already in it (exponential backoff)."""
    recent = len(restarts_in_window(restarts, now, policy.window))
    return 0.0 if recent == 0 else min(policy.backoff * 2 ** (recent - 1), policy.backoff_max)


def lag_alert_due(lagging_since: float | None, now: float, policy: Policy) -> bool:
    return lagging_since is not None and now - lagging_since >= policy.lag_grace


def observe(
    files: PipelineFiles, latest: Mapping[str, Mapping[Any, int]], now: float, policy: Policy, *,
    alive: bool | None = None,
) -> Health:  # fmt: skip
    """The job's health from its files and the input topics' latest offsets (``{}`` when Kafka is not
    answering: no lag is known then). ``alive``: whether the driver runs, as its cluster manager says
    (:func:`streamjoin.airflow.lifecycle.driver_alive`); None: a local driver's pid says."""
    status, driver = files.status(), files.driver()
    return assess(
        alive=files.driver_alive() if alive is None else alive, stopped=files.stopped_on_purpose(), status=status,
        started_at=driver.started_at if driver else None,
        lag_by_topic=lag(latest, status.end_offsets if status else {}), now=now, policy=policy,
    )  # fmt: skip


class Event(StrEnum):
    """What the owner's trigger reports (then the owning task acts)."""

    DEAD = "dead"  # the driver is gone and nobody asked it to stop: restart within the budget, else alert
    STOPPED = "stopped"  # it stopped because it was asked to: leave it stopped
    REDEPLOY = "redeploy"  # stopped for a redeploy: start the current code again
    LAGGING = "lagging"  # lag above the threshold for longer than the grace period: alert
    HUNG = "hung"  # alive, progressed, then none for ``stale_after`` while input waits: stop, restart, alert
    WATCHED = "watched"  # the watch period ended without any of the above


def watch_step(
    health: Health,
    intent: str,
    *,
    waiting: bool,
    lagging_since: float | None,
    now: float,
    watch_until: float,
    policy: Policy,
    restart_after: float | None = None,
) -> tuple[Event | None, float | None]:
    """One poll of the owner's trigger: (the event to fire, or None to keep watching; since when lag is
    above the threshold).

    :param intent: ``run``, ``stop`` or ``redeploy`` (:meth:`PipelineFiles.intent`)
    :param waiting: the job is meant to be down (stopped on purpose, or given up after a crash loop): only a
        redeploy request or the end of the watch fire then
    :param restart_after: a dead driver's restart is backing off until then (epoch s): DEAD fires after it
    """
    alive = health.state not in (State.DEAD, State.STOPPED)
    if not alive and intent == "redeploy":
        return Event.REDEPLOY, None
    if waiting or not alive:
        if waiting:
            return (Event.WATCHED if now >= watch_until else None), None
        if intent == "stop" or health.state is State.STOPPED:
            return Event.STOPPED, None
        return (Event.DEAD if restart_after is None or now >= restart_after else None), None
    if health.state is State.STALE and health.committed and health.total_lag > 0:
        return Event.HUNG, None
    since = (lagging_since or now) if health.state is State.LAGGING else None
    if lag_alert_due(since, now, policy):
        return Event.LAGGING, since
    return (Event.WATCHED if now >= watch_until else None), since
