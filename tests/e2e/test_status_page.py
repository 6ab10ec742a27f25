"""The "Stream jobs" pages in a real browser, inside Airflow's own UI: a real Airflow (api-server, scheduler with
the LocalExecutor, triggerer; started here on a copy of the test metadata DB with the DAGs serialized into it,
users ``admin`` and ``viewer``), headless Debian Chromium driven by Playwright. The pipeline's DAG is unpaused
in the UI and its owner task starts the one job that serves every check: its history file; a logged-out
browser sent to Airflow's login page, then logged in through it; the list and
the pipeline's page in Airflow's frame (charts with the job's points, the last check); each link clicked in the
frame opening its target (Airflow's pages in place of the UI, the Spark UI in a tab, Data Docs in the frame);
the actions (real DAG runs in the metadata DB, read back through Airflow's REST API) and a past day triggered
from the reprocess DAG's own form; a viewer's 403, a form without its CSRF token; the list reloading itself.
The Stop run is executed (the list then shows the job stopped); the reprocess runs find no input on their
past days and skip them (no Spark). Screenshots go to var/screenshots/ and are checked (PNG, size,
colours of the charts)."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from test_supervision import SCREENSHOTS, output_coordinates, produce_clicks, provision, wait_for, write_spec

from api_server import ApiServer, copy_test_db, start_api_server, stop_api_servers
from streamjoin.airflow.operators.supervise import StopStreamJoinOperator, pipeline_files
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.spec import load_spec
from streamjoin.quality.results import CheckResult, ExpectationOutcome, write_check_result

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.airflow, pytest.mark.e2e]
CHROMIUM = Path("/usr/bin/chromium")  # Debian's, installed by `make browser`
# as root, in a closed network: no sandbox, no background connections (see scripts/install-browser.sh)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                 "--disable-background-networking", "--disable-component-update"]  # fmt: skip
INPUT_COLOUR = (0x1F, 0x77, 0xB4)  # the input-rate line (streamjoin.airflow.status_page.COLORS)

#: serialize the DAGs the page links to and triggers (as the dag-processor would); the pipeline's own DAG is
#: paused until the test unpauses it
SYNC_DAGS = """
import sys
from pathlib import Path
from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
from airflow.models.dagbundle import DagBundleModel
from airflow.utils.session import create_session

folder = Path(sys.argv[1])
with create_session() as session:
    if session.get(DagBundleModel, "dags-folder") is None:
        session.add(DagBundleModel(name="dags-folder"))
for name in ("streamjoin_stop_redeploy.py", "streamjoin_reprocess.py", "streamjoin_pipelines.py"):
    bag = DagBag(dag_folder=str(folder / name), bundle_path=folder, bundle_name="dags-folder")
    assert not bag.import_errors, bag.import_errors
    sync_bag_to_db(bag, "dags-folder", None)
"""


@pytest.fixture
def api_server(tmp_path: Path, kafka_bootstrap: str) -> Iterator[Callable[[Path], ApiServer]]:
    """``start(pipelines_dir)`` -> an api-server whose plugin lists those pipelines, with a scheduler and a
    triggerer; users ``admin`` (ADMIN) and ``viewer`` (VIEWER: may read, not trigger)."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(pipelines: Path) -> ApiServer:
        home = tmp_path / "airflow"
        home.mkdir()
        copy_test_db(home)
        passwords = {"admin": secrets.token_urlsafe(12), "viewer": secrets.token_urlsafe(12)}
        (home / "passwords.json").write_text(json.dumps(passwords))
        host, kafka_port = kafka_bootstrap.split(":")
        env = {
            **os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:ADMIN,viewer:VIEWER",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
            "STREAMJOIN_PIPELINES_DIR": str(pipelines), "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4", "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
            "AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT": json.dumps(
                {"conn_type": "streamjoin_kafka", "host": host, "port": int(kafka_port)}
            ),
        }  # fmt: skip
        synced = subprocess.run(
            [sys.executable, "-c", SYNC_DAGS, str(PROJECT_HOME / "dags")],
            env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert synced.returncode == 0, synced.stderr[-3000:]
        url, log = start_api_server(env, tmp_path, procs)
        # a scheduler (LocalExecutor) and a triggerer run the pipeline's DAG once it is unpaused; its tasks
        # report to this api-server's execution API, with tokens signed by the same secret
        workers = {**env, "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{url}/execution/"}
        for component in ("scheduler", "triggerer"):
            with (tmp_path / f"{component}.log").open("wb") as out:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "airflow", component], env=workers, stdout=out, stderr=subprocess.STDOUT,
                    cwd=PROJECT_HOME, start_new_session=True,
                ))  # fmt: skip
        return ApiServer(url, passwords, log)

    yield start
    stop_api_servers(procs)


