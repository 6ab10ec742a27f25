"""The HTML of the Stream jobs pages (the list and one pipeline's page), rendered from each pipeline's view
(:class:`~streamjoin.core.status_view.JobView`, built in core from the job's records; gathered by
:mod:`streamjoin.airflow.plugin`): nothing here judges the job. Plain HTML with inline SVG charts
(:mod:`streamjoin.core.charts`) and one small inline script (:data:`SCRIPT`: links out of Airflow's frame, auto
refresh); nothing loaded from elsewhere. Every value is escaped.

Airflow 3.3 shows plugin pages in an iframe sandboxed with ``allow-scripts allow-same-origin allow-forms
allow-downloads``: no ``allow-top-navigation`` and no ``allow-popups``, so a plain ``target="_top"`` or
``"_blank"`` link does nothing there. The frame shares Airflow's origin, so the script follows such a link
from Airflow's own document instead (an anchor added to it and clicked: the navigation is the top page's
own, which its sandbox-free document may do), the way a link of Airflow's UI would. Opened on its own (not
framed), the page's links work as plain links.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from html import escape
from typing import Any
from urllib.parse import quote

from streamjoin.core.charts import Series, line_chart, sparkline
from streamjoin.core.job_files import HistoryEntry
from streamjoin.core.job_history import breaks, job_starts, series
from streamjoin.core.status_view import NOT_STARTED, JobView

STYLE = (
    "body{font-family:sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
    "padding:.4em .7em;text-align:left;vertical-align:top}.healthy{color:#0a0}.dead,.failed,.stale{color:#c00}"
    ".lagging,.starting{color:#c80}.not-started{color:#777}"
    ".quality.failed{color:#fff;background:#c00;padding:.1em .4em;border-radius:3px;font-weight:bold}"
    ".quality.forced{color:#fff;background:#c60;padding:.1em .4em;border-radius:3px;font-weight:bold}"
    ".quality.not-checked{color:#c80}.charts{display:flex;flex-wrap:wrap;gap:1em}svg.chart{border:1px solid #ddd;"
    "background:#fff}svg .title{font-size:12px;font-weight:bold}svg .axis,svg .legend{font-size:10px}"
    "svg .grid{stroke:#eee}svg .marker{stroke:#c00;stroke-dasharray:4 3}svg .marker-label{font-size:9px;fill:#c00}"
    "svg .empty{font-size:12px;fill:#999}"
    "form{display:inline-block;margin-right:1em}.notice{background:#eef7ee;border:1px solid #9c9;padding:.5em}"
    ".notice.refused{background:#fdf3e7;border-color:#d9a25f}"
    "ul.links li{margin:.2em 0}th{background:#f6f6f6}ol.stages{margin:0;padding-left:1.4em}"
)
COLORS = {"input": "#1f77b4", "processed": "#ff7f0e", "lag": "#d62728", "duration": "#2ca02c",
          "state": "#9467bd", "dead": "#8c564b"}  # fmt: skip


#: follows ``_top``/``_blank`` links from Airflow's document when the page is in Airflow's (same-origin) frame,
#: and reloads the page every ``data-refresh`` seconds unless the user is typing into a form
SCRIPT = """(function () {
  var parent = null;
  try { if (window.top !== window && window.top.location.origin === location.origin) parent = window.top; }
  catch (e) { parent = null; }
  if (parent) document.addEventListener('click', function (e) {
    var a = e.target instanceof Element ? e.target.closest('a[target="_top"], a[target="_blank"]') : null;
    if (!a || e.defaultPrevented || e.button !== 0) return;
    e.preventDefault();
    var link = parent.document.createElement('a');
    link.href = a.href; link.target = a.target; link.style.display = 'none';
    if (a.target === '_blank') link.rel = 'noopener';
    parent.document.body.appendChild(link);
    link.dispatchEvent(new MouseEvent('click', {cancelable: true, ctrlKey: e.ctrlKey, metaKey: e.metaKey,
                                                shiftKey: e.shiftKey, altKey: e.altKey}));
    link.remove();
  });
  var refresh = Number(document.body.getAttribute('data-refresh')) || 0, edited = false;
  document.addEventListener('input', function () { edited = true; });
  if (refresh > 0) setInterval(function () {
    var active = document.activeElement;
    if (!edited && !(active && /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName))) location.reload();
  }, refresh * 1000);
})();"""
#: how often the pages reload themselves by default (seconds; ``?refresh=N`` changes it, 0 turns it off)
REFRESH_SECONDS = 30


def _page(title: str, body: str, refresh: int = REFRESH_SECONDS) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
            f"<style>{STYLE}</style></head><body data-refresh='{int(refresh)}'>{body}"
            f"<script>{SCRIPT}</script></body></html>")  # fmt: skip


def _last_batch(v: JobView, more: str = "") -> str:
    """``<time> (batch N<more>)``; "not started" or "-" without a batch."""
    if v.batch_id is None:
        return NOT_STARTED if v.state == NOT_STARTED else "-"
    return f"{escape(str(v.last_batch_time or '-'))} (batch {v.batch_id}{more})"


#: a check's verdict (:mod:`streamjoin.airflow.quality_status`) -> its CSS class
VERDICT_CSS = {"FAILED": "failed", "not checked": "not-checked", "passed": "passed", "published with force": "forced"}


def _verdict(text: str, verdict: str | None, docs: str | None) -> str:
    """A check's line (FAILED in red, published with force in orange, an unchecked day in amber) and its
    Data Docs, which open in the frame."""
    css = VERDICT_CSS.get(verdict or "", "")
    link = f" <a class='data-docs' href='{escape(docs)}' target='_self'>Data Docs</a>" if docs else ""
    return f"<span class='quality {css}'>{escape(text)}</span>{link}"


def _quality(v: JobView) -> str:
    """The last quality check."""
    if not v.quality:
        return "<span class='quality none'>no check yet</span>"
    return _verdict(v.quality, v.quality_verdict, v.quality_docs)


def _lag(lag: Mapping[str, int]) -> str:
    return "<br>".join(f"{escape(t)}: {n:,}" for t, n in lag.items()) or "-"


def _num(value: Any, unit: str = "") -> str:
    return "-" if value is None else f"{value:,.1f}{unit}"


def _bytes(value: Any) -> str:
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.1f} GiB"


def _when(t: float | None) -> str:
    return "-" if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _css(state: str) -> str:
    return escape(state.replace(" ", "-"))


def _stages(v: JobView) -> str:
    """The join stages: the one join's words, or a numbered list of a chain's stages."""
    if len(v.stages) < 2:
        return escape(v.stages[0]) if v.stages else "-"
    return "<ol class='stages'>" + "".join(f"<li>{escape(stage)}</li>" for stage in v.stages) + "</ol>"


def _chain_note(v: JobView) -> str:
    """Under a chained pipeline's name in the list: how many join stages it runs, its stages as a tooltip."""
    if len(v.stages) < 2:
        return ""
    return f"<br><small class='stages' title='{escape('; '.join(v.stages))}'>{len(v.stages)} join stages</small>"


