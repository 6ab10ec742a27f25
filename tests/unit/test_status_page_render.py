"""The status page's pure parts: SVG charts (well-formed, points where the data is, spikes kept when
downsampled), the pages' HTML (values escaped, links, action forms with the CSRF token) and the actions'
requests."""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET
from datetime import date
from typing import Any

import pytest

from streamjoin.airflow.actions import (
    REPROCESS_DAG,
    STOP_REDEPLOY_DAG,
    ActionError,
    action_request,
    csrf_token,
    requested_days,
)
from streamjoin.airflow.run_notes import run_note
from streamjoin.airflow.status_page import DayCheck, JobPage, Link, render_job, render_jobs
from streamjoin.core.charts import Series, downsample, line_chart, nice_ceiling, segments, sparkline
from streamjoin.core.job_files import BatchCounts, HistoryEntry, JobStatus, SupervisorRecord
from streamjoin.core.job_history import breaks, recent, series
from streamjoin.core.status_view import JobView, job_view
from streamjoin.core.supervision import Policy

SVG = "{http://www.w3.org/2000/svg}"
NOW = 1_800_000_000.0


def _entries(*records: dict[str, Any]) -> list[HistoryEntry]:
    return [e for r in records if (e := HistoryEntry.from_json(r)) is not None]


def _coords(polyline: ET.Element) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in (p.split(",") for p in polyline.attrib["points"].split())]


def test_a_line_chart_puts_each_point_where_its_time_and_value_are() -> None:
    points = [(1000.0, 0.0), (1050.0, 5.0), (1100.0, 10.0)]
    svg = line_chart("lag", "Lag", [Series("lag", points, "#d62728")], start=1000, end=1100, width=252, height=144)
    root = ET.fromstring(svg)  # well-formed XML
    assert root.attrib["data-chart"] == "lag" and root.attrib["data-points"] == "3"
    (group,) = (g for g in root.iter(f"{SVG}g") if g.attrib.get("data-series") == "lag")
    (line,) = group.iter(f"{SVG}polyline")
    assert group.attrib["data-points"] == "3" and line.attrib["stroke"] == "#d62728"
    # plot area: x 52..242 (200 px for 100 s), y 22..122 (100 px for 0..10)
    assert _coords(line) == [(52.0, 122.0), (147.0, 72.0), (242.0, 22.0)]
    assert len(list(root.iter(f"{SVG}circle"))) == 3
    labels = [t.text for t in root.iter(f"{SVG}text")]
    assert "10" in labels and "0" in labels and "00:16:40" in labels  # y max, y 0, start time (UTC)


def test_points_outside_the_period_are_left_out_and_an_empty_chart_says_so() -> None:
    svg = line_chart("x", "X", [Series("a", [(5.0, 1.0), (50.0, 2.0)], "#000")], start=10, end=100)
    assert ET.fromstring(svg).attrib["data-points"] == "1"
    empty = ET.fromstring(line_chart("x", "X <&>", [Series("a", [], "#000")], start=10, end=100))
    assert empty.attrib["data-points"] == "0"
    assert "no data in this period" in [t.text for t in empty.iter(f"{SVG}text")]
    assert "X <&>" in [t.text for t in empty.iter(f"{SVG}text")]  # escaped in the markup, intact when parsed


def test_no_line_is_drawn_across_a_period_without_the_job() -> None:
    # a job that ran, was down from 130 s to 1000 s, and ran again under a new run id; one long batch of 600 s
    entries = _entries({"t": 0.0, "run_id": "a", "lag": 1}, {"t": 60.0, "run_id": "a", "lag": 2},
               {"t": 130.0, "run_id": "a", "lag": 3}, {"t": 1000.0, "run_id": "b", "lag": 4},
               {"t": 1700.0, "run_id": "b", "lag": 5, "duration_ms": 600_000},
               {"t": 2000.0, "run_id": "b", "lag": 6}, {"t": 2040.0, "run_id": "c", "lag": 7})  # fmt: skip
    assert breaks(entries) == [1000.0, 2000.0, 2040.0]  # new run; a silence beyond the batch; new run
    points = series(entries, "lag")
    assert [len(s) for s in segments(points, breaks(entries))] == [3, 2, 1, 1]
    svg = line_chart("lag", "Lag", [Series("lag", points, "#000", breaks(entries))], start=0, end=2100)
    root = ET.fromstring(svg)
    assert root.attrib["data-points"] == "7" and len(list(root.iter(f"{SVG}polyline"))) == 4
    spark = ET.fromstring(sparkline(points, breaks=breaks(entries)))
    assert len(list(spark.iter(f"{SVG}polyline"))) == 4 and spark.attrib["data-points"] == "7"


