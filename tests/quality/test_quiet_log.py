"""A check's log says what a person needs, not GX's own chatter (about 230 lines per check before)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest


def test_creating_the_gx_context_and_data_source_logs_nothing_below_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    from streamjoin.quality.validate import _context  # imports GX (its import logged ~100 INFO lines before)

    context = _context(tmp_path / "docs")
    context.data_sources.add_spark(name="p", persist=False).add_dataframe_asset(name="enriched")  # 26 lines each
    chatter = [r for r in caplog.records if r.name.startswith("great_expectations") and r.levelno < logging.WARNING]
    assert chatter == [], [r.getMessage() for r in chatter[:3]]
    assert not [r for r in caplog.records if "DeprecationWarning" in r.getMessage()]
