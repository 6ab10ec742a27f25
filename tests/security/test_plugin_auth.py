"""Every route of the Stream jobs plugin behind Airflow's login and DAG permissions, on a real api-server with
the simple auth manager. The routes are read from the plugin's FastAPI app itself, so a new route is covered
(or fails here for want of a sample value for a new path parameter): anonymous -> 401 on every one; a viewer
without read access to a pipeline's DAGs -> 403 on every route that names the pipeline and none of its rows
(and metrics) elsewhere; the admin gets 200 from every GET (the sample requests are valid, so the 401s and
403s are about access); Data Docs refuse any path that leaves the pipeline's own directory."""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml
from starlette.routing import Route

from api_server import tracebacks
from streamjoin.core.job_files import BatchCounts, PipelineFiles
from streamjoin.core.plans import PROJECT_HOME, pipeline_dag_ids
from streamjoin.spark.heartbeat import Heartbeat

pytestmark = [pytest.mark.airflow]
#: a value for each path parameter of the plugin's routes ({pipeline} is filled in per request)
SAMPLE_PARAMS = {"action": "stop", "path": "index.html"}


def plugin_routes() -> list[tuple[str, str]]:
    """(method, path under the api-server) of every route of the plugin's app, docs and schema included."""
    from streamjoin.airflow.plugin import PREFIX, app

    routes = [(method, PREFIX + r.path) for r in app.routes if isinstance(r, Route) for method in r.methods or ()]
    return sorted((method, path) for method, path in routes if method != "HEAD")


def _url(path: str, pipeline: str) -> str:
    params = {name: value for name, value in SAMPLE_PARAMS.items() if f"{{{name}" in path}
    filled = path.replace("{path:path}", "{path}").format(pipeline=pipeline, **params)
    assert "{" not in filled, f"{path}: give its path parameter a value in SAMPLE_PARAMS"
    return filled


def _pipelines(directory: Path, names: list[str]) -> Path:
    seed = yaml.safe_load((PROJECT_HOME / "include" / "pipelines" / "clicks_per_region.yaml").read_text())
    directory.mkdir()
    for name in names:
        (directory / f"{name}.yaml").write_text(yaml.safe_dump({**seed, "name": name}))
    return directory


