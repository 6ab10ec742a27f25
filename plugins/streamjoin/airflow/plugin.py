"""The Airflow UI plugin (entry point ``airflow.plugins``): the "Stream jobs" pages.

A FastAPI app mounted by the api-server under ``/streamjoin``, linked from the UI's Browse menu through an
external view:

* ``/jobs``: every pipeline's state, last batch, input rate over the last minutes, a sparkline of the last
  hour, lag per topic, restarts, last quality check; ``/api/jobs`` the same as JSON;
* ``/jobs/<pipeline>``: one pipeline: charts of its history (rates, lag, batch duration, state size, dead
  letters; :mod:`streamjoin.airflow.status_page`), links to its DAG runs, the owner's task logs, the Spark UI
  and the last Data Docs (served by ``/data-docs/<pipeline>/...``), and actions; ``/api/jobs/<pipeline>``
  and ``/api/jobs/<pipeline>/history`` as JSON;
* ``POST /jobs/<pipeline>/actions/{stop,redeploy,reprocess}``: a run of the stop/redeploy or reprocess DAG
  (:mod:`streamjoin.airflow.actions`);
* ``/metrics``: Prometheus text (:mod:`streamjoin.core.metrics`);

and a listener that notes on each run of the shipped DAGs the day(s) it processes (:mod:`streamjoin.airflow.run_notes`).

Everything is read from the files next to each checkpoint (:mod:`streamjoin.core.job_files`) and the input
topics' end offsets (through the Kafka connection, security settings included): no Spark.

Every route needs Airflow's login and permissions (the api-server does not add them to plugin apps): no token
-> 401; no read access to DAGs -> 403; a pipeline's rows only for users who may read all of its DAGs
(:func:`streamjoin.core.plans.pipeline_dag_ids`), its routes -> 403 otherwise; an action also needs the
permission to trigger its DAG (403, nothing triggered) and, from a browser session, the form's CSRF token.
"""

from __future__ import annotations

import hmac
import mimetypes
import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path as FilePath
from typing import Annotated, Any
from urllib.parse import quote, urlencode, urlsplit

from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, Form, HTTPException, Path, Query, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from streamjoin.airflow import run_notes
from streamjoin.airflow.actions import (
    ACTION_DAGS,
    REPROCESS_DAG,
    ActionError,
    action_request,
    csrf_token,
    may_trigger,
    reprocess_busy,
    requested_days,
    trigger,
)
from streamjoin.airflow.quality_status import NOT_CHECKED, QualityStatus, quality_days, quality_status
from streamjoin.airflow.status_page import REFRESH_SECONDS, DayCheck, JobPage, Link, render_job, render_jobs
from streamjoin.airflow.ui_paths import DATA_DOCS_DIR, DATA_DOCS_PATH, PREFIX, UI_ROUTE
from streamjoin.core.job_files import PipelineFiles
from streamjoin.core.metrics import Sample, prometheus_text, samples
from streamjoin.core.plans import checkpoint_dir, pipeline_dag_ids, resolve
from streamjoin.core.plans import spec_paths as all_specs
from streamjoin.core.repartition import join_view
from streamjoin.core.spec import PipelineSpec, load_spec
from streamjoin.core.status_view import JobView, job_view
from streamjoin.core.supervision import Policy
from streamjoin.kafka.client_config import KafkaClientConfig

KAFKA_CONN_ID = "streamjoin_kafka_default"
#: how much history the pipeline's page plots (the job keeps about as much: core.job_files.History)
HISTORY_HOURS = 6.0
#: the task of a pipeline's DAG that owns the job (dag_factory.pipeline_dag): its logs are the job's
OWNER_TASK = "own_job"


def _kafka() -> KafkaClientConfig | None:
    try:
        from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook

        return StreamJoinKafkaHook(KAFKA_CONN_ID).kafka_config()
    except Exception:  # no usable connection: the page shows no lag (and no error that could carry a secret)
        return None


def _latest(kafka: KafkaClientConfig | None, spec: PipelineSpec) -> dict[str, dict[int, int]]:
    """The end offsets of the topics the join reads (a repartitioned input's internal topic: the offsets the
    job commits are on it); none without Kafka, a topic's none if it fails."""
    latest: dict[str, dict[int, int]] = {}
    if kafka:
        from streamjoin.kafka.clients import end_offsets

        for topic in sorted({i.topic for i in join_view(spec).inputs.values()}):
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
    kafka = None
    for path in spec_paths if spec_paths is not None else all_specs():
        spec = load_spec(resolve(path))
        if allowed(spec.name):
            kafka = kafka or _kafka()
            yield spec, PipelineFiles(checkpoint_dir(spec)), kafka


