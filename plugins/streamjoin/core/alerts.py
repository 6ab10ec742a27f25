"""Where a pipeline's alerts go: its spec's ``alerts:``, else the project's default file.

The default is ``include/alerts.yaml`` (or the file ``$STREAMJOIN_ALERTS_FILE`` names); both have the
fields of :class:`~streamjoin.core.spec.Alerts` (Airflow connection ids). Pure: reads one small YAML file.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from pydantic import ValidationError

from streamjoin.core.errors import SpecError, field_path
from streamjoin.core.plans import PROJECT_HOME, resolve
from streamjoin.core.spec import Alerts, PipelineSpec

DEFAULT_FILE = "include/alerts.yaml"
FILE_ENV = "STREAMJOIN_ALERTS_FILE"


def project_alerts(home: Path = PROJECT_HOME) -> Alerts:
    """The project-wide default (no file: no alerts)."""
    path = resolve(os.environ.get(FILE_ENV) or DEFAULT_FILE, home)
    if not path.exists():
        return Alerts()
    data = yaml.safe_load(path.read_text()) or {}
    try:
        return Alerts.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise SpecError(str(path), field_path(error["loc"]), error.get("input"), error["msg"]) from None


def alerts_for(spec: PipelineSpec, home: Path = PROJECT_HOME) -> Alerts:
    """The spec's own ``alerts:`` if it has one, else the project's default."""
    return spec.alerts if spec.alerts is not None else project_alerts(home)


def describe(alerts: Alerts) -> str:
    """Where alerts go, for logs and the demo's report."""
    parts = []
    if alerts.webhook_conn_id:
        parts.append(f"webhook (HTTP connection '{alerts.webhook_conn_id}')")
    if alerts.smtp_conn_id:
        parts.append(f"e-mail to {', '.join(alerts.to)} (SMTP connection '{alerts.smtp_conn_id}')")
    return " and ".join(parts) or "nowhere (no alerts configured: see include/alerts.yaml)"