def test_the_rate_says_which_batch_is_running_rather_than_no_batch() -> None:
    entries = _entries({"t": 0.0, "batch_id": 4, "input_records": 10})
    assert (
        recent(entries, 1000.0).text(5, running=True)
        == "no batch in the last 5 min with 5 records waiting, last batch 17 min ago"
    )
    assert recent(entries, 1000.0).text(5, True, (5, 700.0)) == "batch 5 running for 12 min, last batch 17 min ago"
    assert recent(entries, 1000.0).text(5, False, (5, 700.0)).startswith("no batch in the last 5 min")


def test_markers_are_dashed_lines_with_a_title_and_a_label() -> None:
    svg = line_chart("r", "R", [Series("a", [(0.0, 1.0)], "#000")], start=0, end=100,
                     markers=[(50.0, "job started"), (95.0, "restarted by its owner")])  # fmt: skip
    root = ET.fromstring(svg)
    markers = [e for e in root.iter(f"{SVG}line") if e.attrib.get("class") == "marker"]
    assert len(markers) == 2 and markers[0].find(f"{SVG}title").text == "job started"  # type: ignore[union-attr]
    texts = [e for e in root.iter(f"{SVG}text") if e.attrib.get("class") == "marker-label"]
    labels = [(e.text, e.attrib["text-anchor"]) for e in texts]
    assert labels == [("job started", "start"), ("restarted by its owner", "end")]  # the last one inside the chart


def test_the_processed_line_is_dashed_over_the_input_line() -> None:
    same = [(10.0, 5.0), (20.0, 5.0)]
    svg = line_chart("rates", "R", [Series("input", same, "#00f"), Series("processed", same, "#f80", dashed=True)],
                     start=0, end=30)  # fmt: skip
    lines = [(g.attrib["data-series"], g.find(f"{SVG}polyline").attrib.get("stroke-dasharray"))  # type: ignore[union-attr]
             for g in ET.fromstring(svg).iter(f"{SVG}g")]  # fmt: skip
    assert lines == [("input", None), ("processed", "6 4")]  # drawn in this order: processed on top, dashed


def test_a_restarted_job_with_no_batch_yet_says_starting_not_idle() -> None:
    from streamjoin.core.job_files import DriverRecord

    view = job_view(
        "clicks", status=JobStatus(
            pipeline="clicks", batch_id=7, written_at=NOW - 1080, last_batch_time="t", run_id="r",
            end_offsets={"clicks-topic": {"0": 70}}),
        driver=DriverRecord(pid=1, pgid=1, started_at=NOW - 40), supervisor=SupervisorRecord(), failure=None,
        history=_entries({"t": NOW - 1080, "batch_id": 7, "run_id": "r", "input_records": 70}), alive=True,
        stopped=False, latest={"clicks-topic": {0: 70}}, planned=None, policy=Policy(), now=NOW,
    )  # fmt: skip
    assert view.state == "starting"
    assert view.recent_text == "starting: no batch since the job started 40 s ago (last batch 18 min ago, before it)"


def test_downsampling_keeps_each_bucket_s_extremes() -> None:
    points = [(float(t), 1.0) for t in range(10_000)]
    points[4321] = (4321.0, 99.0)  # a spike
    points[777] = (777.0, -5.0)
    out = downsample(points, 200)
    assert len(out) <= 200 and (4321.0, 99.0) in out and (777.0, -5.0) in out
    assert out == sorted(out) and downsample(points[:50], 200) == points[:50]


@pytest.mark.parametrize(
    ("value", "ceiling"), [(0, 1), (0.7, 1), (1, 1), (1.01, 2), (3, 5), (230, 250), (9001, 10_000)]
)
def test_nice_ceiling(value: float, ceiling: float) -> None:
    assert nice_ceiling(value) == pytest.approx(ceiling)


def test_sparkline() -> None:
    root = ET.fromstring(sparkline([(0.0, 0.0), (10.0, 4.0), (20.0, 2.0)], width=102, height=26))  # one stretch
    (line,) = root.iter(f"{SVG}polyline")
    assert _coords(line) == [(1.0, 25.0), (51.0, 1.0), (101.0, 13.0)]
    assert ET.fromstring(sparkline([])).attrib["data-points"] == "0"


