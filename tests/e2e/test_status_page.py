"""The "Stream jobs" pages in a real browser, inside Airflow's own UI: a real Airflow (api-server, scheduler with
the LocalExecutor, triggerer; started here on a copy of the test metadata DB with the DAGs serialized into it,
users ``admin`` and ``viewer``), headless Debian Chromium driven by Playwright. First the two past days the
scheduler executes are started from the UI (their Spark runs and checks are the test's longest waits: they run
while the job starts): the bad day's backfill, then the good day from the reprocess DAG's own trigger form.
Then the pipeline's DAG is unpaused in the UI and its owner task starts the one job that serves every check:
its history file; while the past days run, a logged-out browser sent to Airflow's login page, then logged in
through it; the list and the pipeline's page in Airflow's frame (charts with the job's points, the last check);
each link clicked in the frame opening its target (Airflow's pages in place of the UI, the Spark UI in a tab,
Data Docs in the frame); the actions (real DAG runs in the metadata DB, read back through Airflow's REST API);
a viewer's 403, a form without its CSRF token; the list reloading itself. The Stop run is executed (the list
then shows the job stopped); the page's reprocess of yesterday finds no input and skips. The pipeline has a
quality suite (match rate >= 0.85) and ``alerts:`` naming a webhook and an SMTP server on loopback; its topics
hold a good and a bad past day before today's clicks. Executed by the scheduler: the good day from the
reprocess DAG's trigger form (checked, published, its asset event); the bad day's backfill run (the backfill
DAG unpaused in its page, the run created by POST /api/v2/backfills, the call the UI's Backfill form makes)
whose check fails (both sinks alerted, the day quarantined, no asset event); then "Reprocess" of the published
good day from the page under a stricter suite (a reversed range refused on the page and a day not over by the
form, no run; a second press while it runs answered "already running: run X"): its check fails, the day keeps
its published files, alerted; both pages then show the day FAILED with "the published version is from run X"
and its Data Docs (opened in the frame), the pipeline page the bad day quarantined. Every link in the alerts is
under Airflow's ``[api] base_url`` and opens (logged out: the page or Airflow's login; logged in: 200). The runs
carry notes naming their days. The runs' task logs hold no error line but the real ones, no librdkafka or
deprecation noise; the triggerer's none at all. Screenshots go to var/screenshots/ and are checked (PNG, size,
colours of the charts)."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml
from test_supervision import SCREENSHOTS, produce_clicks, provision, wait_for, write_spec

from api_server import ApiServer, copy_test_db, start_api_server, stop_api_servers, tracebacks
from streamjoin.airflow.operators.supervise import StopStreamJoinOperator, pipeline_files
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.spec import load_spec
from streamjoin.localdev.spark_cluster import free_port
from streamjoin.quality.results import RECHECK_FILE, RESULT_FILE, CheckResult, ExpectationOutcome, write_check_result

sys.path.insert(0, str(PROJECT_HOME / "tests" / "quality"))
from quality_sinks import HttpSink, SmtpSink, http_sink, smtp_sink

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
for name in ("streamjoin_stop_redeploy.py", "streamjoin_reprocess.py", "streamjoin_pipelines.py",
             "streamjoin_backfill.py"):
    bag = DagBag(dag_folder=str(folder / name), bundle_path=folder, bundle_name="dags-folder")
    assert not bag.import_errors, bag.import_errors
    sync_bag_to_db(bag, "dags-folder", None)
"""


@pytest.fixture
def sinks() -> Iterator[tuple[HttpSink, SmtpSink]]:
    """The pipeline's alert destinations: a webhook and an SMTP server on loopback."""
    with http_sink() as http, smtp_sink() as smtp:
        yield http, smtp