def check_screenshot(path: Path, min_width: int, min_height: int, colour: tuple[int, int, int] | None = None) -> None:
    """A PNG of at least that size, not blank (many colours), and with ``colour`` (a chart's line) in it."""
    from PIL import Image

    with Image.open(path) as image:
        assert image.format == "PNG" and image.width >= min_width and image.height >= min_height, image.size
        colours = image.convert("RGB").getcolors(maxcolors=1 << 24) or []
    assert len(colours) > 30, f"{path} looks blank: {len(colours)} colours"
    if colour is not None:
        near = sum(n for n, c in colours if sum(abs(a - b) for a, b in zip(c, colour, strict=True)) < 30)
        assert near > 100, f"{path}: {near} pixels of the chart colour {colour}"


def log_in(page: Any, server: ApiServer, url: str) -> None:
    """Open ``url`` logged out: Airflow's login page; log in as admin there and land on ``url``."""
    page.goto(url)
    page.wait_for_url(re.compile(r".*/auth/login\?next=.*"), timeout=60_000)
    page.locator("input[name=username]").fill("admin")
    page.locator("input[name=password]").fill(server.passwords["admin"])
    page.locator("button[type=submit]").click()
    page.wait_for_url(url, timeout=60_000)


def dag(server: ApiServer, dag_id: str) -> dict[str, Any]:
    status, body = server.get(f"/api/v2/dags/{dag_id}", "admin")
    assert status == 200, body
    return dict(json.loads(body))


def runs_by_id(server: ApiServer, dag_id: str) -> list[tuple[str, str]]:
    """(run id, state) of the DAG's runs."""
    status, body = server.get(f"/api/v2/dags/{dag_id}/dagRuns", "admin")
    assert status == 200, body
    return [(run["dag_run_id"], run["state"]) for run in json.loads(body)["dag_runs"]]


def runs(server: ApiServer, dag_id: str, pipeline: str) -> list[dict[str, Any]]:
    """The DAG's runs for ``pipeline`` as Airflow's REST API lists them (the metadata DB, which earlier tests'
    runs of the same DAG share)."""
    status, body = server.get(f"/api/v2/dags/{dag_id}/dagRuns", "admin")
    assert status == 200, body
    return [run for run in json.loads(body)["dag_runs"] if (run.get("conf") or {}).get("pipeline") == pipeline]


