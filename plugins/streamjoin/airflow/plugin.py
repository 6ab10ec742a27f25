"""The Airflow UI plugin (entry point ``airflow.plugins``): a "Stream jobs" page.

A FastAPI app mounted by the api-server under ``/streamjoin`` (``/streamjoin/jobs`` HTML page,
``/streamjoin/api/jobs`` JSON, ``/streamjoin/metrics`` Prometheus text: :mod:`streamjoin.core.metrics`),
linked from the UI's Browse menu through an external view. Per pipeline: state, last batch time, input/processed
rows per second, lag per topic, restarts, last quality-check result. Everything is read from the files next to
each checkpoint (:mod:`streamjoin.core.job_files`) and the input topics' end offsets (through the Kafka
connection, security settings included): no Spark.

Every route needs Airflow's login and permissions (the api-server does not add them to plugin apps): no token
-> 401; no read access to DAGs -> 403; a pipeline's rows only for users who may read all of its DAGs
(:func:`streamjoin.core.plans.pipeline_dag_ids`), ``/api/jobs/<pipeline>`` -> 403 otherwise.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Callable, Iterator
from typing import Annotated, Any

from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException, Path
from fastapi.responses import HTMLResponse, PlainTextResponse

from streamjoin.core.job_files import PipelineFiles
from streamjoin.core.metrics import Sample, prometheus_text, samples
from streamjoin.core.plans import checkpoint_dir, pipeline_dag_ids, resolve
from streamjoin.core.spec import PipelineSpec, load_spec
from streamjoin.core.supervision import Policy, observe
from streamjoin.kafka.client_config import KafkaClientConfig

PREFIX = "/streamjoin"
KAFKA_CONN_ID = "streamjoin_kafka_default"


def _kafka() -> KafkaClientConfig | None:
    try:
        from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook

        return StreamJoinKafkaHook(KAFKA_CONN_ID).kafka_config()
    except Exception:  # no usable connection: the page shows no lag (and no error that could carry a secret)
        return None


def _latest(kafka: KafkaClientConfig | None, spec: PipelineSpec) -> dict[str, dict[int, int]]:
    """The end offsets of the pipeline's input topics (none without Kafka, a topic's none if it fails)."""
    latest: dict[str, dict[int, int]] = {}
    if kafka:
        from streamjoin.kafka.clients import end_offsets

        for topic in sorted({i.topic for i in spec.inputs.values()}):
            try:
                latest[topic] = end_offsets(kafka, topic, timeout=5)
            except Exception:
                latest[topic] = {}
    return latest


def _pipelines(
    spec_paths: list[str] | None, allowed: Callable[[str], bool]
) -> Iterator[tuple[PipelineSpec, PipelineFiles, KafkaClientConfig | None]]:
    """Each pipeline ``allowed`` accepts (the caller's read access; the others are not even read): its spec,
    job files and the Kafka connection (looked up once, when the first pipeline needs it)."""
    from streamjoin.airflow.dag_factory import spec_paths as all_specs

    kafka = None
    for path in spec_paths if spec_paths is not None else all_specs():
        spec = load_spec(resolve(path))
        if allowed(spec.name):
            kafka = kafka or _kafka()
            yield spec, PipelineFiles(checkpoint_dir(spec)), kafka


def job_rows(spec_paths: list[str] | None = None, *, allowed: Callable[[str], bool] = bool) -> list[dict[str, Any]]:
    """One row per pipeline spec for the page and the JSON endpoint; only pipelines whose name ``allowed``
    accepts (the caller's read access), so nothing of the others is even read."""
    from streamjoin.quality.results import latest_check_result

    rows = []
    for spec, files, kafka in _pipelines(spec_paths, allowed):
        status, supervisor, driver = files.status(), files.supervisor(), files.driver() or {}
        latest = _latest(kafka, spec)
        health = observe(files, latest, time.time(), Policy())
        lags = health.lag
        if not driver and status is None:
            state = "never started"
        elif supervisor.get("gave_up_at") and not files.driver_alive():  # a crash loop: the owner gave up
            state = "failed"
        else:
            state = health.state.value
        quality = None
        if spec.output.files:
            result = latest_check_result(resolve(spec.output.files.path))
            quality = None if result is None else result.summary()
        rows.append({
            "pipeline": spec.name, "state": state, "reason": health.reason,
            "last_batch_time": (status or {}).get("last_batch_time"), "batch_id": (status or {}).get("batch_id"),
            "input_rows_per_second": (status or {}).get("input_rows_per_second"),
            "processed_rows_per_second": (status or {}).get("processed_rows_per_second"),
            "lag": lags, "restarts": len(supervisor.get("restarts", [])), "quality": quality,
        })  # fmt: skip
    return rows


def metric_samples(spec_paths: list[str] | None = None, *, allowed: Callable[[str], bool] = bool) -> list[Sample]:
    """The metrics of every pipeline ``allowed`` accepts (:func:`streamjoin.core.metrics.samples`)."""
    out: list[Sample] = []
    for spec, files, kafka in _pipelines(spec_paths, allowed):
        restarts = len(files.supervisor().get("restarts", []))
        out += samples(spec.name, files.status(), _latest(kafka, spec), restarts)
    return out


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:,.1f}"


def render(rows: list[dict[str, Any]]) -> str:
    body = "".join(
        f"<tr data-pipeline='{html.escape(r['pipeline'])}'><td>{html.escape(r['pipeline'])}</td>"
        f"<td class='state {html.escape(r['state'])}' title='{html.escape(r['reason'])}'>{html.escape(r['state'])}</td>"
        f"<td class='last-batch'>{html.escape(str(r['last_batch_time'] or '-'))} (batch {r['batch_id']})</td>"
        f"<td>{_num(r['input_rows_per_second'])}</td><td>{_num(r['processed_rows_per_second'])}</td>"
        f"<td class='lag'>{'<br>'.join(f'{html.escape(t)}: {n:,}' for t, n in r['lag'].items()) or '-'}</td>"
        f"<td class='restarts'>{r['restarts']}</td><td>{html.escape(r['quality'] or 'no check yet')}</td></tr>"
        for r in rows
    )  # fmt: skip
    style = (
        "body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
        "padding:.4em .7em;text-align:left;vertical-align:top}.healthy{color:#0a0}.dead,.failed,.stale{color:#c00}"
        ".lagging,.starting{color:#c80}"
    )
    head = ("<tr><th>Pipeline</th><th>State</th><th>Last batch</th><th>Input rows/s</th><th>Processed rows/s</th>"
            "<th>Lag per topic</th><th>Restarts</th><th>Last quality check</th></tr>")  # fmt: skip
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>Stream jobs</title><style>{style}</style>"
        f"</head><body><h2>Stream jobs</h2><table id='stream-jobs'>{head}{body}</table></body></html>"
    )


