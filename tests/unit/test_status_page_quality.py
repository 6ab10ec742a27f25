"""What the status pages say about quality (each day's latest check, whatever it decided: passed, quarantined,
a failed recomputation of a published day, published with force; the day that changed last first, never an
older day's verdict while a newer one is unchecked), and Data Docs served without what they would fetch from
CDNs."""

from __future__ import annotations

import os
from pathlib import Path

from streamjoin.airflow.data_docs import offline_html
from streamjoin.airflow.quality_status import FAILED, FORCED, PASSED, quality_days, quality_status
from streamjoin.core.publish import ForcedRecord, record_forced
from streamjoin.core.storage import LocalStorage
from streamjoin.quality.results import (
    CheckResult,
    ExpectationOutcome,
    quarantine,
    write_check_result,
    write_failed_recheck,
)


def _check(day: str, success: bool, run_id: str = "", docs: str | None = None) -> CheckResult:
    outcome = ExpectationOutcome("match_rate", "expect_column_mean_to_be_between", success, 0.5, True)
    return CheckResult.from_outcomes(pipeline="p", target="enriched", day=day, expectations=[outcome], run_id=run_id,
                                     data_docs_url=docs)  # fmt: skip


def _day(root: Path, day: str, at: float, *, success: bool | None = None, checked_at: float | None = None) -> Path:
    """A published day written at ``at`` (its data file's time) and, with ``success``, checked at
    ``checked_at``."""
    partition = root / "daily" / f"date={day}"
    partition.mkdir(parents=True)
    data = partition / "part-0000.parquet"
    data.write_bytes(b"PAR1")
    os.utime(data, (at, at))
    if success is not None:
        outcome = ExpectationOutcome("match_rate", "expect_column_mean_to_be_between", success, 0.5, True)
        result = CheckResult.from_outcomes(pipeline="p", target="enriched", day=day, expectations=[outcome])
        written = write_check_result(result, partition)
        if not success:
            quarantine(partition, result)
        when = checked_at if checked_at is not None else at + 10
        os.utime(written, (when, when))
    return partition


def test_the_day_that_changed_last_is_shown_and_a_rewritten_day_reads_as_not_checked(tmp_path: Path) -> None:
    assert quality_status(tmp_path) is None
    _day(tmp_path, "2026-11-22", 1000.0, success=True)
    newest = _day(tmp_path, "2026-11-23", 2000.0, success=False)
    (tmp_path / "daily" / ".date=2026-11-24-staging").mkdir()  # not a published day
    status = quality_status(tmp_path)
    assert status is not None and (status.day, status.verdict, status.quarantined) == ("2026-11-23", "FAILED", True)
    assert status.failed and status.text == (
        "p enriched 2026-11-23: FAILED; blocking: match_rate; quarantined: nothing of the day is published"
    )

    # the 23rd is reprocessed (new data) and not checked yet: not the 22nd's "passed"
    data = newest / "part-0000.parquet"
    os.utime(data, (3000.0, 3000.0))
    status = quality_status(tmp_path)
    assert status is not None and (status.day, status.verdict) == ("2026-11-23", "not checked")
    assert status.text == (
        "2026-11-23: not checked since its data was written at 1970-01-01 00:50 UTC (the check before: FAILED); "
        "quarantined"
    )
    assert status.result is not None and not status.failed

    # an older day checked again later is what changed last
    (tmp_path / "daily" / "date=2026-11-22" / "_CHECK_RESULT.json").touch()
    status = quality_status(tmp_path)
    assert status is not None and (status.day, status.verdict) == ("2026-11-22", "passed")