def _alive(files: PipelineFiles) -> bool:
    """The recorded driver runs, as the owner sees it (a local pid, or its cluster manager asked): a driver
    whose master does not answer counts as running, as it does for the owner; False when the record cannot
    be followed at all (its Spark connection changed or is gone)."""
    from streamjoin.airflow.lifecycle import driver_alive

    try:
        return driver_alive(files)
    except Exception:
        return False


def _view(spec: PipelineSpec, files: PipelineFiles, kafka: KafkaClientConfig | None, now: float) -> JobView:
    """A pipeline's view (:func:`streamjoin.core.status_view.job_view`) from its job files, the input topics'
    end offsets and the last quality check, judged by the owner's policy (the one it recorded, else the
    pipeline DAG's); its history: that of the last :data:`HISTORY_HOURS`."""
    from streamjoin.airflow.dag_factory import OWNER_POLICY
    from streamjoin.core.join_plan import stage_label

    supervisor, alive = files.supervisor(), _alive(files)
    quality = quality_status(resolve(spec.output.files.path)) if spec.output.files else None
    docs = _docs_of(spec.name, quality) if quality is not None else None
    return job_view(
        spec.name, status=files.status(), driver=files.driver(), supervisor=supervisor, failure=files.failure(),
        history=files.history.read(since=now - HISTORY_HOURS * 3600), alive=alive,
        stopped=files.stopped_on_purpose(), latest=_latest(kafka, spec), planned=files.batch_in_progress(),
        policy=Policy.from_json(supervisor.policy, OWNER_POLICY), now=now,
        quality=None if quality is None else (quality.text, quality.verdict, docs),
        stages=[stage_label(spec, index) for index in range(len(spec.stages))],
    )  # fmt: skip


def job_rows(spec_paths: list[str] | None = None, *, allowed: Callable[[str], bool] = bool) -> list[dict[str, Any]]:
    """One row per pipeline spec for the JSON endpoint (:meth:`JobView.to_json`); only pipelines whose name
    ``allowed`` accepts (the caller's read access), so nothing of the others is even read."""
    now = time.time()
    return [_view(spec, files, kafka, now).to_json() for spec, files, kafka in _pipelines(spec_paths, allowed)]


def metric_samples(spec_paths: list[str] | None = None, *, allowed: Callable[[str], bool] = bool) -> list[Sample]:
    """The metrics of every pipeline ``allowed`` accepts (:func:`streamjoin.core.metrics.samples`)."""
    out: list[Sample] = []
    for spec, files, kafka in _pipelines(spec_paths, allowed):
        out += samples(spec.name, files.status(), _latest(kafka, spec), len(files.supervisor().restarts))
    return out


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


#: every route: a logged-in user (401 otherwise) who may read DAGs at all (403 otherwise); no /docs, /redoc or
#: /openapi.json, which FastAPI would add outside the app's dependencies (open to anyone)
app = FastAPI(
    title="streamjoin stream jobs",
    dependencies=[Depends(requires_access_dag("GET"))],
    docs_url=None,
    redoc_url=None,
    openapi_url=None,
)
#: a pipeline name as specs allow it (``[a-z][a-z0-9_]*``), bounded: anything else is refused before any lookup
PIPELINE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,99}$")


Pipeline = Annotated[str, Path(max_length=100, pattern=PIPELINE_NAME.pattern)]


def _root() -> str:
    """The Airflow UI's path (``[api] base_url``'s, ``/`` by default), ending with ``/``."""
    from airflow.api_fastapi.app import API_ROOT_PATH

    return API_ROOT_PATH if API_ROOT_PATH.endswith("/") else API_ROOT_PATH + "/"


def _jobs_url() -> str:
    return f"{_root()}{PREFIX.strip('/')}/jobs"


def _readable(user: Any, pipeline: str) -> None:
    if not readable_by(user)(pipeline):
        raise HTTPException(403, f"no read access to the DAGs of pipeline {pipeline!r}")


def _one(pipeline: str) -> tuple[PipelineSpec, PipelineFiles, KafkaClientConfig | None]:
    found = next(_pipelines(None, lambda name: name == pipeline), None)
    if found is None:
        raise HTTPException(404, f"no pipeline {pipeline!r}")
    return found


#: ``?refresh=N``: the page reloads itself every N seconds (0: never)
Refresh = Annotated[int, Query(ge=0, le=3600)]


