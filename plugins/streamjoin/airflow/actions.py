"""The status page's actions, which go through Airflow: each creates a DAG run of an existing DAG.

* ``stop`` / ``redeploy``: ``streamjoin_stop_redeploy`` with ``{"pipeline": p, "redeploy": false|true}``;
* ``reprocess``: ``streamjoin_reprocess`` with ``{"pipeline": p, "start": first, "end": last, "overwrite": true,
  "dry_run": false}`` (past days, UTC; with ``"force": true, "reason": why`` to publish over a failed check).

A reprocess request is checked across its fields before any run exists (:func:`action_request`: both days
over, the last not before the first, a reason with ``force``), and refused while a run reprocesses any of its
days (:func:`reprocess_busy`: "already running: run X"): a user's mistake is answered on the page and never
becomes a failed run that alerts the team.

A user needs Airflow's permission to trigger that DAG (``POST`` on its runs, as ``POST /api/v2/dags/{id}/dagRuns``
checks it); the run is created as the API creates it (``trigger_dag``: params validated against the DAG's,
``triggering_user_name`` set). Browser forms carry :func:`csrf_token` of the session cookie.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import date
from typing import Any

from streamjoin.core.backfill import BackfillError, days_in, parse_day, validate_request
from streamjoin.core.plans import REPROCESS_DAG, STOP_REDEPLOY_DAG

#: action -> the DAG whose run it creates
ACTION_DAGS = {"stop": STOP_REDEPLOY_DAG, "redeploy": STOP_REDEPLOY_DAG, "reprocess": REPROCESS_DAG}
ACTIONS = tuple(ACTION_DAGS)


#: at most this many days in one reprocess request from the page (each is a Spark run and a check)
MAX_PAGE_DAYS = 31


class ActionError(ValueError):
    """A request the page refuses before anything is triggered (HTTP 400)."""

    status = 400


class ActionBusy(ActionError):
    """A run is reprocessing one of the days already (HTTP 409): the page names it."""

    status = 409


@dataclass(frozen=True)
class ActionRequest:
    """What to trigger: the DAG and the run's conf."""

    action: str
    dag_id: str
    conf: dict[str, Any]

    @property
    def note(self) -> str:
        """The run's note in Airflow's UI: what it does to which pipeline, which days, from where."""
        from streamjoin.airflow.run_notes import run_note

        return f"{run_note(self.dag_id, None, self.conf) or self.action}; from the Stream jobs page"


def action_request(
    action: str, pipeline: str, day: str | None, today: date, *, end: str | None = None, force: bool = False,
    reason: str | None = None,
) -> ActionRequest:  # fmt: skip
    """The DAG run an action asks for. Reprocess: the days ``day`` (the first) to ``end`` (the last, default
    ``day``), ``YYYY-MM-DD``, all over (before ``today``, UTC), at most :data:`MAX_PAGE_DAYS`; ``force`` needs a
    ``reason``.

    :raises ActionError: unknown action, a missing or bad day, a reversed or future range, force without reason
    """
    if action not in ACTION_DAGS:
        raise ActionError(f"unknown action; expected one of {', '.join(ACTIONS)}")
    if action != "reprocess":
        return ActionRequest(action, STOP_REDEPLOY_DAG, {"pipeline": pipeline, "redeploy": action == "redeploy"})
    try:
        first = parse_day(day or "", "start")
        last = parse_day(end, "end") if end else first
        days = validate_request(pipeline, first, last, pipelines=[pipeline], today=today, max_days=MAX_PAGE_DAYS)
    except BackfillError as exc:
        raise ActionError(str(exc)) from None
    why = (reason or "").strip()
    if force and not why:
        raise ActionError("force publishes days over a failed check: say why in 'reason' (it is recorded)")
    conf: dict[str, Any] = {"pipeline": pipeline, "start": days[0].isoformat(), "end": days[-1].isoformat(),
                            "overwrite": True, "dry_run": False}  # fmt: skip
    if force:
        conf.update(force=True, reason=why)
    return ActionRequest(action, REPROCESS_DAG, conf)