def _view(name: str = "clicks", **changes: Any) -> JobView:
    """A healthy pipeline's view, caught up, 7 minutes after its last batch (built by the core's view model)."""
    status = JobStatus(
        pipeline=name, batch_id=7, written_at=NOW - 5, last_batch_time="2026-11-24T10:00:00", run_id="r",
        counts=BatchCounts(input_records=70, dead_letters=1, output_records=60, state_bytes=4096), input_rps=0.0,
        processed_rps=80.0, duration_ms=900, end_offsets={"clicks-topic": {"0": 70}},
        totals=BatchCounts(input_records=700, dead_letters=8, output_records=600),
    )  # fmt: skip
    view = job_view(
        name, status=status, driver=None, supervisor=SupervisorRecord(restarts=[NOW - 300]), failure=None,
        history=_entries({"t": NOW - 420, "batch_id": 7, "run_id": "r", "input_records": 70, "input_rps": 1.0},
                         {"t": NOW - 120, "run_id": "r", "idle": True, "input_rps": 3.0}),
        alive=True, stopped=False, latest={"clicks-topic": {0: 70}}, planned=None, policy=Policy(), now=NOW,
    )  # fmt: skip
    return dataclasses.replace(view, **changes)


def test_the_list_links_each_pipeline_and_shows_an_honest_rate() -> None:
    page = render_jobs([_view(), _view("<script>", reason="'><b>x")], "/streamjoin/jobs")
    assert "<a class='detail' href='/streamjoin/jobs/clicks'>clicks</a>" in page
    assert "<td class='state healthy' title='batch 7, lag 0'>healthy</td>" in page
    assert "idle: caught up, last batch 7 min ago" in page and "0.0" not in page
    assert "<td class='lag'>clicks-topic: 0</td><td class='restarts'>1</td>" in page
    assert page.count("<script>") == 1 and "&lt;script&gt;" in page and "'><b>x" not in page  # only the page's own
    assert page.count("class='sparkline' data-points='2'") == 2
    assert "<body data-refresh='30'>" in page and "location.reload()" in page  # reloads itself
    assert "<body data-refresh='0'>" in render_jobs([_view()], "/streamjoin/jobs", refresh=0)


def test_a_never_started_pipeline_says_so_and_a_failed_check_stands_out() -> None:
    never = job_view(
        "new", status=None, driver=None, supervisor=SupervisorRecord(), failure=None, history=[], alive=False,
        stopped=False, latest={"clicks-topic": {0: 12}}, planned=None, policy=Policy(), now=NOW,
    )  # fmt: skip
    failed = _view("bad", quality="bad enriched 2026-11-23: FAILED; blocking: match_rate", quality_verdict="FAILED",
                   quality_docs="/streamjoin/data-docs/bad/enriched/x/index.html")  # fmt: skip
    forced = _view("forced", quality="f: FAILED; published with force over the failed check by alice (run r): ok",
                   quality_verdict="published with force")  # fmt: skip
    page = render_jobs([never, failed, forced], "/streamjoin/jobs")
    assert "batch None" not in page and "<td class='last-batch'>not started</td>" in page
    assert "<td class='state not-started' title='the job was never started'>not started</td>" in page
    assert "<td class='rate'>not started</td>" in page and "<td class='lag'>-</td>" in page  # no lag of its own
    assert ("<span class='quality failed'>bad enriched 2026-11-23: FAILED; blocking: match_rate</span> <a "
            "class='data-docs' href='/streamjoin/data-docs/bad/enriched/x/index.html' target='_self'>Data Docs</a>"
            ) in page  # fmt: skip
    assert ".quality.failed{color:#fff;background:#c00" in page
    assert "<span class='quality forced'>f: FAILED; published with force over the failed check by alice" in page
    one = render_job(JobPage(view=never, history=[], now=NOW, links=[], jobs_url="/streamjoin/jobs", csrf=""))
    assert "<tr id='summary-last-batch'><th>Last batch</th><td>not started</td></tr>" in one
    assert "<tr id='summary-dead-letters'><th>Dead letters</th><td>-</td></tr>" in one