@app.get("/jobs", response_class=HTMLResponse)
def jobs_page(user: GetUserDep, refresh: Refresh = REFRESH_SECONDS) -> str:
    now = time.time()
    views = [_view(spec, files, kafka, now) for spec, files, kafka in _pipelines(None, readable_by(user))]
    return render_jobs(views, _jobs_url(), refresh)


@app.get("/api/jobs")
def jobs_json(user: GetUserDep) -> list[dict[str, Any]]:
    return job_rows(allowed=readable_by(user))


@app.get("/api/jobs/{pipeline}")
def job_json(pipeline: Pipeline, user: GetUserDep) -> dict[str, Any]:
    """One pipeline's row: 404 if there is no such pipeline, 403 if the user may not read its DAGs."""
    _readable(user, pipeline)
    return _view(*_one(pipeline), time.time()).to_json()


@app.get("/api/jobs/{pipeline}/history")
def job_history_json(
    pipeline: Pipeline, user: GetUserDep, hours: Annotated[float, Query(gt=0, le=24)] = HISTORY_HOURS
) -> list[dict[str, Any]]:
    """The job's history entries of the last ``hours`` (as far as the job keeps them), oldest first."""
    _readable(user, pipeline)
    return [e.to_json() for e in _one(pipeline)[1].history.read(since=time.time() - hours * 3600)]


def _latest_run(dag_id: str) -> str | None:
    """The run id of the DAG's newest run (None: none, or the DB did not answer)."""
    try:
        from airflow.models.dagrun import DagRun
        from airflow.utils.session import create_session
        from sqlalchemy import select

        with create_session() as session:
            query = select(DagRun.run_id).where(DagRun.dag_id == dag_id).order_by(DagRun.run_after.desc()).limit(1)
            return session.scalar(query)
    except Exception:
        return None


def _data_docs_href(pipeline: str, url: str) -> str | None:
    """The plugin's own URL of a Data Docs page of the pipeline (``/streamjoin/data-docs/<pipeline>/...``):
    from the local file the check wrote (``file://``, under ``var/data_docs/<pipeline>``) or from a URL of
    this route already (the check's ``data_docs_base_url``); None for anything else."""
    from streamjoin.quality.results import data_docs_file

    local = data_docs_file(url)
    root = (resolve(DATA_DOCS_DIR) / pipeline).resolve()
    if local is not None:
        if not local.resolve().is_relative_to(root):
            return None
        relative = quote(local.resolve().relative_to(root).as_posix())
    else:
        marker = f"{DATA_DOCS_PATH}/{quote(pipeline)}/"
        path = urlsplit(url).path
        if marker not in path:
            return None
        relative = path.split(marker, 1)[1]
    return f"{_root()}{DATA_DOCS_PATH.strip('/')}/{quote(pipeline)}/{relative}"


def _docs_of(pipeline: str, status: QualityStatus) -> str | None:
    """Where the Data Docs of a day's check open: served here, or the check's own http(s) URL."""
    url = status.result.data_docs_url if status.result else None
    if not url:
        return None
    return _data_docs_href(pipeline, url) or (url if url.startswith(("http://", "https://")) else None)


def _day_checks(spec: PipelineSpec, limit: int = 14) -> list[DayCheck]:
    """The latest check of each of the last ``limit`` days written or checked."""
    if spec.output.files is None:
        return []
    return [DayCheck(s.day, s.verdict, s.text, _docs_of(spec.name, s))
            for s in quality_days(resolve(spec.output.files.path), limit)]  # fmt: skip


def _data_docs(spec: PipelineSpec) -> Link:
    """The Data Docs of the check the page shows (the day that changed last), served here."""
    status = quality_status(resolve(spec.output.files.path)) if spec.output.files else None
    result = status.result if status else None
    url = result.data_docs_url if result else None
    if status is None or result is None or not url:
        return Link("data-docs", "Last Data Docs", None, "no quality check yet" if result is None else "none written")
    href = _data_docs_href(spec.name, url)
    note = f"({result.day}, {'passed' if result.success else 'FAILED'}"
    note += ", of the data before it was written again)" if status.verdict == NOT_CHECKED else ")"
    if href is not None:
        return Link("data-docs", "Last Data Docs", href, note, "frame")
    if url.startswith(("http://", "https://")):
        return Link("data-docs", "Last Data Docs", url, note, "external")
    return Link("data-docs", "Last Data Docs", None, url)