@pytest.fixture
def api_server(tmp_path: Path, kafka_bootstrap: str) -> Iterator[Callable[[Path], ApiServer]]:
    """``start(pipelines_dir)`` -> an api-server whose plugin lists those pipelines, with a scheduler and a
    triggerer; users ``admin`` (ADMIN) and ``viewer`` (VIEWER: may read, not trigger)."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(pipelines: Path, extra_env: dict[str, str] | None = None) -> ApiServer:
        home = tmp_path / "airflow"
        home.mkdir()
        copy_test_db(home)
        passwords = {"admin": secrets.token_urlsafe(12), "viewer": secrets.token_urlsafe(12)}
        (home / "passwords.json").write_text(json.dumps(passwords))
        host, kafka_port = kafka_bootstrap.split(":")
        port = free_port()  # Airflow's [api] base_url: what links in alerts and logs are built from
        env = {
            **os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:ADMIN,viewer:VIEWER",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
            "STREAMJOIN_PIPELINES_DIR": str(pipelines), "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
            "AIRFLOW__CORE__PARALLELISM": "4", "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
            # the copied DB may hold these DAGs serialized seconds ago by an earlier test (other pipelines in the
            # reprocess form's enum): Airflow skips a write within this interval (30 s by default)
            "AIRFLOW__CORE__MIN_SERIALIZED_DAG_UPDATE_INTERVAL": "0",
            "AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT": json.dumps(
                {"conn_type": "streamjoin_kafka", "host": host, "port": int(kafka_port)}
            ),
            **(extra_env or {}),
        }  # fmt: skip
        synced = subprocess.run(
            [sys.executable, "-c", SYNC_DAGS, str(PROJECT_HOME / "dags")],
            env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert synced.returncode == 0, synced.stderr[-3000:]
        url, log = start_api_server(env, tmp_path, procs, port)
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


USERS = [f"u{n}" for n in range(12)]  # produce_clicks's keys: every user has a region from before the past days
STRANGERS = [f"w{n}" for n in range(12)]  # the bad day's users: 2 of the 12 have a region


def with_quality_and_alerts(spec_path: Path, suites: Path) -> None:
    """Parquet files (what the check reads), a suite wanting a match rate of 0.85, ``alerts:`` naming the
    loopback sinks' connections (``AIRFLOW_CONN_PAGE_WEBHOOK``, ``AIRFLOW_CONN_PAGE_SMTP``)."""
    data = yaml.safe_load(spec_path.read_text())
    suites.mkdir(parents=True, exist_ok=True)
    suite = suites / f"{data['name']}.yaml"
    suite.write_text(yaml.safe_dump({"pipeline": data["name"], "enriched": {"match_rate_min": 0.85}}))
    data["output"]["files"]["format"] = "parquet"
    data["quality"] = {"suite": str(suite)}
    data["alerts"] = {"webhook_conn_id": "page_webhook", "smtp_conn_id": "page_smtp", "to": ["oncall@example.org"]}
    spec_path.write_text(yaml.safe_dump(data, sort_keys=False))


def produce_past_days(bootstrap: str, spec: Any, good: date, bad: date) -> tuple[int, int]:
    """Before the job starts (the topics then hold them in time order, as a stream does): regions of
    ``USERS`` and of 2 ``STRANGERS`` the day before ``good``; a click of a user every hour of ``good`` (match
    rate 1); a click of each stranger in ``bad`` (match rate 2/12, the suite wants 0.85); a click of every
    user two hours after ``bad`` (every partition past the day's end + 1 h lateness). Returns (records,
    clicks)."""
    from streamjoin.core.backfill import DAY_MS, day_start_ms
    from streamjoin.core.codec import encode
    from streamjoin.core.partitioner import partition_for
    from streamjoin.core.spec import Format
    from streamjoin.kafka.clients import produce_records

    assert {partition_for(u.encode(), spec.kafka.partitions) for u in USERS} == set(range(spec.kafka.partitions))
    before = day_start_ms(good) - 60_000
    rows = [(spec.right.topic, u.encode(), encode("europe", Format.STRING), before, [])
            for u in USERS + STRANGERS[:2]]  # fmt: skip
    clicks = [(u, day_start_ms(good) + n * 3_600_000) for n, u in enumerate(USERS * 2)]
    clicks += [(u, day_start_ms(bad) + n * 7_200_000) for n, u in enumerate(STRANGERS)]
    clicks += [(u, day_start_ms(bad) + DAY_MS + 7_200_000) for u in USERS]
    rows += [(spec.left.topic, u.encode(), encode(1, Format.LONG), ts, []) for u, ts in clicks]
    produce_records(bootstrap, rows)
    return len(rows), len(clicks)