def test_a_pipeline_page_has_its_charts_links_and_action_forms() -> None:
    now = NOW
    history = _entries(*({"t": now - 600 + 60 * i, "batch_id": i, "run_id": "r", "input_records": 10 * i,
                          "input_rps": float(i), "processed_rps": 2.0 * i, "duration_ms": 900, "lag": 100 - 10 * i,
                          "state_bytes": 4096, "dead_letters": 1} for i in range(8)))  # fmt: skip
    page = render_job(JobPage(
        view=_view(), history=history, now=now,
        links=[Link("dag-runs", "Runs", "/dags/streamjoin_clicks/runs"),
               Link("spark-ui", "Spark UI", None, "not running"),
               Link("spark", "Spark UI", "http://driver:4040", kind="external"),
               Link("docs", "Docs", "/streamjoin/data-docs/clicks/x/index.html", kind="frame")],
        jobs_url="/streamjoin/jobs", csrf="tok'en",
        triggered=("streamjoin_stop_redeploy", "manual__<x>", "/dags/streamjoin_stop_redeploy/runs/manual__%3Cx%3E",
                   True),
        checks=[DayCheck("2026-11-23", "FAILED", "c 2026-11-23: FAILED; not published: the published version is "
                         "from run r1", "/streamjoin/data-docs/clicks/d/index.html"),
                DayCheck("2026-11-22", "passed", "c 2026-11-22: passed")],
    ))  # fmt: skip
    charts = dict(re.findall(r"data-chart='([a-z_]+)' data-points='(\d+)'", page))
    assert charts == {"rates": "16", "lag": "8", "duration": "8", "state": "8", "dead_letters": "8"}
    assert page.count("class='marker'") == 5  # the owner's restart, on each chart
    assert "<a id='link-dag-runs' href='/dags/streamjoin_clicks/runs' target='_top'>" in page
    assert "<li id='link-spark-ui'>Spark UI: not running</li>" in page
    assert "<a id='link-spark' href='http://driver:4040' target='_blank'>" in page
    assert "<a id='link-docs' href='/streamjoin/data-docs/clicks/x/index.html' target='_self'>" in page
    assert "id='triggered-run' href='/dags/streamjoin_stop_redeploy/runs/manual__%3Cx%3E' target='_top'" in page
    for action in ("stop", "redeploy", "reprocess"):
        assert f"<form method='post' action='/streamjoin/jobs/clicks/actions/{action}'" in page
    for field in ("name='day'", "name='end'", "name='force' value='true'", "name='reason' maxlength='500'"):
        assert field in page, field
    assert ("<tr data-day='2026-11-23'><td>2026-11-23</td><td><span class='quality failed'>c 2026-11-23: FAILED; not "
            "published: the published version is from run r1</span> <a class='data-docs' "
            "href='/streamjoin/data-docs/clicks/d/index.html' target='_self'>Data Docs</a></td></tr>") in page
    assert "<tr data-day='2026-11-22'><td>2026-11-22</td><td><span class='quality passed'>" in page
    assert "id='refused'" not in page
    assert page.count("<input type='hidden' name='csrf' value='tok&#x27;en'>") == 3
    assert "max='2027-01-14'" in page  # the reprocessed day: yesterday at most (UTC)
    assert "manual__&lt;x&gt;" in page and "the DAG is paused" in page
    assert "<td>2026-11-24T10:00:00 (batch 7, 70 rows in 0.9 s)</td>" in page
    assert "4.0 KiB" in page and "1 in the last batch, 8 since the query started" in page
    assert "60 in the last batch, 600 since the query started" in page  # join results
    assert "summary-failure" not in page  # nothing failed


def test_a_failed_job_s_page_names_the_cause() -> None:
    view = _view(state="failed", reason="crash loop", failure="KafkaUnavailableError: broker <down>")
    page = render_job(JobPage(view=view, history=[], now=NOW, links=[], jobs_url="/streamjoin/jobs", csrf="",
                              refused="already running: run <r>", refresh=0))  # fmt: skip
    assert "<p class='notice refused' id='refused'>Not triggered: already running: run &lt;r&gt;</p>" in page
    assert "<body data-refresh='0'>" in page and "No day checked yet." in page
    assert "<span class='state failed'>failed</span> (crash loop)" in page
    assert "<tr id='summary-failure'><th>Why it stopped</th><td>KafkaUnavailableError: broker &lt;down&gt;</td>" in page


