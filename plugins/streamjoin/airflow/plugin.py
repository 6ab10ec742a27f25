"""The Airflow UI plugin (entry point ``airflow.plugins``): a "Stream jobs" page.

A FastAPI app mounted by the api-server under ``/streamjoin`` (``/streamjoin/jobs`` HTML page,
``/streamjoin/api/jobs`` JSON), linked from the UI's Browse menu through an external view. Per
pipeline: state, last batch time, input/processed rows per second, lag per topic, restarts, last
quality-check result. Everything is read from the files next to each checkpoint
(:mod:`streamjoin.core.job_files`) and the input topics' end offsets: no Spark, no Airflow DB.
"""

from __future__ import annotations

import html
import json
import os
import time
from typing import Any

from airflow.plugins_manager import AirflowPlugin
from fastapi import FastAPI
from fastapi.responses import HTMLResponse

from streamjoin.core.plans import checkpoint_dir, resolve
from streamjoin.core.spec import load_spec
from streamjoin.core.supervision import Policy, assess, lag

PREFIX = "/streamjoin"


def _bootstrap() -> str | None:
    raw = os.environ.get("AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT")
    if raw:
        try:
            conn = json.loads(raw)
            return str(conn.get("extra", {}).get("bootstrap.servers") or f"{conn['host']}:{conn.get('port', 9092)}")
        except (ValueError, KeyError, AttributeError):
            pass
    try:
        from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook

        return StreamJoinKafkaHook("streamjoin_kafka_default").bootstrap_servers()
    except Exception:  # no connection configured: the page shows no lag
        return None


def job_rows(spec_paths: list[str] | None = None) -> list[dict[str, Any]]:
    """One row per pipeline spec for the page and the JSON endpoint."""
    from streamjoin.airflow.dag_factory import spec_paths as all_specs
    from streamjoin.core.job_files import PipelineFiles
    from streamjoin.quality.results import latest_check_result

    bootstrap = _bootstrap()
    rows = []
    for path in spec_paths if spec_paths is not None else all_specs():
        spec = load_spec(resolve(path))
        files = PipelineFiles(checkpoint_dir(spec))
        status, supervisor, driver = files.status(), files.supervisor(), files.driver() or {}
        latest: dict[str, dict[int, int]] = {}
        if bootstrap:
            from streamjoin.kafka.clients import end_offsets

            for topic in sorted({i.topic for i in spec.inputs.values()}):
                try:
                    latest[topic] = end_offsets(bootstrap, topic, timeout=5)
                except Exception:
                    latest[topic] = {}
        lags = lag(latest, (status or {}).get("end_offsets", {}))
        health = assess(
            alive=files.driver_alive(), stopped=files.stop_requested() or bool(supervisor.get("stopped")),
            status=status, started_at=driver.get("started_at"), lag_by_topic=lags, now=time.time(), policy=Policy(),
        )  # fmt: skip
        if not driver and status is None:
            state = "never started"
        elif (supervisor.get("last") or {}).get("state") == "failed" and not files.driver_alive():
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


app = FastAPI(title="streamjoin stream jobs")


@app.get("/jobs", response_class=HTMLResponse)
def jobs_page() -> str:
    return render(job_rows())


@app.get("/api/jobs")
def jobs_json() -> list[dict[str, Any]]:
    return job_rows()


class StreamJoinPlugin(AirflowPlugin):
    name = "streamjoin"
    fastapi_apps = [{"app": app, "url_prefix": PREFIX, "name": "Stream jobs"}]
    external_views = [
        {"name": "Stream jobs", "href": f"{PREFIX}/jobs", "destination": "nav", "category": "browse",
         "url_route": "stream-jobs"},
    ]  # fmt: skip