def readable_by(user: Any) -> Callable[[str], bool]:
    """``pipeline name -> bool``: may ``user`` read every DAG of the pipeline (Airflow's auth manager decides,
    teams included)?"""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails
    from airflow.models.dag import DagModel

    manager = get_auth_manager()

    def allowed(name: str) -> bool:
        return all(
            manager.is_authorized_dag(
                method="GET", details=DagDetails(id=dag_id, team_name=DagModel.get_team_name(dag_id)), user=user
            )
            for dag_id in pipeline_dag_ids(name)
        )

    return allowed


#: every route: a logged-in user (401 otherwise) who may read DAGs at all (403 otherwise)
app = FastAPI(title="streamjoin stream jobs", dependencies=[Depends(requires_access_dag("GET"))])
#: a pipeline name as specs allow it (``[a-z][a-z0-9_]*``), bounded: anything else is refused before any lookup
PIPELINE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,99}$")


@app.get("/jobs", response_class=HTMLResponse)
def jobs_page(user: GetUserDep) -> str:
    return render(job_rows(allowed=readable_by(user)))


@app.get("/api/jobs")
def jobs_json(user: GetUserDep) -> list[dict[str, Any]]:
    return job_rows(allowed=readable_by(user))


@app.get("/api/jobs/{pipeline}")
def job_json(
    pipeline: Annotated[str, Path(max_length=100, pattern=PIPELINE_NAME.pattern)], user: GetUserDep
) -> dict[str, Any]:
    """One pipeline's row: 404 if there is no such pipeline, 403 if the user may not read its DAGs."""
    if not readable_by(user)(pipeline):
        raise HTTPException(403, f"no read access to the DAGs of pipeline {pipeline!r}")
    rows = job_rows(allowed=lambda name: name == pipeline)
    if not rows:
        raise HTTPException(404, f"no pipeline {pipeline!r}")
    return rows[0]


@app.get("/metrics", response_class=PlainTextResponse)
def metrics(user: GetUserDep) -> PlainTextResponse:
    """Prometheus text exposition of the pipelines the user may read (:mod:`streamjoin.core.metrics`)."""
    text = prometheus_text(metric_samples(allowed=readable_by(user)))
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")


class StreamJoinPlugin(AirflowPlugin):
    name = "streamjoin"
    fastapi_apps = [{"app": app, "url_prefix": PREFIX, "name": "Stream jobs"}]
    external_views = [
        {"name": "Stream jobs", "href": f"{PREFIX}/jobs", "destination": "nav", "category": "browse",
         "url_route": "stream-jobs"},
    ]  # fmt: skip
