"""Every route of the Stream jobs plugin behind Airflow's login and DAG permissions, on a real api-server with
the simple auth manager: anonymous -> 401, a viewer without read access to a pipeline's DAGs -> 403 and none of
its rows (and metrics), the admin sees everything."""

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

from streamjoin.core.job_files import PipelineFiles
from streamjoin.core.plans import PROJECT_HOME, pipeline_dag_ids
from streamjoin.spark.heartbeat import Heartbeat

pytestmark = [pytest.mark.airflow]
ROUTES = ["/streamjoin/jobs", "/streamjoin/api/jobs", "/streamjoin/api/jobs/{name}", "/streamjoin/metrics"]


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
        beat.batch(3, 12, time.time(), 0.5, {"clicks": {0: 12}}, None, {"dead_lettered": 2, "state_bytes": 512})
    request.addfinalizer(
        lambda: [shutil.rmtree(PROJECT_HOME / "var" / "checkpoints" / n, True) for n in (secret, public)]
    )
    server = api_server(
        _pipelines(tmp_path / "pipelines", [secret, public]), dag_teams=owned,
        env={"AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT": json.dumps({"conn_type": "streamjoin_kafka"})},  # no lag
    )  # fmt: skip

    for route in ROUTES:
        status, body = server.get(route.format(name=public))
        assert status == 401, (route, status, body)
    assert server.get("/api/v2/dags")[0] == 401  # as Airflow's own API answers

    status, body = server.get("/streamjoin/api/jobs", "admin")
    assert status == 200 and {row["pipeline"] for row in json.loads(body)} == {secret, public}
    assert server.get(f"/streamjoin/api/jobs/{secret}", "admin")[0] == 200

    status, body = server.get("/streamjoin/api/jobs", "viewer")
    assert status == 200 and [row["pipeline"] for row in json.loads(body)] == [public]
    status, body = server.get("/streamjoin/jobs", "viewer")
    assert status == 200 and public in body and secret not in body
    status, body = server.get(f"/streamjoin/api/jobs/{secret}", "viewer")
    assert status == 403 and secret in body and "no read access" in body
    assert server.get(f"/streamjoin/api/jobs/{public}", "viewer")[0] == 200

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
    with server.log.open() as log:
        assert "Traceback" not in log.read()