def requested_days(conf: dict[str, Any]) -> list[date]:
    """The days a reprocess run's conf names (none if it names no valid range)."""
    try:
        return days_in(parse_day(conf.get("start") or "", "start"), parse_day(conf.get("end") or "", "end"))
    except BackfillError:
        return []


def reprocess_busy(request: ActionRequest, locks: dict[date, dict[str, Any] | None]) -> None:
    """Refuse a reprocess request while a queued or running run reprocesses any of its days: a run of the
    reprocess DAG whose range covers one (a double click, a second user), or the run holding a day's lock (the
    daily backfill). Reads Airflow's metadata DB (the api-server's).

    :param locks: per day of the request, the holder of its lock (``DayLock.holder``), if any
    :raises ActionBusy: "already running: run X", naming the DAG and the days
    """
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState
    from sqlalchemy import select

    wanted = set(requested_days(request.conf))
    pipeline = request.conf["pipeline"]
    active = (DagRunState.QUEUED, DagRunState.RUNNING)
    with create_session() as session:
        query = select(DagRun.run_id, DagRun.conf).where(DagRun.dag_id == REPROCESS_DAG, DagRun.state.in_(active))
        for run_id, conf in session.execute(query):
            conf = conf or {}
            clash = sorted(wanted & set(requested_days(conf))) if conf.get("pipeline") == pipeline else []
            if clash:
                raise ActionBusy(f"already running: run {run_id} of {REPROCESS_DAG} reprocesses {pipeline} "
                                 f"{', '.join(d.isoformat() for d in clash)}; wait for it to end")  # fmt: skip
        for day, holder in sorted(locks.items()):
            if not holder or day not in wanted:
                continue
            state = session.scalar(select(DagRun.state).where(
                DagRun.dag_id == str(holder.get("dag_id")), DagRun.run_id == str(holder.get("run_id"))))  # fmt: skip
            if state in active:
                raise ActionBusy(f"already running: run {holder.get('run_id')} of {holder.get('dag_id')} reprocesses "
                                 f"{pipeline} {day}; wait for it to end")  # fmt: skip


def csrf_token(session_token: str) -> str:
    """The token a page's forms carry for the session whose JWT cookie is ``session_token``: another site
    cannot read the cookie, so it cannot compute it."""
    return hmac.new(session_token.encode(), b"streamjoin-status-page-actions", hashlib.sha256).hexdigest()


def may_trigger(user: Any, dag_id: str) -> bool:
    """May ``user`` create runs of ``dag_id`` (Airflow's auth manager decides, teams included)?"""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
    from airflow.models.dag import DagModel

    details = DagDetails(id=dag_id, team_name=DagModel.get_team_name(dag_id))
    return get_auth_manager().is_authorized_dag(
        method="POST", access_entity=DagAccessEntity.RUN, details=details, user=user
    )


@dataclass(frozen=True)
class Triggered:
    """The run an action created."""

    dag_id: str
    run_id: str
    paused: bool


def trigger(request: ActionRequest, user_name: str) -> Triggered:
    """Create the DAG run (queued; it runs once the scheduler picks it up, when the DAG is not paused).

    :raises ActionError: the DAG is not in Airflow's DB or refuses the conf
    """
    from airflow.api.common.trigger_dag import trigger_dag
    from airflow.exceptions import DagNotFound
    from airflow.models.dag import DagModel
    from airflow.utils.types import DagRunTriggeredByType

    try:
        run = trigger_dag(
            request.dag_id, triggered_by=DagRunTriggeredByType.UI, triggering_user_name=user_name,
            conf=request.conf, note=request.note,
        )  # fmt: skip
    except DagNotFound:
        raise ActionError(f"DAG {request.dag_id} is not in Airflow (has the dag-processor parsed it?)") from None
    except ValueError as exc:  # ParamValidationError included
        raise ActionError(f"DAG {request.dag_id} refused the request: {str(exc)[:300]}") from None
    if run is None:
        raise ActionError(f"DAG {request.dag_id} created no run")
    model = DagModel.get_dagmodel(request.dag_id)
    return Triggered(request.dag_id, str(run.run_id), bool(model and model.is_paused))