def test_stream_jobs_pages_show_a_live_job_and_trigger_airflow_in_chromium(
    kafka_bootstrap: str,
    topic_factory: Callable[[str], str],
    tmp_path: Path,
    api_server: Callable[[Path], ApiServer],
) -> None:
    from playwright.sync_api import sync_playwright

    from streamjoin.airflow.dag_factory import DATA_DOCS

    assert CHROMIUM.exists(), "Debian's chromium is missing: run `make browser`"
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    name = f"page_{topic_factory('n').rsplit('-', 1)[1]}"
    spec_path, topics = write_spec(pipelines / f"{name}.yaml", name, topic_factory, max_offsets_per_trigger=60)
    spec = load_spec(spec_path)
    files = pipeline_files(spec)
    provision(kafka_bootstrap, spec_path)
    produce_clicks(kafka_bootstrap, topics["clicks"], 0, 120)
    docs = PROJECT_HOME / DATA_DOCS / name

    def batches() -> list[dict[str, Any]]:
        return [e for e in files.history.read() if e.get("batch_id") is not None]

    yesterday = (datetime.now(UTC).date() - timedelta(days=1)).isoformat()
    try:
        server = api_server(pipelines)
        with sync_playwright() as pw:  # unpause the pipeline in Airflow's UI: its owner task starts the job
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            log_in(page, server, f"{server.url}/dags/streamjoin_{name}")
            page.locator("[data-testid=toggle-pause]").first.click(timeout=60_000)
            wait_for(lambda: not dag(server, f"streamjoin_{name}")["is_paused"], 60, "the pipeline's DAG unpaused")
            browser.close()
        wait_for(lambda: files.driver_alive(), 300, "the job, started by the owner task of the unpaused DAG")
        ((owner_run, _),) = runs_by_id(server, f"streamjoin_{name}")  # the run the scheduler started
        wait_for(lambda: sum(e["input_records"] for e in batches()) >= 120, 180, "the job's first 120 records")
        produce_clicks(kafka_bootstrap, topics["clicks"], 120, 30)
        wait_for(lambda: sum(e["input_records"] for e in batches()) >= 150, 90, "the job's batch of 30 more")
        assert len(output_coordinates(spec_path)) == 150

        # the history the job wrote: one entry per committed batch, read back
        done = batches()
        assert [e["batch_id"] for e in done] == list(range(len(done))) and len(done) >= 3, done
        assert sum(e["input_records"] for e in done) == 150 and done[-1]["lag"] == 0
        assert done[0]["lag"] == 120 - done[0]["input_records"] > 0  # max_offsets_per_trigger 60: more waited
        assert all(e["duration_ms"] > 0 and e["processed_rps"] > 0 for e in done)
        assert len({e["run_id"] for e in done}) == 1
        spark_ui = (files.status() or {}).get("spark_ui")
        assert spark_ui and spark_ui.startswith("http://"), spark_ui
        with urllib.request.urlopen(spark_ui, timeout=30) as response:  # the driver's Spark UI answers
            assert response.status == 200

        # the last quality check of the pipeline, with its Data Docs where the check writes them
        (docs / "enriched" / yesterday / "run1").mkdir(parents=True)
        index = docs / "enriched" / yesterday / "run1" / "index.html"
        index.write_text(f"<html><body><h1 id='docs'>Data Docs of {name}</h1></body></html>")
        check = CheckResult.from_outcomes(
            pipeline=name, target="enriched", day=yesterday, data_docs_url=index.as_uri(),
            expectations=[ExpectationOutcome("rows", "expect_table_row_count_to_be_between", True, 150, True)],
        )  # fmt: skip
        assert spec.output.files is not None
        write_check_result(check, PROJECT_HOME / spec.output.files.path / "daily" / f"date={yesterday}")

        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shots = {n: SCREENSHOTS / f"{n}.png" for n in ("stream-jobs", "stream-job-detail", "airflow-browse-menu")}
        framed = f"{server.url}/plugin/stream-jobs/streamjoin/jobs"  # the Browse menu's page inside Airflow's UI
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            page = context.new_page()
            # logged out, the plugin's own page sends a browser to Airflow's login page, and back after it
            page.goto(f"{server.url}/streamjoin/jobs/{name}?refresh=0")
            page.wait_for_url(re.compile(r".*/auth/login\?next=.*"), timeout=60_000)
            log_in(page, server, framed + "?refresh=0")  # the same for Airflow's UI: its login page, then the frame
            sandbox = page.locator("iframe").get_attribute("sandbox") or ""
            # why the page needs its script: Airflow's frame may not navigate the top page or open a tab itself
            assert "allow-same-origin" in sandbox and "allow-top-navigation" not in sandbox, sandbox
            assert "allow-popups" not in sandbox, sandbox
            frame = page.frame_locator("iframe")
            row = frame.locator(f"tr[data-pipeline='{name}']")
            assert row.locator("td.state").inner_text(timeout=60_000) == "healthy"
            assert f"{topics['clicks']}: 0" in row.locator("td.lag").inner_text()
            rate = row.locator("td.rate").inner_text()
            assert re.fullmatch(r"[0-9.]+ rows/s over the last 5 min \([0-9,]+ rows, \d+ batch(es)?\)", rate), rate
            assert int(row.locator("td.trend svg").get_attribute("data-points") or 0) >= 3
            assert "passed" in row.locator("td.quality-cell").inner_text()
            page.screenshot(path=str(shots["stream-jobs"]), full_page=True)

            detail = f"{framed}/{name}?refresh=0"
            row.locator("a.detail").click()
            page.wait_for_url(f"{framed}/{name}", timeout=60_000)  # Airflow's address bar follows the frame
            page.goto(detail)
            charts = {c: frame.locator(f"svg.chart[data-chart='{c}']") for c in ("rates", "lag", "duration", "state")}
            assert int(charts["rates"].locator("g[data-series='input']").get_attribute("data-points") or 0) >= 3
            for key in ("rates", "lag", "duration"):  # a point (a dot) per batch at least
                assert int(charts[key].get_attribute("data-points") or 0) >= len(done), key
                assert charts[key].locator("circle").count() >= len(done), key
            assert int(charts["state"].get_attribute("data-points") or 0) >= 1
            assert "healthy" in frame.locator("#summary-state").inner_text()
            assert "passed" in frame.locator("#summary-quality").inner_text()
            airflow_links = {
                "dag-runs": (f"/dags/streamjoin_{name}/runs", f"streamjoin_{name}"),
                "task-logs": (f"/dags/streamjoin_{name}/runs/{quote(owner_run, safe='')}/tasks/own_job", "own_job"),
                "backfill-runs": (f"/dags/streamjoin_backfill_{name}/runs", f"streamjoin_backfill_{name}"),
                "action-runs": ("/dags/streamjoin_stop_redeploy/runs", "streamjoin_stop_redeploy"),
                "reprocess-runs": ("/dags/streamjoin_reprocess/runs", "streamjoin_reprocess"),
            }
            for key, (href, _) in airflow_links.items():
                assert frame.locator(f"#link-{key}").get_attribute("href") == href, key
            assert frame.locator("#link-spark-ui").get_attribute("href") == spark_ui
            page.set_viewport_size({"width": 1400, "height": 1900})  # the frame grows with Airflow's page
            page.screenshot(path=str(shots["stream-job-detail"]))
            page.set_viewport_size({"width": 1400, "height": 900})

            # each link, clicked inside Airflow's frame, opens its target: Airflow's pages in place of the UI
            for key, (href, shows) in airflow_links.items():
                frame.locator(f"#link-{key}").click()
                page.wait_for_url(server.url + href, timeout=60_000)
                page.get_by_text(shows).first.wait_for(timeout=60_000)  # Airflow's page for it rendered
                page.goto(detail)
            with context.expect_page(timeout=60_000) as opened:  # the Spark UI (no framing): a tab of its own
                frame.locator("#link-spark-ui").click()
            opened.value.wait_for_load_state()
            assert opened.value.url.startswith(spark_ui) and "Spark" in opened.value.title(), opened.value.url
            opened.value.close()
            frame.locator("#link-data-docs").click()  # served by the plugin: in the frame
            assert frame.locator("#docs").inner_text(timeout=60_000) == f"Data Docs of {name}"
            page.wait_for_url(re.compile(r".*/plugin/stream-jobs/streamjoin/data-docs/.*"), timeout=60_000)
            page.goto(detail)

            # actions: each creates a DAG run in Airflow's DB with the pipeline in its conf
            frame.locator("#reprocess-day").fill(yesterday)
            frame.locator("#action-reprocess").click()
            notice = frame.locator("#triggered")
            notice.wait_for(timeout=60_000)
            (reprocess,) = runs(server, "streamjoin_reprocess", name)
            assert reprocess["conf"] == {"pipeline": name, "start": yesterday, "end": yesterday, "overwrite": True,
                                         "dry_run": False}  # fmt: skip
            assert reprocess["dag_run_id"] in notice.inner_text() and reprocess["triggering_user_name"] == "admin"
            frame.locator("#triggered-run").click()  # the run it created, in Airflow's UI
            page.wait_for_url(f"{server.url}/dags/streamjoin_reprocess/runs/{quote(reprocess['dag_run_id'], safe='')}",
                              timeout=60_000)  # fmt: skip
            page.goto(detail)
            frame.locator("#action-stop").click()
            frame.locator("#triggered", has_text="streamjoin_stop_redeploy").wait_for(timeout=60_000)
            (stop,) = runs(server, "streamjoin_stop_redeploy", name)
            assert stop["conf"] == {"pipeline": name, "redeploy": False}

            # a viewer may read the page but not trigger: 403, and no run; nor does a form without its token
            assert server.get(f"/streamjoin/jobs/{name}", "viewer")[0] == 200
            status, body = server.request("POST", f"/streamjoin/jobs/{name}/actions/redeploy", "viewer", form={})
            assert status == 403 and "no permission to trigger DAG streamjoin_stop_redeploy" in body, body
            cookie = {"Cookie": f"_token={server.token('admin')}"}
            for headers in (cookie, {**cookie, "Authorization": "Basic YWRtaW46eA=="}):  # a browser may add Basic
                status, body = server.request("POST", f"/streamjoin/jobs/{name}/actions/stop", None, {}, headers)
                assert status == 403 and "reload the page" in body, body
            dags = ("streamjoin_stop_redeploy", "streamjoin_reprocess")
            assert [len(runs(server, dag, name)) for dag in dags] == [1, 1]  # nothing more was triggered

            # a past day from the reprocess DAG's own trigger form in Airflow's UI (its Params: the pipeline,
            # yesterday by default)
            past = (datetime.now(UTC).date() - timedelta(days=2)).isoformat()
            page.goto(f"{server.url}/dags/streamjoin_reprocess")
            page.get_by_role("button", name="Trigger").first.click(timeout=60_000)
            form = page.get_by_role("dialog")
            assert form.locator("input[name=element_pipeline]").input_value(timeout=60_000) == name
            assert form.locator("input[name=element_start]").input_value() == yesterday
            form.locator("input[name=element_start]").fill(past)
            form.locator("input[name=element_end]").fill(past)
            form.get_by_role("button", name="Trigger").click()
            wait_for(lambda: len(runs(server, "streamjoin_reprocess", name)) == 2, 60, "the run of the trigger form")
            (from_form,) = [r for r in runs(server, "streamjoin_reprocess", name) if r["conf"]["start"] == past]
            assert from_form["conf"] == {"pipeline": name, "start": past, "end": past, "overwrite": True,
                                         "force": False, "dry_run": False}, from_form["conf"]  # fmt: skip
            assert from_form["triggering_user_name"] == "admin"

            page.goto(f"{server.url}/")  # the Airflow UI links the page from its Browse menu
            page.get_by_role("button", name="Browse").click(timeout=60_000)
            page.get_by_role("menuitem", name="Stream jobs").wait_for(timeout=30_000)
            page.screenshot(path=str(shots["airflow-browse-menu"]))

            page.goto(f"{framed}?refresh=2")  # the list reloads itself: the job the Stop run stopped shows so
            state = frame.locator(f"tr[data-pipeline='{name}'] td.state")
            state.wait_for(timeout=60_000)
            frame.locator("body").evaluate("body => body.setAttribute('data-seen', 'before the reload')")
            frame.locator("body:not([data-seen])").wait_for(timeout=30_000)
            wait_for(lambda: dict(runs_by_id(server, "streamjoin_stop_redeploy"))[stop["dag_run_id"]] == "success",
                     300, "the Stop run, executed by the scheduler")  # fmt: skip
            frame.locator(f"tr[data-pipeline='{name}'] td.state", has_text="stopped").wait_for(timeout=60_000)
            assert not files.driver_alive()
            browser.close()
        check_screenshot(shots["stream-jobs"], 1400, 200)
        check_screenshot(shots["stream-job-detail"], 1400, 1900, INPUT_COLOUR)
        check_screenshot(shots["airflow-browse-menu"], 1400, 900)
        with server.log.open() as log:
            assert "Traceback" not in log.read()
    finally:
        StopStreamJoinOperator(task_id="stop", spec_path=str(spec_path), timeout=30).execute({})
        shutil.rmtree(docs, ignore_errors=True)
    print("screenshots: " + ", ".join(str(p) for p in shots.values()))