def render_jobs(views: Sequence[JobView], jobs_url: str, refresh: int = REFRESH_SECONDS) -> str:
    """The list: one row per pipeline, the name linking to ``{jobs_url}/{pipeline}``."""
    body = "".join(
        f"<tr data-pipeline='{escape(v.pipeline)}'><td><a class='detail' href='{escape(jobs_url)}/"
        f"{quote(v.pipeline)}'>{escape(v.pipeline)}</a>{_chain_note(v)}</td>"
        f"<td class='state {_css(v.state)}' title='{escape(v.reason)}'>{escape(v.state)}</td>"
        f"<td class='last-batch'>{_last_batch(v)}</td>"
        f"<td class='rate'>{escape(v.recent_text)}</td>"
        f"<td class='trend'>{sparkline(list(v.trend), breaks=v.trend_breaks)}</td>"
        f"<td class='lag'>{_lag(v.lag)}</td><td class='restarts'>{len(v.restarts)}</td>"
        f"<td class='quality-cell'>{_quality(v)}</td></tr>"
        for v in views
    )  # fmt: skip
    head = ("<tr><th>Pipeline</th><th>State</th><th>Last batch</th><th>Input rate</th><th>Last hour</th>"
            "<th>Lag per topic</th><th>Restarts</th><th>Last quality check</th></tr>")  # fmt: skip
    return _page("Stream jobs", f"<h2>Stream jobs</h2><table id='stream-jobs'>{head}{body}</table>", refresh)


