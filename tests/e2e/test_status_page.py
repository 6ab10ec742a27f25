"""The "Stream jobs" page in a real browser: a real job launched by the supervisor, a real Airflow
api-server (started here, on the test metadata DB), headless Debian Chromium driven by Playwright.
Screenshots go to var/screenshots/."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_supervision import SCREENSHOTS, output_coordinates, produce_clicks, provision, wait_for, write_spec

from api_server import start_api_server, stop_api_servers
from streamjoin.airflow.operators.supervise import StopStreamJoinOperator, SuperviseStreamJoinOperator
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.supervision import Policy

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.airflow]
CHROMIUM = Path("/usr/bin/chromium")  # Debian's, installed by `make browser`
# as root, in a closed network: no sandbox, no background connections (see scripts/install-browser.sh)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                 "--disable-background-networking", "--disable-component-update"]  # fmt: skip


@pytest.fixture
def api_server(tmp_path: Path, kafka_bootstrap: str) -> Iterator[Callable[[Path], str]]:
    """``start(pipelines_dir)`` -> base URL of an Airflow api-server whose plugin lists those pipelines."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(pipelines: Path) -> str:
        home = PROJECT_HOME / "var" / "test-airflow"
        host, kafka_port = kafka_bootstrap.split(":")
        env = {
            **os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True", "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "STREAMJOIN_PIPELINES_DIR": str(pipelines),
            "AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT": json.dumps(
                {"conn_type": "streamjoin_kafka", "host": host, "port": int(kafka_port)}
            ),
        }  # fmt: skip
        return start_api_server(env, tmp_path, procs)[0]

    yield start
    stop_api_servers(procs)


def test_stream_jobs_page_shows_a_live_job_in_chromium(
    kafka_bootstrap: str, topic_factory: Callable[[str], str], tmp_path: Path, api_server: Callable[[Path], str]
) -> None:
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), "Debian's chromium is missing: run `make browser`"
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    name = f"page_{topic_factory('n').rsplit('-', 1)[1]}"
    spec_path, topics = write_spec(pipelines / f"{name}.yaml", name, topic_factory)
    provision(kafka_bootstrap, spec_path)
    produce_clicks(kafka_bootstrap, topics["clicks"], 0, 120)
    supervise = SuperviseStreamJoinOperator(task_id="supervise", spec_path=str(spec_path), policy=Policy())
    supervise.execute({})  # launches the job
    try:
        wait_for(lambda: len(output_coordinates(spec_path)) >= 120, 150, "the job's first output")
        wait_for(lambda: supervise.execute({})["state"] == "healthy", 60, "a healthy report")
        url = api_server(pipelines)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 500})
            page.goto(f"{url}/auth/token/login")  # all-admins mode: sets the token cookie the plugin's routes need
            page.goto(f"{url}/streamjoin/jobs")
            row = page.locator(f"tr[data-pipeline='{name}']")
            assert row.locator("td.state").inner_text() == "healthy"
            assert "(batch " in row.locator("td.last-batch").inner_text()
            assert f"{topics['clicks']}: 0" in row.locator("td.lag").inner_text()
            page.screenshot(path=str(SCREENSHOTS / "stream-jobs.png"), full_page=True)

            page.goto(f"{url}/")  # the Airflow UI links the page from its Browse menu
            page.get_by_role("button", name="Browse").click(timeout=60_000)
            link = page.get_by_role("menuitem", name="Stream jobs")
            link.wait_for(timeout=30_000)
            page.screenshot(path=str(SCREENSHOTS / "airflow-browse-menu.png"))

            StopStreamJoinOperator(task_id="stop", spec_path=str(spec_path), timeout=60).execute({})
            page.goto(f"{url}/streamjoin/jobs")
            assert page.locator(f"tr[data-pipeline='{name}'] td.state").inner_text() == "stopped"
            browser.close()
    finally:
        StopStreamJoinOperator(task_id="stop", spec_path=str(spec_path), timeout=30).execute({})
    print(f"screenshots: {SCREENSHOTS / 'stream-jobs.png'}, {SCREENSHOTS / 'airflow-browse-menu.png'}")