def test_actions_become_runs_of_the_stop_redeploy_and_reprocess_dags() -> None:
    today = date(2026, 11, 24)
    stop = action_request("stop", "clicks", None, today)
    assert (stop.dag_id, stop.conf) == (STOP_REDEPLOY_DAG, {"pipeline": "clicks", "redeploy": False})
    assert action_request("redeploy", "clicks", "ignored", today).conf["redeploy"] is True
    day = action_request("reprocess", "clicks", "2026-11-23", today)
    assert (day.dag_id, day.conf) == (
        REPROCESS_DAG, {"pipeline": "clicks", "start": "2026-11-23", "end": "2026-11-23", "overwrite": True,
                        "dry_run": False},
    )  # fmt: skip
    assert day.note == "Reprocess clicks 2026-11-23; from the Stream jobs page"
    days = action_request("reprocess", "clicks", "2026-11-20", today, end="2026-11-23", force=True, reason=" late ")
    assert days.conf == {"pipeline": "clicks", "start": "2026-11-20", "end": "2026-11-23", "overwrite": True,
                         "dry_run": False, "force": True, "reason": "late"}  # fmt: skip
    assert days.note == "Reprocess clicks 2026-11-20 to 2026-11-23, with force: late; from the Stream jobs page"
    assert stop.note == "Stop clicks; from the Stream jobs page"
    assert requested_days(days.conf) == [date(2026, 11, d) for d in (20, 21, 22, 23)]
    for bad in (None, "", "2026-11-24", "2026-13-01", "23/11/2026", "\uff12\uff10\uff12\uff16-11-23", "2026-11-23; rm"):
        with pytest.raises(ActionError):
            action_request("reprocess", "clicks", bad, today)
    # checked across the fields: a reversed range, an end not over yet, force without a reason, too many days
    for start, end, force, why, message in (
        ("2026-11-23", "2026-11-20", False, None, "end 2026-11-20 is before start 2026-11-23"),
        ("2026-11-20", "2026-11-24", False, None, "end 2026-11-24 is not over yet"),
        ("2026-11-20", "", True, " ", "say why in 'reason'"),
        ("2026-09-01", "2026-11-23", False, None, "at most 31 per run"),
    ):
        with pytest.raises(ActionError, match=message):
            action_request("reprocess", "clicks", start, today, end=end, force=force, reason=why)
    with pytest.raises(ActionError, match="unknown action"):
        action_request("delete", "clicks", None, today)


def test_runs_of_the_shipped_dags_get_a_note_naming_their_days() -> None:
    from datetime import UTC, datetime

    # Airflow names a daily backfill run after the end of its day: the note names the day it processes
    start = datetime(2026, 11, 24, tzinfo=UTC)
    assert run_note("streamjoin_backfill_clicks", start, None) == (
        "Day 2026-11-24 (UTC) of clicks: recomputed, checked, published if it passes")
    conf = {"pipeline": "clicks", "start": "2026-11-20", "end": "2026-11-20", "overwrite": True}
    assert run_note("streamjoin_reprocess", None, conf) == "Reprocess clicks 2026-11-20"
    assert run_note("streamjoin_reprocess", None, {**conf, "end": "2026-11-22", "force": True, "reason": "ok"}) == (
        "Reprocess clicks 2026-11-20 to 2026-11-22, with force: ok")
    assert run_note("streamjoin_stop_redeploy", None, {"pipeline": "clicks", "redeploy": True}) == "Redeploy clicks"
    assert run_note("streamjoin_clicks", start, {}) is None and run_note("other_dag", start, conf) is None


def test_the_csrf_token_is_bound_to_the_session() -> None:
    assert csrf_token("jwt-a") == csrf_token("jwt-a") != csrf_token("jwt-b")
    assert "jwt-a" not in csrf_token("jwt-a") and len(csrf_token("jwt-a")) == 64


def test_a_chained_pipeline_s_pages_name_its_stages(tmp_path: Any) -> None:
    """The plugin's view of the shipped two-stage pipeline lists its stages by name; its page shows them in
    order, the list says how many, ``/api/jobs`` has them; a one-join pipeline's page shows its join."""
    from streamjoin.airflow.plugin import _view as plugin_view
    from streamjoin.core.job_files import PipelineFiles
    from streamjoin.core.plans import PROJECT_HOME
    from streamjoin.core.spec import load_spec

    spec = load_spec(PROJECT_HOME / "include" / "pipelines" / "clicks_per_region_category.yaml")
    chained = plugin_view(spec, PipelineFiles(tmp_path), None, NOW)  # never started: no files, no Kafka
    stages = ["with_region: clicks left stream-table regions",
              "with_category: with_region left stream-globaltable categories"]  # fmt: skip
    assert list(chained.stages) == stages and chained.to_json()["stages"] == stages
    page = render_job(JobPage(view=chained, history=[], now=NOW, links=[], jobs_url="/streamjoin/jobs", csrf=""))
    assert ("<tr id='summary-join'><th>Join stages</th><td><ol class='stages'><li>with_region: clicks left "
            "stream-table regions</li><li>with_category: with_region left stream-globaltable categories</li></ol>"
            "</td></tr>") in page  # fmt: skip
    listed = render_jobs([chained, _view(stages=("clicks left stream-table regions",))], "/streamjoin/jobs")
    assert listed.count("join stages</small>") == 1 and ">2 join stages</small>" in listed
    one = render_job(JobPage(view=_view(stages=("clicks left stream-table <regions>",)), history=[], now=NOW,
                             links=[], jobs_url="/streamjoin/jobs", csrf=""))  # fmt: skip
    assert "<tr id='summary-join'><th>Join</th><td>clicks left stream-table &lt;regions&gt;</td></tr>" in one