def _links(spec: PipelineSpec, view: JobView) -> list[Link]:
    root = _root()
    owner_dag, backfill_dag = pipeline_dag_ids(spec.name)
    run = _latest_run(owner_dag)
    logs = (f"{root}dags/{owner_dag}/runs/{quote(run, safe='')}/tasks/{OWNER_TASK}" if run
            else f"{root}dags/{owner_dag}/tasks/{OWNER_TASK}")  # fmt: skip
    spark_ui, alive = view.spark_ui, view.alive
    return [
        Link("dag-runs", "Runs of the pipeline's DAG", f"{root}dags/{owner_dag}/runs"),
        Link("task-logs", "The job owner's task logs", logs, "(latest run)" if run else "(no run yet)"),
        Link("backfill-runs", "Daily backfill runs", f"{root}dags/{backfill_dag}/runs"),
        Link("action-runs", "Stop/redeploy runs", f"{root}dags/{ACTION_DAGS['stop']}/runs"),
        Link("reprocess-runs", "Reprocess runs", f"{root}dags/{ACTION_DAGS['reprocess']}/runs"),
        Link("spark-ui", "Spark UI", spark_ui if alive and spark_ui else None,
             "" if alive and spark_ui else "the job is not running" if not alive else "not reported by the job",
             "external"),
        _data_docs(spec),
    ]  # fmt: skip


@app.get("/jobs/{pipeline}", response_class=HTMLResponse)
def job_page(
    pipeline: Pipeline,
    request: Request,
    user: GetUserDep,
    triggered: Annotated[str | None, Query(max_length=100)] = None,
    run: Annotated[str | None, Query(max_length=250)] = None,
    refresh: Refresh = REFRESH_SECONDS,
) -> str:
    """One pipeline's page; ``triggered``/``run`` name the run an action just created."""
    _readable(user, pipeline)
    return _render_page(pipeline, request, triggered=triggered, run=run, refresh=refresh)


def _render_page(
    pipeline: str, request: Request, *, triggered: str | None = None, run: str | None = None,
    refresh: int = REFRESH_SECONDS, refused: str | None = None,
) -> str:  # fmt: skip
    """The pipeline's page, with the run an action created or why it was refused."""
    from airflow.api_fastapi.auth.managers.base_auth_manager import COOKIE_NAME_JWT_TOKEN

    spec, files, kafka = _one(pipeline)
    now = time.time()
    view = _view(spec, files, kafka, now)
    done = None
    if triggered is not None and triggered in ACTION_DAGS.values() and run:
        from airflow.models.dag import DagModel

        model = DagModel.get_dagmodel(triggered)
        href = f"{_root()}dags/{triggered}/runs/{quote(run, safe='')}"
        done = (triggered, run, href, bool(model and model.is_paused))
    cookie = request.cookies.get(COOKIE_NAME_JWT_TOKEN)
    page = JobPage(
        view=view, history=files.history.read(since=now - HISTORY_HOURS * 3600), now=now,
        links=_links(spec, view), jobs_url=_jobs_url(),
        csrf=csrf_token(cookie) if cookie else "", triggered=done, hours=HISTORY_HOURS, refresh=refresh,
        checks=_day_checks(spec), refused=refused,
    )  # fmt: skip
    return render_job(page)


@app.post("/jobs/{pipeline}/actions/{action}", response_model=None)
def job_action(
    pipeline: Pipeline,
    action: Annotated[str, Path(max_length=20)],
    request: Request,
    user: GetUserDep,
    csrf: Annotated[str | None, Form(max_length=100)] = None,
    day: Annotated[str | None, Form(max_length=40)] = None,
    end: Annotated[str | None, Form(max_length=40)] = None,
    force: Annotated[bool, Form()] = False,
    reason: Annotated[str | None, Form(max_length=500)] = None,
) -> RedirectResponse | JSONResponse | HTMLResponse:
    """Trigger the action's DAG for the pipeline: 403 without read access to the pipeline or the permission
    to trigger the DAG (nothing is triggered); then a redirect to the pipeline's page (JSON ``{dag_id, run_id,
    conf}`` if the client accepts JSON). A request the page refuses (a bad, reversed or future day range: 400;
    a day a run is reprocessing already: 409) triggers nothing and is answered with the page saying why (JSON
    ``{detail}`` if the client accepts JSON)."""
    from airflow.api_fastapi.auth.managers.base_auth_manager import COOKIE_NAME_JWT_TOKEN

    _readable(user, pipeline)
    spec = _one(pipeline)[0]
    dag_id = ACTION_DAGS.get(action)
    if dag_id is None:
        raise HTTPException(404, f"no action {action[:20]!r}; expected one of {', '.join(ACTION_DAGS)}")
    if not may_trigger(user, dag_id):
        raise HTTPException(403, f"no permission to trigger DAG {dag_id}")
    # a browser session (the cookie, whatever other Authorization a browser may add): the form's token is due
    if not request.headers.get("authorization", "").lower().startswith("bearer "):
        cookie = request.cookies.get(COOKIE_NAME_JWT_TOKEN) or ""
        if not cookie or not csrf or not hmac.compare_digest(csrf, csrf_token(cookie)):
            raise HTTPException(403, "the form's token does not match this session: reload the page and try again")
    wants_json = "application/json" in request.headers.get("accept", "")
    try:
        wanted = action_request(action, pipeline, day, datetime.now(UTC).date(), end=end, force=force, reason=reason)
        if wanted.dag_id == REPROCESS_DAG:
            reprocess_busy(wanted, _day_locks(spec, requested_days(wanted.conf)))
        done = trigger(wanted, user.get_name())
    except ActionError as exc:
        if wants_json:
            return JSONResponse({"detail": str(exc)}, status_code=exc.status)
        # the page again (not reloading itself: that would post the form again), saying why nothing ran
        return HTMLResponse(_render_page(pipeline, request, refresh=0, refused=str(exc)), status_code=exc.status)
    if wants_json:
        return JSONResponse({"dag_id": done.dag_id, "run_id": done.run_id, "conf": wanted.conf, "paused": done.paused})
    query = urlencode({"triggered": done.dag_id, "run": done.run_id})
    return RedirectResponse(f"{_jobs_url()}/{quote(pipeline)}?{query}", status_code=303)