def test_routes_need_a_login_and_read_access_to_the_pipeline_dags(
    tmp_path: Path, api_server: Callable[..., Any], request: pytest.FixtureRequest
) -> None:
    suffix = uuid.uuid4().hex[:8]
    secret, public = f"ops_{suffix}", f"shared_{suffix}"
    # one DAG of `secret` belongs to team ops: the viewer (team analytics) may not read it
    owned = {pipeline_dag_ids(secret)[1]: "ops"}
    for name in (secret, public):  # a batch of each, as the job's heartbeat records it
        beat = Heartbeat(PipelineFiles(PROJECT_HOME / "var" / "checkpoints" / name), name, "q", "r")
        beat.batch(3, 12, time.time(), 0.5, {"clicks": {0: 12}}, None, BatchCounts(dead_letters=2, state_bytes=512))
    request.addfinalizer(
        lambda: [shutil.rmtree(PROJECT_HOME / "var" / "checkpoints" / n, True) for n in (secret, public)]
    )
    server = api_server(
        _pipelines(tmp_path / "pipelines", [secret, public]), dag_teams=owned,
        env={"AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT": json.dumps({"conn_type": "streamjoin_kafka"})},  # no lag
    )  # fmt: skip

    docs = PROJECT_HOME / "var" / "data_docs"
    for name in (secret, public):  # a Data Docs page of each: the sample file of the data-docs route
        (docs / name).mkdir(parents=True, exist_ok=True)
        (docs / name / "index.html").write_text(f"<html>docs of {name}</html>")
    request.addfinalizer(lambda: [shutil.rmtree(docs / n, True) for n in (secret, public)])

    routes = plugin_routes()
    assert len(routes) >= 8, routes  # the eight routes of the plugin when this test was written, at least
    for method, path in routes:
        status, body = server.request(method, _url(path, public), form={} if method == "POST" else None)
        assert status == 401, ("anonymous", method, path, status, body[:300])
    assert server.get("/api/v2/dags")[0] == 401  # as Airflow's own API answers

    for method, path in routes:
        status, body = server.request(method, _url(path, secret), "viewer", form={} if method == "POST" else None)
        if "{pipeline}" in path:
            assert status == 403 and "no read access" in body, ("viewer", method, path, status, body[:300])
        else:
            assert status == 200 and secret not in body, ("viewer", method, path, status, body[:300])
    for method, path in routes:
        if method == "GET":  # (the POST route triggers a DAG run: its 200 is the status page test's)
            status, body = server.request(method, _url(path, public), "admin")
            assert status == 200, ("admin", method, path, status, body[:300])

    status, body = server.get("/streamjoin/api/jobs", "admin")
    assert status == 200 and {row["pipeline"] for row in json.loads(body)} == {secret, public}
    assert server.get(f"/streamjoin/api/jobs/{secret}", "admin")[0] == 200
    status, body = server.get("/streamjoin/api/jobs", "viewer")
    assert status == 200 and [row["pipeline"] for row in json.loads(body)] == [public]
    status, body = server.get("/streamjoin/jobs", "viewer")
    assert status == 200 and public in body and secret not in body
    assert server.get(f"/streamjoin/api/jobs/{public}", "viewer")[0] == 200
    status, body = server.get(f"/streamjoin/data-docs/{public}/index.html", "viewer")
    stylesheet = '<link rel="stylesheet" href="/streamjoin/static/data-docs.css">'  # served in place of a CDN's
    assert status == 200 and body == f"{stylesheet}<html>docs of {public}</html>"

    # Data Docs: nothing outside the pipeline's own directory, however the path is spelled; through a
    # readable pipeline's route, the viewer must not reach another pipeline's docs or the project's files
    escapes = [
        f"../{secret}/index.html", f"..%2F{secret}%2Findex.html", f"%2E%2E/{secret}/index.html",
        "../../../pyproject.toml", "..%2F..%2F..%2Fpyproject.toml", "%2Fetc%2Fpasswd", "/etc/passwd",
        f"sub/../../{secret}/index.html", ".%2E/.%2E/.%2E/pyproject.toml",
    ]  # fmt: skip
    for escape in escapes:
        for user in ("viewer", "admin"):
            status, body = server.get(f"/streamjoin/data-docs/{public}/{escape}", user)
            assert status in (400, 403, 404), (user, escape, status, body[:300])
            assert f"docs of {secret}" not in body and "[project]" not in body and "root:" not in body, escape

    # Prometheus text: the pipelines the user may read
    status, body = server.get("/streamjoin/metrics", "admin")
    assert status == 200 and f'streamjoin_batch_id{{pipeline="{secret}"}} 3.0' in body, body
    assert f'streamjoin_dead_letters_total{{pipeline="{public}"}} 2.0' in body
    assert f'streamjoin_state_bytes{{pipeline="{public}"}} 512.0' in body
    status, body = server.get("/streamjoin/metrics", "viewer")
    assert status == 200 and f'streamjoin_batch_id{{pipeline="{public}"}} 3.0' in body and secret not in body

    # hostile pipeline names are refused before any lookup
    assert server.get("/streamjoin/api/jobs/nope_" + suffix, "admin")[0] == 404
    for name in ["$(touch x)", "a;rm -rf", "..", "x" * 5000, "réglé", "p\x00"]:
        status, _ = server.get("/streamjoin/api/jobs/" + quote(name, safe=""), "admin")
        assert status in (404, 422), (name, status)
    ours, airflows = tracebacks(server.log)
    assert not ours, "\n\n".join(ours)  # the plugin's routes never fail
    print("\n\n".join(["Airflow's own tracebacks in the api-server's log:", *airflows]) if airflows else "")
