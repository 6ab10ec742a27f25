"""Alerts that reach a person: a generic JSON webhook and the core SMTP notifier, both from connections.

The DAGs attach :class:`PipelineAlertNotifier` as ``on_failure_callback``: it sends through the pipeline's
alert destinations (its spec's ``alerts:``, else ``include/alerts.yaml``: :mod:`streamjoin.core.alerts`).
``DataQualityOperator`` also takes explicit ``*_conn_id`` arguments.
When the failure is a failed quality check, the message names the pipeline, the day, each failed
expectation with its observed value, and links to the Data Docs page and the task log; any other failure
gets the error and the log link. Every link is an ``http(s)`` URL under Airflow's ``[api] base_url``
(:mod:`streamjoin.airflow.ui_paths`), the pipeline's Stream jobs page among them.

Alerts are for data and jobs: a user's request refused before anything ran (:class:`RequestRefused`: a
reversed or future day range, a day another run is reprocessing) fails its run for that user and alerts
no one.

Slack: ``apache-airflow-providers-slack`` is not installed here; its ``SlackNotifier`` would take the same
:func:`build_alert` text.
"""

from __future__ import annotations

import base64
import html
import json
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow.providers.smtp.notifications.smtp import SmtpNotifier
from airflow.sdk import BaseHook, BaseNotifier
from airflow.sdk.exceptions import AirflowFailException

from streamjoin.core.spec import Alerts
from streamjoin.quality.results import CheckResult

#: the context key :class:`PipelineAlertNotifier` sets for the notifiers it calls: the failed task's pipeline
PIPELINE_KEY = "streamjoin_pipeline"


class RequestRefused(AirflowFailException):
    """A user's request refused before anything was done (the user's own mistake, or a day another run is
    reprocessing): the run fails, with the reason, for whoever triggered it; no alert (no retry either)."""


@dataclass(frozen=True)
class Alert:
    subject: str
    text: str
    html: str
    payload: dict[str, Any]


def _check_result(context: Any) -> CheckResult | None:
    result = getattr(context.get("exception"), "check_result", None)
    return result if isinstance(result, CheckResult) else None


def build_alert(context: Any) -> Alert:
    """The message for a failed task; rich when the failure is a :class:`CheckResult` with blocking failures."""
    ti = context.get("ti")
    where = {
        "dag_id": getattr(ti, "dag_id", None),
        "task_id": getattr(ti, "task_id", None),
        "run_id": context.get("run_id") or getattr(ti, "run_id", None),
        "log_url": getattr(ti, "log_url", None),
    }
    result = _check_result(context)
    pipeline = result.pipeline if result is not None else context.get(PIPELINE_KEY) or _pipeline_name(context)
    if pipeline is not None:
        from streamjoin.airflow.ui_paths import pipeline_page_url

        where["pipeline_url"] = pipeline_page_url(pipeline)
    page = [f"Pipeline page: {where['pipeline_url']}"] if pipeline is not None else []
    event = getattr(context.get("exception"), "alert_event", None)
    if event is not None:  # the owner acted and goes on (e.g. a hung driver restarted): not a failed task
        what = str(context["exception"])
        subject = f"[streamjoin] {what.split(':', 1)[0]}: {event.rsplit('.', 1)[-1].replace('_', ' ')}"
        lines = [subject, what, f"Task log: {where['log_url']}", *page]
        payload = {"event": event, "error": what, **where}
        return Alert(subject, "\n".join(lines), _html(subject, lines), {**payload, "text": "\n".join(lines)})
    if result is None:
        error = str(context.get("exception") or "unknown error")
        subject = f"[streamjoin] task {where['dag_id']}.{where['task_id']} failed"
        lines = [subject, f"Error: {error}", f"Task log: {where['log_url']}", *page]
        payload = {"event": "streamjoin.task_failed", "error": error, **where}
        return Alert(subject, "\n".join(lines), _html(subject, lines), {**payload, "text": "\n".join(lines)})

    failed = [
        {
            "name": e.name,
            "blocking": e.blocking,
            "observed": e.observed,
            "observed_text": e.observed_text(),
            "description": e.description,
        }
        for e in result.failed
    ]
    consequence = getattr(context.get("exception"), "consequence", None) or "day quarantined"
    subject = (
        f"[streamjoin] {result.pipeline} {result.target} {result.day}: quality check failed "
        f"({', '.join(result.blocking_failed)}); {consequence}"
    )
    lines = [
        f"Pipeline: {result.pipeline}",
        f"Output: {result.target}",
        f"Day: {result.day}",
        f"Rows checked: {result.row_count}",
        f"Outcome: {consequence}",
        "Failed expectations:",
        *(
            f"  - {f['name']} ({'blocking' if f['blocking'] else 'warning'}): observed {f['observed_text']}"
            f" -- {f['description']}"
            for f in failed
        ),
        *([f"Data Docs: {result.data_docs_url}"] if result.data_docs_url else []),
        f"Task log: {where['log_url']}",
        *page,
    ]
    payload = {
        "event": "streamjoin.quality_failed",
        "pipeline": result.pipeline,
        "target": result.target,
        "day": result.day,
        "row_count": result.row_count,
        "blocking_failed": result.blocking_failed,
        "warnings": result.warnings,
        "failed": failed,
        "data_docs_url": result.data_docs_url,
        "partition_path": result.partition_path,
        "outcome": consequence,
        **where,
        "text": "\n".join(lines),
    }
    return Alert(subject, "\n".join(lines), _html(subject, lines), payload)