#: where a link opens: a page of Airflow's UI replaces the whole UI (``_top``), a page of elsewhere opens in a
#: tab of its own (``_blank``: the Spark UI refuses to be framed), a page this plugin serves stays in the frame
TARGETS = {"airflow": "_top", "external": "_blank", "frame": "_self"}


@dataclass(frozen=True)
class Link:
    """A link of the pipeline's page (``id='link-{key}'``); without ``href`` only the note is shown.
    ``kind``: ``airflow``, ``external`` or ``frame`` (:data:`TARGETS`)."""

    key: str
    label: str
    href: str | None
    note: str = ""
    kind: str = "airflow"

    @property
    def target(self) -> str:
        return TARGETS[self.kind]


@dataclass(frozen=True)
class DayCheck:
    """The latest check of one published day: its verdict, what it says, its Data Docs."""

    day: str
    verdict: str
    text: str
    docs: str | None = None


@dataclass(frozen=True)
class JobPage:
    """What one pipeline's page shows: its view, the history its charts plot, links, the actions' form."""

    view: JobView
    history: Sequence[HistoryEntry]
    now: float
    links: Sequence[Link]
    jobs_url: str
    csrf: str
    #: (DAG id, run id, link to the run, whether the DAG is paused) of the run an action just created
    triggered: tuple[str, str, str, bool] | None = None
    hours: float = 6.0
    refresh: int = REFRESH_SECONDS
    #: each published day's latest check, the latest first
    checks: Sequence[DayCheck] = ()
    #: why the action just requested was not triggered
    refused: str | None = None


def charts(history: Sequence[HistoryEntry], now: float, hours: float, restarts: Sequence[float]) -> list[str]:
    """The page's charts over the history of the last ``hours`` (from its first entry if later): rates, lag,
    batch duration, state size, dead letters; job starts and the owner's restarts as markers."""
    start = max(now - hours * 3600, min((e.t for e in history), default=now - 3600) - 1)
    marks = [(t, "job started") for t in job_starts(history)] + [(t, "restarted by its owner") for t in restarts]
    gaps = breaks(history)

    def one(label: str, field: str, color: str, scale: float = 1.0, dashed: bool = False) -> list[Series]:
        return [Series(label, series(history, field, scale), COLORS[color], gaps, dashed)]

    # processed is dashed over input: caught up, both have the same values and one line would hide the other
    rates = [*one("input", "input_rps", "input"), *one("processed", "processed_rps", "processed", dashed=True)]
    spec = [
        ("rates", "Records per second", rates),
        ("lag", "Lag (records left on the inputs)", one("lag", "lag", "lag")),
        ("duration", "Batch duration (s)", one("duration", "duration_ms", "duration", 0.001)),
        ("state", "State size (bytes)", one("state", "state_bytes", "state")),
        ("dead_letters", "Dead letters per batch", one("dead letters", "dead_letters", "dead")),
    ]
    return [line_chart(name, title, lines, start=start, end=now, markers=marks) for name, title, lines in spec]