def _day_locks(spec: PipelineSpec, days: list[Any]) -> dict[Any, dict[str, Any] | None]:
    """Per day, who holds its reprocessing lock (None: no one)."""
    from streamjoin.airflow.operators.reprocess import day_lock

    locks = {day: day_lock(spec, day) for day in days}
    return {day: lock.holder() if lock is not None else None for day, lock in locks.items()}


@app.get("/data-docs/{pipeline}/{path:path}", response_model=None)
def data_docs(pipeline: Pipeline, path: str, user: GetUserDep) -> FileResponse | HTMLResponse:
    """A file of the pipeline's Data Docs (``var/data_docs/<pipeline>/...``); nothing outside it. HTML pages
    without what they would load from CDNs, with a local stylesheet (:mod:`streamjoin.airflow.data_docs`)."""
    from streamjoin.airflow.data_docs import offline_html

    _readable(user, pipeline)
    root = (resolve(DATA_DOCS_DIR) / pipeline).resolve()
    target = (root / path).resolve()
    if not target.is_relative_to(root) or not target.is_file():
        raise HTTPException(404, "no such file in the pipeline's Data Docs")
    media = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
    if media == "text/html":
        html = target.read_text(encoding="utf-8", errors="replace")
        return HTMLResponse(offline_html(html, f"{_root()}{PREFIX.strip('/')}/static/data-docs.css"))
    return FileResponse(FilePath(target), media_type=media)


@app.get("/static/data-docs.css")
def data_docs_css() -> Response:
    """The stylesheet served Data Docs pages get instead of Bootstrap from a CDN."""
    from streamjoin.airflow.data_docs import STYLESHEET

    return Response(STYLESHEET, media_type="text/css", headers={"Cache-Control": "max-age=3600"})


@app.exception_handler(StarletteHTTPException)
async def _login_first(request: Request, exc: StarletteHTTPException) -> Response:
    """A browser that opens a page without being logged in goes to Airflow's login page, and back here after
    it; API clients get the 401 as before."""
    wants_page = request.method == "GET" and "text/html" in request.headers.get("accept", "")
    if exc.status_code == 401 and wants_page and not request.headers.get("authorization"):
        here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"{_root()}api/v2/auth/login?{urlencode({'next': here})}", status_code=303)
    return await http_exception_handler(request, exc)


@app.get("/metrics", response_class=PlainTextResponse)
def metrics(user: GetUserDep) -> PlainTextResponse:
    """Prometheus text exposition of the pipelines the user may read (:mod:`streamjoin.core.metrics`)."""
    text = prometheus_text(metric_samples(allowed=readable_by(user)))
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")


class StreamJoinPlugin(AirflowPlugin):
    name = "streamjoin"
    fastapi_apps = [{"app": app, "url_prefix": PREFIX, "name": "Stream jobs"}]
    #: notes naming the day(s) each run of the shipped DAGs processes (:mod:`streamjoin.airflow.run_notes`)
    listeners = [run_notes]
    external_views = [
        {"name": "Stream jobs", "href": f"{PREFIX}/jobs", "destination": "nav", "category": "browse",
         "url_route": UI_ROUTE},
    ]  # fmt: skip