def stream_coordinates(spec: Any) -> list[tuple[int, int]]:
    """(src_partition, src_offset) of every row in the job's stream output (Parquet)."""
    import pyarrow.parquet as pq

    rows = []
    for part in (PROJECT_HOME / spec.output.files.path / "stream").glob("batch_id=*/date=*/*.parquet"):
        table = pq.read_table(part, columns=["src_partition", "src_offset"]).to_pydict()
        rows += [(int(p), int(o)) for p, o in zip(table["src_partition"], table["src_offset"], strict=True)]
    return rows


def day_files(day: Path) -> dict[str, str]:
    """The day's data files (not its markers) and a digest of each: what consumers read."""
    import hashlib

    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(day.iterdir())
            if p.is_file() and not p.name.startswith(("_", "."))}  # fmt: skip


def tasks(server: ApiServer, dag_id: str, run_id: str) -> dict[str, str | None]:
    """``task_id[map_index]`` -> state of a run's task instances, from Airflow's REST API."""
    status, body = server.get(f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances", "admin")
    assert status == 200, body
    return {f"{t['task_id']}[{t['map_index']}]": t["state"] for t in json.loads(body)["task_instances"]}


def ended(server: ApiServer, dag_id: str, run_id: str) -> str | None:
    """The run's state once it ended (success or failed), else None."""
    state = dict(runs_by_id(server, dag_id)).get(run_id)
    return state if state in ("success", "failed") else None


def day_events(server: ApiServer, pipeline: str) -> list[tuple[str | None, str | None]]:
    """(source DAG, day) of the asset events of ``pipeline``'s published days, from Airflow's REST API."""
    status, body = server.get("/api/v2/assets/events?limit=100", "admin")
    assert status == 200, body
    return sorted((e["source_dag_id"], (e.get("extra") or {}).get("day")) for e in json.loads(body)["asset_events"]
                  if e.get("name") == f"streamjoin_{pipeline}_daily")  # fmt: skip


#: a librdkafka log line (``%6|1795781845.800|BGQUEUE|rdkafka#producer-22| ... Purging 1 unserved events``)
LIBRDKAFKA = re.compile(r"%\d\|\d+\.\d+\|[A-Z_]+\|")
#: the error lines a run's task log has for real: a failed check's failed expectations, a task's failure
REAL_ERROR = re.compile(r" failed \(error\): observed |Task failed with exception")


def levelled(line: str) -> tuple[str, str]:
    """(level, text) of a log line: a task log's JSON record, or a component's console line (``[error   ]``)."""
    if line.startswith("{"):
        try:
            record = json.loads(line)
        except ValueError:
            return "", line
        return str(record.get("level", "")).lower(), f"{record.get('logger', '')}: {record.get('event', '')}"
    found = re.search(r"\[(debug|info|warning|error|critical)\s*\]", line)
    return (found.group(1) if found else ""), line


def run_by_id(server: ApiServer, dag_id: str, run_id: str) -> dict[str, Any]:
    status, body = server.get(f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}", "admin")
    assert status == 200, body
    return dict(json.loads(body))


class _Stay(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:  # a redirect is an answer to look at
        return None


def opens(server: ApiServer, url: str) -> None:
    """A link people open from an alert: under Airflow's base URL; logged out, a browser gets the page (Airflow's
    UI, which logs in itself) or a redirect to Airflow's login; logged in, the page (200)."""
    import urllib.error

    assert url.startswith(server.url + "/"), url
    request = urllib.request.Request(url, headers={"Accept": "text/html"})
    try:
        with urllib.request.build_opener(_Stay()).open(request, timeout=30) as response:
            status, location = response.status, ""
    except urllib.error.HTTPError as exc:
        status, location = exc.code, exc.headers.get("Location") or ""
    assert status == 200 or (status in (302, 303, 307) and "/auth/login" in location), (url, status, location)
    status, body = server.get(url[len(server.url) :], "admin")
    assert status == 200, (url, status, body[:300])


def alerts(http: HttpSink, smtp: SmtpSink) -> list[tuple[str, str, str]]:
    """(DAG, day, event) of each webhook alert; each must have its e-mail twin."""
    hooks = [(r["json"]["dag_id"], r["json"].get("day"), r["json"]["event"]) for r in http.requests]
    assert len(smtp.messages) == len(hooks), [str(m["Subject"]) for m in smtp.messages]
    return hooks


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


@pytest.mark.timeout(1800)  # three spark-submit runs (each checks its day) besides the job: minutes on 2 cores
def test_stream_jobs_pages_show_a_live_job_and_trigger_airflow_in_chromium(
    kafka_bootstrap: str,
    topic_factory: Callable[[str], str],
    tmp_path: Path,
    sinks: tuple[HttpSink, SmtpSink],
    api_server: Callable[..., ApiServer],
) -> None:
    from playwright.sync_api import sync_playwright

    from streamjoin.airflow.dag_factory import DATA_DOCS

    assert CHROMIUM.exists(), "Debian's chromium is missing: run `make browser`"
    http, smtp = sinks
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    name = f"page_{topic_factory('n').rsplit('-', 1)[1]}"
    spec_path, topics = write_spec(pipelines / f"{name}.yaml", name, topic_factory, max_offsets_per_trigger=60)
    with_quality_and_alerts(spec_path, tmp_path / "expectations")
    suite = tmp_path / "expectations" / f"{name}.yaml"
    spec = load_spec(spec_path)
    assert spec.output.files is not None
    files = pipeline_files(spec)
    provision(kafka_bootstrap, spec_path)
    today = datetime.now(UTC).date()
    good, bad = today - timedelta(days=4), today - timedelta(days=3)  # within the broker's 7-day retention
    past, past_clicks = produce_past_days(kafka_bootstrap, spec, good, bad)
    produce_clicks(kafka_bootstrap, topics["clicks"], 0, 120)
    docs = PROJECT_HOME / DATA_DOCS / name
    daily = PROJECT_HOME / spec.output.files.path / "daily"

    def batches() -> list[dict[str, Any]]:
        return [e for e in files.history.read() if e.batch_id is not None]

    yesterday = (today - timedelta(days=1)).isoformat()
    backfill_dag, day1, day2 = f"streamjoin_backfill_{name}", good.isoformat(), bad.isoformat()
    try:
        server = api_server(pipelines, {"AIRFLOW_CONN_PAGE_WEBHOOK": json.dumps(http.connection("/alerts")),
                                        "AIRFLOW_CONN_PAGE_SMTP": json.dumps(smtp.connection())})  # fmt: skip
        # First the two past days the scheduler executes (their Spark runs and checks, the test's longest waits,
        # then run while the job starts and is looked at), then the pipeline's DAG unpaused (the job).
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            # the bad day's scheduled run: the backfill DAG unpaused in its page, the day's run created as the
            # UI's "Backfill" form does (POST /api/v2/backfills; the form's date pickers are not driven here)
            log_in(page, server, f"{server.url}/dags/{backfill_dag}")
            page.locator("[data-testid=toggle-pause]").first.click(timeout=60_000)
            wait_for(lambda: not dag(server, backfill_dag)["is_paused"], 60, "the backfill DAG unpaused")

            def create_backfill() -> tuple[int, str] | None:
                """The POST's answer; None while the scheduler holds SQLite's lock (Airflow answers 503 then,
                "Backfill creation is not supported on SQLite under concurrent access")."""
                day = {"from_date": f"{day2}T00:00:00Z", "to_date": f"{day2}T00:00:00Z"}
                status, body = server.request("POST", "/api/v2/backfills", "admin",
                                              json_body={"dag_id": backfill_dag, **day})  # fmt: skip
                return None if status == 503 and "Database is locked" in body else (status, body)

            status, body = wait_for(create_backfill, 120, "a backfill accepted between the scheduler's SQLite writes",
                                    interval=2)  # fmt: skip
            assert status in (200, 201), body

            def backfill_run() -> str | None:
                status, body = server.get(f"/api/v2/dags/{backfill_dag}/dagRuns?run_type=backfill", "admin")
                assert status == 200, body
                found = [r for r in json.loads(body)["dag_runs"] if r["data_interval_start"].startswith(day2)]
                return found[0]["dag_run_id"] if found else None

            backfilled = wait_for(backfill_run, 60, f"the backfill's run of {day2}")

            # a past day from the reprocess DAG's own trigger form in Airflow's UI (its Params: the pipeline,
            # yesterday by default): the good day
            page.goto(f"{server.url}/dags/streamjoin_reprocess")
            page.get_by_role("button", name="Trigger").first.click(timeout=60_000)
            form = page.get_by_role("dialog")
            assert form.locator("input[name=element_pipeline]").input_value(timeout=60_000) == name
            assert form.locator("input[name=element_start]").input_value() == yesterday
            form.locator("input[name=element_start]").fill(day1)
            form.locator("input[name=element_end]").fill(day1)
            form.get_by_role("button", name="Trigger").click()
            wait_for(lambda: len(runs(server, "streamjoin_reprocess", name)) == 1, 60, "the run of the trigger form")
            (from_form,) = runs(server, "streamjoin_reprocess", name)
            wanted = {"pipeline": name, "start": day1, "end": day1, "overwrite": True, "force": False, "reason": None,
                      "dry_run": False}  # fmt: skip
            assert from_form["conf"] == wanted, from_form["conf"]
            assert from_form["triggering_user_name"] == "admin"

            # the backfill's sensor reads the stream's watermark from the input topics while no job has reported
            # one of its own; then the pipeline is unpaused in Airflow's UI: its owner task starts the job
            wait_for(lambda: tasks(server, backfill_dag, backfilled).get("wait_for_watermark[-1]") == "success", 300,
                     f"the watermark sensor of the backfill of {day2}")  # fmt: skip
            page.goto(f"{server.url}/dags/streamjoin_{name}")
            page.locator("[data-testid=toggle-pause]").first.click(timeout=60_000)
            wait_for(lambda: not dag(server, f"streamjoin_{name}")["is_paused"], 60, "the pipeline's DAG unpaused")
            browser.close()
        # the job starts beside the past days' Spark runs and checks: on 2 cores, generous bounds
        wait_for(lambda: files.driver_alive(), 600, "the job, started by the owner task of the unpaused DAG")
        ((owner_run, _),) = runs_by_id(server, f"streamjoin_{name}")  # the run the scheduler started
        # the past days' records, then 120 clicks of now
        wait_for(lambda: sum(e.input_records for e in batches()) >= past + 120, 600, "the job's first records")
        produce_clicks(kafka_bootstrap, topics["clicks"], 120, 30)
        wait_for(lambda: sum(e.input_records for e in batches()) >= past + 150, 300, "the job's batch of 30 more")
        coordinates = stream_coordinates(spec)  # a row per click, each once
        assert len(coordinates) == len(set(coordinates)) == past_clicks + 150

        # the history the job wrote: one entry per committed batch, read back
        done = batches()
        assert [e.batch_id for e in done] == list(range(len(done))) and len(done) >= 3, done
        assert sum(e.input_records for e in done) == past + 150 and done[-1].lag == 0
        assert done[0].lag == past + 120 - done[0].input_records > 0  # max_offsets_per_trigger 60: more waited
        assert all(e.duration_ms > 0 and e.processed_rps > 0 for e in done)
        assert len({e.run_id for e in done}) == 1
        spark_ui = status.spark_ui if (status := files.status()) else None
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
        write_check_result(check, daily / f"date={yesterday}")
        # the page shows the day written or checked last: this check, dated an hour ahead of the past days' checks
        # the scheduler writes meanwhile (the bad day's twice), whenever they land
        ahead = time.time() + 3600
        os.utime(daily / f"date={yesterday}" / RESULT_FILE, (ahead, ahead))

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
            (reprocess,) = [r for r in runs(server, "streamjoin_reprocess", name) if r["conf"]["start"] == yesterday]
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
            assert [len(runs(server, dag, name)) for dag in dags] == [1, 2]  # nothing more (the form's, this one)

            # the bad day's backfill: its check fails, both sinks alerted, quarantined, no asset event
            state = wait_for(lambda: ended(server, backfill_dag, backfilled), 900, f"the backfill run of {day2}")
            assert (state, tasks(server, backfill_dag, backfilled)) == ("failed", {
                "wait_for_watermark[-1]": "success", "reprocess_day[-1]": "success",
                "check_quality[-1]": "failed"})  # fmt: skip
            quarantined = daily / f"date={day2}"
            marker = json.loads((quarantined / "_QUARANTINED").read_text())
            assert marker["reason"] == "blocking checks failed: match_rate", marker
            kept = day_files(quarantined)
            assert kept, sorted(p.name for p in quarantined.iterdir())
            wait_for(lambda: len(http.requests) >= 1 and len(smtp.messages) >= 1, 60, "the backfill's alerts")
            assert alerts(http, smtp) == [(backfill_dag, day2, "streamjoin.quality_failed")]
            first = http.requests[0]["json"]
            assert first["blocking_failed"] == ["match_rate"] and first["outcome"].startswith("day quarantined at ")
            assert "quality check failed (match_rate)" in str(smtp.messages[0]["Subject"])
            assert name in str(smtp.messages[0]["Subject"]) + SmtpSink.body(smtp.messages[0])
            assert day2 not in [day for _, day in day_events(server, name)]

            assert run_by_id(server, backfill_dag, backfilled)["note"] == (  # Airflow names it after the next day
                f"Day {day2} (UTC) of {name}: recomputed, checked, published if it passes")

            # the good day, from the form: checked, published, its asset event
            state = wait_for(lambda: ended(server, "streamjoin_reprocess", from_form["dag_run_id"]), 900,
                             f"the reprocess run of {day1} (the scheduler runs it: Spark, then the check)")  # fmt: skip
            assert (state, tasks(server, "streamjoin_reprocess", from_form["dag_run_id"])) == (
                "success",
                {"validate[-1]": "success", "day.reprocess_day[0]": "success", "day.check_quality[0]": "success"},
            )
            published = day_files(daily / f"date={day1}")
            assert published and not (daily / f"date={day1}" / "_QUARANTINED").exists()
            wait_for(lambda: ("streamjoin_reprocess", day1) in day_events(server, name), 60, f"the event of {day1}")
            form_run = run_by_id(server, "streamjoin_reprocess", from_form["dag_run_id"])
            assert form_run["note"] == f"Reprocess {name} {day1}"

            # "Reprocess" on the published good day, from the pipeline's page in Airflow's frame, with a stricter
            # suite (at most 10 rows: it has 24). A reversed range is refused on the page, a day not over yet by
            # the form itself, a second press while the run is on with "already running": no run, no alert.
            strict = yaml.safe_load(suite.read_text())
            strict["enriched"]["expectations"] = [{
                "name": "at_most_ten_rows", "type": "expect_table_row_count_to_be_between",
                "kwargs": {"max_value": 10}, "description": "the day has at most ten rows"}]  # fmt: skip
            suite.write_text(yaml.safe_dump(strict))
            page.goto(detail)
            frame.locator("#reprocess-day").fill(day2)
            frame.locator("#reprocess-end").fill(day1)
            frame.locator("#action-reprocess").click()
            refused = frame.locator("#refused")
            assert f"end {day1} is before start {day2}" in refused.inner_text(timeout=60_000)
            page.goto(detail)
            frame.locator("#reprocess-day").fill(day1)
            frame.locator("#reprocess-end").fill(today.isoformat())
            frame.locator("#action-reprocess").click()
            frame.locator("#reprocess-end:invalid").wait_for(timeout=10_000)  # the form's own max: not submitted
            assert frame.locator("#refused, #triggered").count() == 0
            frame.locator("#reprocess-end").fill("")
            frame.locator("#action-reprocess").click()
            frame.locator("#triggered").wait_for(timeout=60_000)
            (again,) = [r for r in runs(server, "streamjoin_reprocess", name)
                        if r["conf"]["start"] == day1 and r["dag_run_id"] != from_form["dag_run_id"]]  # fmt: skip
            assert again["conf"] == {"pipeline": name, "start": day1, "end": day1, "overwrite": True,
                                     "dry_run": False}  # fmt: skip
            assert again["note"] == f"Reprocess {name} {day1}; from the Stream jobs page"
            page.goto(detail)
            frame.locator("#reprocess-day").fill(day1)
            frame.locator("#action-reprocess").click()
            assert f"already running: run {again['dag_run_id']}" in refused.inner_text(timeout=60_000)
            assert len(runs(server, "streamjoin_reprocess", name)) == 3  # the form's, yesterday's, this one

            state = wait_for(lambda: ended(server, "streamjoin_reprocess", again["dag_run_id"]), 900,
                             f"the reprocess run of {day1} from the page")  # fmt: skip
            assert (state, tasks(server, "streamjoin_reprocess", again["dag_run_id"])) == (
                "failed",
                {"validate[-1]": "success", "day.reprocess_day[0]": "success", "day.check_quality[0]": "failed"},
            )
            # the published day stays as it was, its failed check recorded beside it
            assert day_files(daily / f"date={day1}") == published
            assert (daily / f"date={day1}" / RECHECK_FILE).exists()
            wait_for(lambda: len(http.requests) >= 2 and len(smtp.messages) >= 2, 60, "the second alerts")
            assert alerts(http, smtp) == [(backfill_dag, day2, "streamjoin.quality_failed"),
                                          ("streamjoin_reprocess", day1, "streamjoin.quality_failed")]  # fmt: skip
            outcome = http.requests[1]["json"]["outcome"]
            assert f"stays as it was (the version of run {from_form['dag_run_id']})" in outcome, outcome
            assert "streamjoin_reprocess" in SmtpSink.body(smtp.messages[1])
            assert day_events(server, name) == [("streamjoin_reprocess", day1)]

            # both pages show the day's latest check: FAILED, the published version's run, its Data Docs
            os.utime(daily / f"date={yesterday}" / RESULT_FILE, (ahead - 7200, ahead - 7200))  # the stand-in: older
            failed_check = f"not published: the published version is from run {from_form['dag_run_id']}"
            docs_href = f"/streamjoin/data-docs/{name}/enriched/{day1}/"
            page.goto(f"{framed}?refresh=0")
            cell = frame.locator(f"tr[data-pipeline='{name}'] td.quality-cell")
            assert "FAILED" in cell.inner_text(timeout=60_000) and failed_check in cell.inner_text()
            assert (cell.locator("a.data-docs").get_attribute("href") or "").startswith(docs_href)
            page.goto(detail)
            summary = frame.locator("#summary-quality").inner_text(timeout=60_000)
            assert "FAILED; blocking: at_most_ten_rows" in summary and failed_check in summary, summary
            assert failed_check in frame.locator(f"#day-checks tr[data-day='{day1}']").inner_text()
            assert "quarantined" in frame.locator(f"#day-checks tr[data-day='{day2}']").inner_text()
            frame.locator(f"#day-checks tr[data-day='{day1}'] a.data-docs").click()  # served here: in the frame
            page.wait_for_url(re.compile(rf".*/plugin/stream-jobs/streamjoin/data-docs/{name}/enriched/{day1}/.*"),
                              timeout=60_000)  # fmt: skip
            frame.get_by_text("the day has at most ten rows").first.wait_for(timeout=60_000)

            # every link in the alerts is Airflow's base URL's and opens: logged out, the page or Airflow's login;
            # logged in, the page
            for request in http.requests:
                links = [request["json"][k] for k in ("data_docs_url", "log_url", "pipeline_url")]
                assert all(links), request["json"]
                for link in links:
                    opens(server, link)
            for message in smtp.messages:
                hrefs = re.findall(r'href="([^"]+)"', SmtpSink.body(message))
                assert hrefs and all(h.startswith(server.url + "/") for h in hrefs), hrefs

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
        # quiet logs: every error line of the runs' task logs is a real error (the failed checks, the tasks'
        # failure), no librdkafka chatter nor Airflow's deprecation warning, links in http(s); the triggerer
        # (the watermark and the job's triggers, polled all along) logged no error at all
        task_logs = {path: [levelled(line) for line in path.read_text(errors="replace").splitlines()]
                     for path in sorted((tmp_path / "airflow" / "logs").rglob("attempt=*.log"))}  # fmt: skip
        assert len(task_logs) >= 10, sorted(task_logs)
        false = [f"{path.parent.name}: {text}" for path, lines in task_logs.items() for level, text in lines
                 if level in ("error", "critical") and not REAL_ERROR.search(text)]  # fmt: skip
        assert not false, "\n".join(false[:20])
        noise = [text for lines in task_logs.values() for _, text in lines
                 if LIBRDKAFKA.search(text) or "GitWildMatchPattern" in text or "Data Docs: file:" in text]  # fmt: skip
        assert not noise, "\n".join(noise[:20])
        assert sum("Data Docs: http://" in text for lines in task_logs.values() for _, text in lines) >= 3
        # each day was checked inside its reprocessing application: the job's outcome in reprocess_day's log,
        # check_quality only reports it
        outcomes = [str(path) for path, lines in task_logs.items() for _, text in lines
                    if ": job: streamjoin check {" in text]  # fmt: skip
        assert len(outcomes) == 3 and all("reprocess_day" in path for path in outcomes), outcomes
        triggerer = [levelled(line) for line in (tmp_path / "triggerer.log").read_text(errors="replace").splitlines()]
        loud = [text for level, text in triggerer if level in ("error", "critical") or LIBRDKAFKA.search(text)]
        assert not loud, "\n".join(loud[:20])
        check_screenshot(shots["stream-jobs"], 1400, 200)
        check_screenshot(shots["stream-job-detail"], 1400, 1900, INPUT_COLOUR)
        check_screenshot(shots["airflow-browse-menu"], 1400, 900)
        ours, airflows = tracebacks(server.log)
        assert not ours, "\n\n".join(ours)  # the plugin's routes never fail
        print("\n\n".join(["Airflow's own tracebacks in the api-server's log:", *airflows]) if airflows else "")
    finally:
        StopStreamJoinOperator(task_id="stop", spec_path=str(spec_path), timeout=30).execute({})
        shutil.rmtree(docs, ignore_errors=True)
        shutil.rmtree(PROJECT_HOME / spec.output.files.path, ignore_errors=True)
    print("screenshots: " + ", ".join(str(p) for p in shots.values()))
