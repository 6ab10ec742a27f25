"""The status page's actions, which go through Airflow: each creates a DAG run of an existing DAG.

* ``stop`` / ``redeploy``: ``streamjoin_stop_redeploy`` with ``{"pipeline": p, "redeploy": false|true}``;
* ``reprocess``: ``streamjoin_reprocess`` with ``{"pipeline": p, "start": day, "end": day, "overwrite": true,
  "dry_run": false}`` (one past day, UTC).

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

from streamjoin.core.backfill import BackfillError, parse_day

STOP_REDEPLOY_DAG = "streamjoin_stop_redeploy"  # dags/streamjoin_stop_redeploy.py
REPROCESS_DAG = "streamjoin_reprocess"  # dags/streamjoin_reprocess.py
#: action -> the DAG whose run it creates
ACTION_DAGS = {"stop": STOP_REDEPLOY_DAG, "redeploy": STOP_REDEPLOY_DAG, "reprocess": REPROCESS_DAG}
ACTIONS = tuple(ACTION_DAGS)


class ActionError(ValueError):
    """A request the page refuses before anything is triggered (HTTP 400)."""


@dataclass(frozen=True)
class ActionRequest:
    """What to trigger: the DAG and the run's conf."""

    action: str
    dag_id: str
    conf: dict[str, Any]


def action_request(action: str, pipeline: str, day: str | None, today: date) -> ActionRequest:
    """The DAG run an action asks for; a reprocessed day must be ``YYYY-MM-DD`` and over (before ``today``).

    :raises ActionError: unknown action, missing or bad day
    """
    if action not in ACTION_DAGS:
        raise ActionError(f"unknown action; expected one of {', '.join(ACTIONS)}")
    if action != "reprocess":
        return ActionRequest(action, STOP_REDEPLOY_DAG, {"pipeline": pipeline, "redeploy": action == "redeploy"})
    try:
        parsed = parse_day(day or "", "day")
    except BackfillError as exc:
        raise ActionError(str(exc)) from None
    if parsed >= today:
        raise ActionError(f"day {parsed} is not over yet (UTC): pick a day before {today}")
    text = parsed.isoformat()
    return ActionRequest(
        action, REPROCESS_DAG, {"pipeline": pipeline, "start": text, "end": text, "overwrite": True, "dry_run": False}
    )


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
            conf=request.conf,
        )  # fmt: skip
    except DagNotFound:
        raise ActionError(f"DAG {request.dag_id} is not in Airflow (has the dag-processor parsed it?)") from None
    except ValueError as exc:  # ParamValidationError included
        raise ActionError(f"DAG {request.dag_id} refused the request: {str(exc)[:300]}") from None
    if run is None:
        raise ActionError(f"DAG {request.dag_id} created no run")
    model = DagModel.get_dagmodel(request.dag_id)
    return Triggered(request.dag_id, str(run.run_id), bool(model and model.is_paused))