def _html(subject: str, lines: Sequence[str]) -> str:
    body = "".join(f"<div>{_linkify(line)}</div>" for line in lines)
    return f"<html><body><h3>{html.escape(subject)}</h3>{body}</body></html>"


def _linkify(line: str) -> str:
    label, sep, rest = line.partition(": ")
    if sep and rest.startswith(("http://", "https://")):
        return f'{html.escape(label)}: <a href="{html.escape(rest)}">{html.escape(rest)}</a>'
    return html.escape(line).replace("  - ", "&nbsp;&nbsp;&bull; ")


class WebhookNotifier(BaseNotifier):
    """POST the alert as JSON to the URL of an HTTP-type Airflow connection.

    The URL is ``host`` (a full URL, or a host name with ``schema`` as the scheme and ``port``) plus
    ``endpoint`` (argument, or the connection extra ``endpoint``). Login/password become basic auth;
    the extra ``headers`` mapping is sent as headers.

    :param http_conn_id: the connection (templated)
    :param endpoint: path appended to the connection's URL (templated)
    :param timeout: seconds to wait for the receiver
    """

    template_fields = ("http_conn_id", "endpoint")

    def __init__(self, *, http_conn_id: str, endpoint: str | None = None, timeout: float = 10.0, **kwargs: Any):
        super().__init__(**kwargs)
        self.http_conn_id = http_conn_id
        self.endpoint = endpoint
        self.timeout = timeout

    def notify(self, context: Any) -> None:
        conn = BaseHook.get_connection(self.http_conn_id)
        extra = conn.extra_dejson
        url = webhook_url(conn.host or "", conn.schema, conn.port, self.endpoint or extra.get("endpoint"))
        headers = {"Content-Type": "application/json", **extra.get("headers", {})}
        if conn.login:
            token = base64.b64encode(f"{conn.login}:{conn.password or ''}".encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        body = json.dumps(build_alert(context).payload, default=str).encode()
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            self.log.info("alert posted to %s: HTTP %s", url, response.status)


def webhook_url(host: str, schema: str | None, port: int | None, endpoint: str | None) -> str:
    """Compose the webhook URL the way Airflow's HTTP hook does (``schema`` is the URL scheme)."""
    base = host if "://" in host else f"{schema or 'http'}://{host}" + (f":{port}" if port else "")
    if endpoint:
        base = base.rstrip("/") + "/" + endpoint.lstrip("/")
    return base


class QualitySmtpNotifier(SmtpNotifier):
    """The core :class:`SmtpNotifier` with subject and body built by :func:`build_alert`.

    Connection, sender, recipients, cc/bcc are the core notifier's (``from_email`` may come from the
    connection extra).
    """

    def notify(self, context: Any) -> None:
        alert = build_alert(context)
        self.subject, self.html_content = alert.subject, alert.html
        super().notify(context)
        self.log.info("alert mailed to %s through SMTP connection %s", self.to, self.smtp_conn_id)


def quality_notifiers(
    *,
    smtp_conn_id: str | None = None,
    alert_to: str | Sequence[str] | None = None,
    from_email: str | None = None,
    webhook_conn_id: str | None = None,
    webhook_endpoint: str | None = None,
) -> list[BaseNotifier]:
    """The notifiers configured by connection ids: SMTP needs recipients, the webhook only its connection.
    (:func:`alert_notifiers` takes a pipeline's :class:`~streamjoin.core.spec.Alerts`.)"""
    notifiers: list[BaseNotifier] = []
    if smtp_conn_id:
        if not alert_to:
            raise ValueError(f"smtp_conn_id {smtp_conn_id!r} needs alert_to (the recipients)")
        notifiers.append(QualitySmtpNotifier(smtp_conn_id=smtp_conn_id, to=alert_to, from_email=from_email))
    if webhook_conn_id:
        notifiers.append(WebhookNotifier(http_conn_id=webhook_conn_id, endpoint=webhook_endpoint))
    return notifiers


def alert_notifiers(alerts: Alerts) -> list[BaseNotifier]:
    """The notifiers of a pipeline's alert destinations."""
    return quality_notifiers(
        smtp_conn_id=alerts.smtp_conn_id, alert_to=alerts.to or None, from_email=alerts.from_email,
        webhook_conn_id=alerts.webhook_conn_id, webhook_endpoint=alerts.webhook_endpoint,
    )  # fmt: skip


class PipelineAlertNotifier(BaseNotifier):
    """Alert through the failed task's pipeline's destinations (:func:`streamjoin.core.alerts.alerts_for`),
    looked up when the alert is sent: the pipeline is ``spec_path`` if given, else the task's own
    ``spec_path``, else the run's ``pipeline`` param (the reprocess and stop/redeploy forms). Each
    destination is tried on its own; one that cannot be reached is logged (with what to check) and the
    others still get the alert.

    :param spec_path: the pipeline's spec (project-relative or absolute)
    """

    def __init__(self, *, spec_path: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec_path = spec_path

    def notify(self, context: Any) -> None:
        from streamjoin.core.alerts import alerts_for, describe
        from streamjoin.core.plans import resolve
        from streamjoin.core.spec import load_spec

        if isinstance(context.get("exception"), RequestRefused):
            self.log.info("not alerted: the request was refused before anything ran (%s)", context["exception"])
            return
        path = self.spec_path or _task_spec_path(context)
        if path is None:
            self.log.warning("no pipeline known for this failure: no alert sent")
            return
        spec = load_spec(resolve(path))
        alerts = alerts_for(spec)
        self.log.info("alerting %s", describe(alerts))
        context = {**context, PIPELINE_KEY: spec.name}
        for notifier in alert_notifiers(alerts):
            try:
                notifier(context)
            except Exception as exc:  # one unreachable destination must not keep the alert from the others
                self.log.warning(
                    "alert not delivered by %s: %s (check the connection it names and that its receiver is up)",
                    type(notifier).__name__, exc,
                )  # fmt: skip


def _task_spec_path(context: Any) -> str | None:
    path = getattr(context.get("task"), "spec_path", None)
    if isinstance(path, str) and path and "{{" not in path:
        return path
    pipeline = (context.get("params") or {}).get("pipeline")
    if isinstance(pipeline, str):
        from streamjoin.core.plans import resolve, spec_paths
        from streamjoin.core.spec import load_spec

        return next((p for p in spec_paths() if load_spec(resolve(p)).name == pipeline), None)
    return None


def _pipeline_name(context: Any) -> str | None:
    """The failed task's pipeline (its spec, or the run's ``pipeline`` param); None if unknown."""
    from streamjoin.core.plans import resolve
    from streamjoin.core.spec import load_spec

    try:
        path = _task_spec_path(context)
        return load_spec(resolve(path)).name if path is not None else None
    except Exception:  # an alert about a spec that no longer loads still goes out, without the page's link
        return None