def render_job(page: JobPage) -> str:
    """One pipeline's page: summary, links, charts, actions."""
    v = page.view
    name = v.pipeline
    restarts = escape(", ".join(_when(t) for t in v.restarts[-5:]))
    took = "" if v.duration_ms is None else f" in {v.duration_ms / 1000:,.1f} s"
    batch = v.batch_id is not None
    last = _last_batch(v, f", {v.last_batch.input_records:,} rows{took}")
    dead = (f"{v.last_batch.dead_letters:,} in the last batch, {v.totals.dead_letters:,} since the query started"
            if batch else "-")  # fmt: skip
    summary = [
        ("state", "State", f"<span class='state {_css(v.state)}'>{escape(v.state)}</span> ({escape(v.reason)})"),
        ("join", "Join stages" if len(v.stages) > 1 else "Join", _stages(v)),
        ("last-batch", "Last batch", last),
        ("rate", "Input rate", escape(v.recent_text)),
        ("batch-rates", "Last batch rates", f"{_num(v.input_rps)} rows/s in, {_num(v.processed_rps)} rows/s processed"),
        ("lag", "Lag per topic", _lag(v.lag)),
        ("state-size", "State size", _bytes(v.last_batch.state_bytes)),
        ("output", "Join results", f"{v.last_batch.output_records:,} in the last batch, "
                                   f"{v.totals.output_records:,} since the query started" if batch else "-"),
        ("dead-letters", "Dead letters", dead),
        ("restarts", "Restarts by its owner", f"{len(v.restarts)}" + (f" (last: {restarts})" if restarts else "")),
        ("starts", "Job (re)starts after the first, last 6 h", str(len(job_starts(page.history)))),
        ("quality", "Last quality check", _quality(v)),
    ]  # fmt: skip
    if v.failure:
        summary.insert(1, ("failure", "Why it stopped", escape(v.failure)))
    table = "".join(f"<tr id='summary-{k}'><th>{escape(label)}</th><td>{v}</td></tr>" for k, label, v in summary)
    links = "".join(
        f"<li>{escape(link.label)}: <a id='link-{escape(link.key)}' href='{escape(link.href)}' "
        f"target='{escape(link.target)}'>{escape(link.href)}</a>"
        f"{' ' + escape(link.note) if link.note else ''}</li>"
        if link.href else f"<li id='link-{escape(link.key)}'>{escape(link.label)}: {escape(link.note or '-')}</li>"
        for link in page.links
    )  # fmt: skip
    notice = ""
    if page.triggered:
        dag_id, run_id, href, paused = page.triggered
        notice = (f"<p class='notice' id='triggered'>Triggered <a id='triggered-run' href='{escape(href)}' "
                  f"target='_top'>{escape(run_id)}</a> of "
                  f"{escape(dag_id)}" + (" (the DAG is paused: the run waits until it is unpaused)" if paused else "")
                  + "</p>")  # fmt: skip
    if page.refused:
        notice += f"<p class='notice refused' id='refused'>Not triggered: {escape(page.refused)}</p>"
    action_url = f"{page.jobs_url}/{quote(name)}/actions"
    hidden = f"<input type='hidden' name='csrf' value='{escape(page.csrf)}'>"
    yesterday = day_before(page.now).isoformat()
    actions = (
        f"<form method='post' action='{escape(action_url)}/stop'>{hidden}"
        "<button id='action-stop' type='submit'>Stop</button></form>"
        f"<form method='post' action='{escape(action_url)}/redeploy'>{hidden}"
        "<button id='action-redeploy' type='submit'>Redeploy</button></form>"
        f"<form method='post' action='{escape(action_url)}/reprocess' id='reprocess-form'>{hidden}"
        f"<label>Start (UTC) <input id='reprocess-day' type='date' name='day' max='{yesterday}' value='{yesterday}' "
        f"required></label> <label>End <input id='reprocess-end' type='date' name='end' max='{yesterday}' "
        "title='the last day, included (empty: the start day)'></label> "
        "<label title='publish even if the check fails; recorded with your name and the reason'>"
        "<input id='reprocess-force' type='checkbox' name='force' value='true'> force</label> "
        "<label>reason <input id='reprocess-reason' type='text' name='reason' maxlength='500' size='24' "
        "placeholder='why force (recorded)'></label> "
        "<button id='action-reprocess' type='submit'>Reprocess</button></form>"
    )  # fmt: skip
    plots = "".join(charts(page.history, page.now, page.hours, v.restarts))
    days = "".join(f"<tr data-day='{escape(c.day)}'><td>{escape(c.day)}</td><td>{_verdict(c.text, c.verdict, c.docs)}"
                   "</td></tr>" for c in page.checks)  # fmt: skip
    checks = (f"<table id='day-checks'><tr><th>Day</th><th>Its latest check</th></tr>{days}</table>" if days
              else "<p id='day-checks'>No day checked yet.</p>")  # fmt: skip
    body = (
        f"<p><a id='all-jobs' href='{escape(page.jobs_url)}'>Stream jobs</a></p><h2>{escape(name)}</h2>{notice}"
        f"<table id='summary'>{table}</table><h3>Links</h3><ul class='links'>{links}</ul>"
        f"<h3>Quality checks of the published days</h3>{checks}"
        f"<h3>History (last {page.hours:g} hours)</h3><div class='charts'>{plots}</div>"
        f"<h3>Actions</h3><p>Each creates a run of an Airflow DAG (your permissions apply).</p>"
        f"<div id='actions'>{actions}</div>"
    )  # fmt: skip
    return _page(f"Stream job {name}", body, page.refresh)


def day_before(now: float) -> date:
    """The last day (UTC) that is over at ``now``."""
    return datetime.fromtimestamp(now, UTC).date() - timedelta(days=1)
