"""What the status pages say about quality (the day that changed last, never an older day's verdict while a
newer one is unchecked), and Data Docs served without what they would fetch from CDNs."""

from __future__ import annotations

import os
from pathlib import Path

from streamjoin.airflow.data_docs import offline_html
from streamjoin.airflow.quality_status import quality_status
from streamjoin.quality.results import CheckResult, ExpectationOutcome, quarantine, write_check_result


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
    assert status.failed and status.text == "p enriched 2026-11-23: FAILED; blocking: match_rate; quarantined"

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