def test_a_failed_recheck_of_a_published_day_is_its_latest_check_and_names_the_published_version(
    tmp_path: Path,
) -> None:
    published = _day(tmp_path, "2026-11-22", 1000.0)
    first = write_check_result(_check("2026-11-22", True, "scheduled__2026-11-23T00:00:00+00:00-try1"), published)
    os.utime(first, (1010.0, 1010.0))
    _day(tmp_path, "2026-11-21", 1500.0, success=True)  # another day checked later
    status = quality_status(tmp_path)
    assert status is not None and (status.day, status.verdict) == ("2026-11-21", PASSED)

    # the 22nd reprocessed and checked again: failed, dropped; the day keeps its version, the check is its latest
    again = _check("2026-11-22", False, "manual__2026-11-27T10:00:00+00:00-try2", "http://af/streamjoin/data-docs/p/x")
    os.utime(write_failed_recheck(again, published), (2000.0, 2000.0))
    days = quality_days(tmp_path)
    assert [(d.day, d.verdict) for d in days] == [("2026-11-22", FAILED), ("2026-11-21", PASSED)]
    assert days[0].text == (
        "p enriched 2026-11-22: FAILED; blocking: match_rate; not published: the published version is from run "
        "scheduled__2026-11-23T00:00:00+00:00"
    )
    assert days[0].result == again and days[0].published_from == "scheduled__2026-11-23T00:00:00+00:00"
    assert not days[0].quarantined

    # a new version swapped in later (a new directory: no failed recheck beside it) reads as its own check
    swapped = tmp_path / "daily" / ".date=2026-11-22.new"
    swapped.mkdir()
    (swapped / "part-0000.parquet").write_bytes(b"PAR1")
    os.utime(write_check_result(_check("2026-11-22", True, "manual__3-try1"), swapped), (3000.0, 3000.0))
    os.utime(swapped / "part-0000.parquet", (2990.0, 2990.0))
    published.rename(tmp_path / "daily" / ".date=2026-11-22.old")
    swapped.rename(published)
    status = quality_status(tmp_path)
    assert status is not None and (status.day, status.verdict, status.text) == (
        "2026-11-22", PASSED, "p enriched 2026-11-22: passed")


def test_a_day_published_with_force_says_who_published_it_over_which_failure_and_why(tmp_path: Path) -> None:
    day = _day(tmp_path, "2026-11-22", 1000.0)
    os.utime(write_check_result(_check("2026-11-22", False, "manual__f-try1"), day), (1010.0, 1010.0))
    record = ForcedRecord(day="2026-11-22", dag_id="streamjoin_reprocess", run_id="manual__f", user="alice",
                          failed=["match_rate"], summary="...", at="2026-11-27T10:00:00+00:00",
                          reason="the right topic was late; accepted by sales")  # fmt: skip
    record_forced(LocalStorage(), str(day), record)
    status = quality_status(tmp_path)
    assert status is not None and status.verdict == FORCED and not status.failed
    assert status.text == (
        "p enriched 2026-11-22: FAILED; blocking: match_rate; published with force over the failed check by alice "
        "(run manual__f): the right topic was late; accepted by sales"
    )
    # a failed recheck of a forced day names the forced version
    os.utime(write_failed_recheck(_check("2026-11-22", False, "manual__g-try1"), day), (2000.0, 2000.0))
    status = quality_status(tmp_path)
    assert status is not None and status.verdict == FAILED
    assert status.text.endswith("the published version is from run manual__f, published with force")


def test_data_docs_pages_lose_their_cdn_assets_and_get_the_local_stylesheet() -> None:
    page = (
        "<html><head><title>t</title>"
        '<link href="https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css" rel="stylesheet">'
        "<link rel='stylesheet' href='//cdnjs.cloudflare.com/ajax/libs/font-awesome/6.6.0/css/all.min.css'/>"
        '<link rel="stylesheet" href="../static/styles/data_docs_default_styles.css">'
        '<script src="https://code.jquery.com/jquery-3.7.1.min.js"></script>'
        "<script>var inline = 1;</script><style>a{background: url('https://s3.example/logo.png') 0 0}</style>"
        '</HEAD><body><div class=\'card\'>ok</div><img\n  src="https://s3.example/logo-long.png?d=1" alt="GX"/>'
        "</body></html>"
    )
    out = offline_html(page, "/streamjoin/static/data-docs.css")
    assert "bootstrapcdn" not in out and "cdnjs" not in out and "jquery" not in out
    assert '<link rel="stylesheet" href="../static/styles/data_docs_default_styles.css">' in out  # local: kept
    assert "<script>var inline = 1;</script>" in out and "<div class='card'>ok</div>GX</body>" in out
    assert "s3.example" not in out and "background: none 0 0" in out
    assert out.index('href="/streamjoin/static/data-docs.css"') < out.index("</HEAD>")
