"""Check results and quarantine markers as plain JSON files inside the day partition.

A partition ``.../date=YYYY-MM-DD/`` gets ``_CHECK_RESULT.json`` (the latest :class:`CheckResult` of its data)
and, when a blocking check failed, ``_QUARANTINED`` (JSON: the reason). A published day whose recomputation
failed its check keeps its data and its ``_CHECK_RESULT.json``, and gets that failed check as
``_FAILED_RECHECK.json`` (until a new version of the day is swapped in). Spark and Parquet readers skip names
starting with ``_``, so neither file disturbs the data. Stdlib only: the status page and the reprocessing
DAG read these without GX or Spark.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULT_FILE = "_CHECK_RESULT.json"
QUARANTINE_FILE = "_QUARANTINED"
#: the failed check of a recomputation of a published day, which was dropped (the day keeps its version)
RECHECK_FILE = "_FAILED_RECHECK.json"
#: the outcome a day without output rows fails on (its other checks are not run)
ROW_COUNT = "row_count"


@dataclass(frozen=True)
class ExpectationOutcome:
    """How one check of the plan went.

    :param observed: the GX observed value (aggregate expectations) or, for row-wise expectations, a dict
        with ``unexpected_count``, ``unexpected_percent`` and a ``sample`` of unexpected values
    """

    name: str
    expectation: str
    success: bool
    observed: Any
    blocking: bool
    description: str = ""
    error: str | None = None

    def observed_text(self) -> str:
        """The observed value for a person (alerts, status page)."""
        if self.error:
            return f"error: {self.error}"
        value = self.observed
        if isinstance(value, dict) and "unexpected_count" in value:
            percent = value.get("unexpected_percent")
            text = f"{value['unexpected_count']} unexpected rows"
            if percent is not None:
                text += f" ({percent:.4g}%)"
            if value.get("sample"):
                text += f", e.g. {json.dumps(value['sample'][:5], default=str)}"
            return text
        if isinstance(value, float):
            return f"{value:.6g}"
        return json.dumps(value, default=str)


@dataclass(frozen=True)
class CheckResult:
    """The outcome of validating one day partition of one pipeline output.

    ``success`` is False when a blocking check failed; failed warning checks are listed in ``warnings``.
    """

    pipeline: str
    target: str
    day: str
    success: bool
    blocking_failed: list[str]
    warnings: list[str]
    expectations: list[ExpectationOutcome]
    run_id: str = ""
    checked_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    row_count: int | None = None
    partition_path: str | None = None
    suite_file: str | None = None
    data_docs_url: str | None = None

    @classmethod
    def from_outcomes(
        cls, *, pipeline: str, target: str, day: str, expectations: list[ExpectationOutcome], **extra: Any
    ) -> CheckResult:
        blocking = [e.name for e in expectations if not e.success and e.blocking]
        warnings = [e.name for e in expectations if not e.success and not e.blocking]
        return cls(
            pipeline=pipeline,
            target=target,
            day=day,
            success=not blocking,
            blocking_failed=blocking,
            warnings=warnings,
            expectations=expectations,
            **extra,
        )

    def outcome(self, name: str) -> ExpectationOutcome:
        for outcome in self.expectations:
            if outcome.name == name:
                return outcome
        raise KeyError(name)

    @property
    def dag_run_id(self) -> str:
        """The Airflow run that checked (``run_id`` without the ``-try<n>`` the operators add)."""
        return re.sub(r"-try\d+$", "", self.run_id) or "an unknown run"

    @property
    def failed(self) -> list[ExpectationOutcome]:
        return [e for e in self.expectations if not e.success]

    def summary(self) -> str:
        status = "passed" if self.success else "FAILED"
        text = f"{self.pipeline} {self.target} {self.day}: {status}"
        if self.row_count == 0 and not self.success:
            return f"{text}: 0 rows (the day has no output; was there input for it?)"
        if self.blocking_failed:
            text += f"; blocking: {', '.join(self.blocking_failed)}"
        if self.warnings:
            text += f"; warnings: {', '.join(self.warnings)}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckResult:
        outcomes = [ExpectationOutcome(**e) for e in data.get("expectations", [])]
        return cls(**{**data, "expectations": outcomes})


def data_docs_file(url: str | None) -> Path | None:
    """The local file behind a ``file://`` Data Docs URL (percent-decoded), else None."""
    if not url or not url.startswith("file://"):
        return None
    return Path(urllib.request.url2pathname(urllib.parse.urlparse(url).path))


def _write_atomic(path: Path, text: str) -> None:
    """Readers (the status page) never see a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.name)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_check_result(result: CheckResult, partition_path: str | Path) -> Path:
    """Save ``result`` as ``<partition>/_CHECK_RESULT.json``, replacing the previous run's."""
    path = Path(partition_path) / RESULT_FILE
    _write_atomic(path, result.to_json())
    return path


def read_check_result(partition_path: str | Path) -> CheckResult | None:
    """The latest result of a partition, or None if it was never checked."""
    path = Path(partition_path) / RESULT_FILE
    if not path.exists():
        return None
    return CheckResult.from_dict(json.loads(path.read_text()))


def write_failed_recheck(result: CheckResult, partition_path: str | Path) -> Path:
    """Save a failed check of a recomputation of the published day ``partition_path`` beside it
    (``_FAILED_RECHECK.json``): the day's data and ``_CHECK_RESULT.json`` stay those of its published version."""
    path = Path(partition_path) / RECHECK_FILE
    _write_atomic(path, result.to_json())
    return path


def read_failed_recheck(partition_path: str | Path) -> CheckResult | None:
    """The failed check of the day's latest recomputation, if it was dropped (None: there was none since the
    published version was swapped in)."""
    path = Path(partition_path) / RECHECK_FILE
    return CheckResult.from_dict(json.loads(path.read_text())) if path.exists() else None


def latest_check_result(output_path: str | Path) -> CheckResult | None:
    """The most recent result under an output directory (any ``date=*`` partition below it)."""
    results = [read_check_result(p.parent) for p in Path(output_path).rglob(RESULT_FILE)]
    found = [r for r in results if r is not None]
    return max(found, key=lambda r: (r.checked_at, r.day), default=None)


def quarantine(partition_path: str | Path, result: CheckResult) -> Path:
    """Mark a day as not publishable, with the reason: the failed blocking checks and what they observed."""
    reason = {
        "pipeline": result.pipeline,
        "target": result.target,
        "day": result.day,
        "run_id": result.run_id,
        "quarantined_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "reason": f"blocking checks failed: {', '.join(result.blocking_failed)}",
        "failed": [
            {"name": e.name, "observed": e.observed_text(), "description": e.description}
            for e in result.failed
            if e.blocking
        ],
        "data_docs_url": result.data_docs_url,
    }
    path = Path(partition_path) / QUARANTINE_FILE
    _write_atomic(path, json.dumps(reason, indent=2, default=str))
    return path


def read_quarantine(partition_path: str | Path) -> dict[str, Any] | None:
    path = Path(partition_path) / QUARANTINE_FILE
    return json.loads(path.read_text()) if path.exists() else None


def is_quarantined(partition_path: str | Path) -> bool:
    return (Path(partition_path) / QUARANTINE_FILE).exists()


def release_quarantine(partition_path: str | Path) -> bool:
    """Remove the marker (a re-run passed); True if there was one."""
    path = Path(partition_path) / QUARANTINE_FILE
    existed = path.exists()
    path.unlink(missing_ok=True)
    return existed
