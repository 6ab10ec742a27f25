"""Report what the reprocessing application did to a checked day: the gate's verdict, as Airflow shows it.

``ReprocessDayOperator`` runs ``jobs/reprocess_day.py --check``: in one Spark application the day is computed,
staged, checked (GX 1.x) and published, quarantined, kept or forced (:mod:`streamjoin.quality.gate`), and what
was done is recorded as a :class:`~streamjoin.core.publish.DayOutcome` in ``daily/_staging/date=D.outcome.json``.
This operator (no Spark, no GX) reads it:

* passed: succeeds, and the day's asset event is recorded (its extra names the day);
* failed, nothing published yet: the day was swapped in quarantined (``_QUARANTINED``); fails, alerts, no
  asset event;
* failed, a day already there: that day stays as it is (published, or quarantined; a published one has the
  failed check beside it, ``_FAILED_RECHECK.json``); fails, alerts, no asset event;
* failed with ``force``: published anyway with ``_FORCED.json`` (who, which run, what failed, why); logs a
  warning and succeeds (the asset event's extra says ``forced``).

A failure raises :class:`~streamjoin.airflow.operators.quality.QualityCheckFailed` with the check, which the
failure callbacks' alerts read. It releases the day's lock that reprocessing took, whatever happens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from streamjoin.airflow.operators.quality import QualityCheckFailed
from streamjoin.airflow.operators.reprocess import (
    checked_before_publishing,
    day_lock,
    emit_day_event,
    is_true,
    run_identity,
)
from streamjoin.core.backfill import parse_day
from streamjoin.core.plans import resolve
from streamjoin.core.publish import Action, DayOutcome, outcome_location, read_outcome
from streamjoin.core.spec import load_spec
from streamjoin.core.storage import LocalStorage
from streamjoin.quality.results import RESULT_FILE, CheckResult


class CheckAndPublishDayOperator(BaseOperator):
    """Report the check and publication the reprocessing application did for a pipeline's day (see the module
    docstring). Alerts through ``on_failure_callback``.

    :param spec_path: pipeline spec (templated)
    :param day: ``YYYY-MM-DD`` (templated)
    :param dry_run: the reprocessing was a dry run: nothing was checked, this task is skipped (templated)
    """

    template_fields: Sequence[str] = ("spec_path", "day", "count_only")
    ui_color = "#e8f4ea"

    def __init__(self, *, spec_path: str, day: str, dry_run: bool | str = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec_path, self.day, self.count_only = spec_path, day, dry_run

    def execute(self, context: Any) -> dict[str, Any]:
        if is_true(self.count_only):
            raise AirflowSkipException("dry run: nothing was staged, nothing to check or publish")
        spec = load_spec(resolve(self.spec_path))
        if not checked_before_publishing(spec) or spec.output.files is None:
            raise AirflowSkipException(f"{spec.name} has no quality suite: reprocess_day published the day itself")
        day = parse_day(str(self.day))
        lock = day_lock(spec, day)
        run = run_identity(context)
        try:
            outcome = self._outcome(context, outcome_location(str(resolve(spec.output.files.path)), day))
        finally:
            if lock is not None:
                lock.release(*run)
        result = CheckResult.from_dict(outcome.check) if outcome.check is not None else None
        if result is None:
            raise AirflowFailException(f"{spec.name} {day}: the reprocessing recorded no check: {outcome.consequence}")
        self._log_check(result, outcome)
        if not outcome.published:
            raise QualityCheckFailed(result, outcome.consequence)
        if outcome.action == Action.FORCE:
            self.log.warning("%s %s published with force over a failed check (%s); recorded in %s",
                             spec.name, day, ", ".join(result.blocking_failed), outcome.forced_file)  # fmt: skip
        extra = {"pipeline": spec.name, "day": day.isoformat(), "path": outcome.path,
                 "forced": outcome.action == Action.FORCE}  # fmt: skip
        emit_day_event(context, self.outlets, spec, extra)
        self.log.info("progress: %s %s %s at %s", spec.name, day, outcome.consequence, outcome.path)
        return {**extra, "warnings": result.warnings, "data_docs_url": result.data_docs_url,
                "result_file": f"{outcome.path}/{RESULT_FILE}"}  # fmt: skip

    def _outcome(self, context: Any, location: str) -> DayOutcome:
        """This run's recorded outcome (one of another run is not this run's verdict)."""
        outcome = read_outcome(LocalStorage(), location)
        if outcome is None:
            raise AirflowFailException(
                f"no outcome recorded at {location}: the reprocess_day task's application checks the day and "
                "records it; see its log, then reprocess the day again"
            )
        dag_id, run_id = run_identity(context)
        if (outcome.dag_id, outcome.run_id) != (dag_id, run_id) and not run_id.startswith("direct-"):
            raise AirflowFailException(
                f"the outcome at {location} is run {outcome.run_id!r}'s of DAG {outcome.dag_id!r}, not this run's "
                f"({run_id!r}): did reprocess_day run in this run? Reprocess the day again"
            )
        return outcome

    def _log_check(self, result: CheckResult, outcome: DayOutcome) -> None:
        """What the check found, as the task log shows it: each failed check at its severity, the verdict and
        its Data Docs."""
        if outcome.left_records is not None:
            self.log.info("%s %s: %d left input records of the day (each must have its output)",
                          result.pipeline, result.day, outcome.left_records)  # fmt: skip
        for failed in result.failed:
            level = "error" if failed.blocking else "warning"
            getattr(self.log, level)(
                "%s failed (%s): observed %s -- %s", failed.name, level, failed.observed_text(), failed.description
            )
        self.log.info("%s; Data Docs: %s (checked in %.1fs, in the reprocessing application)",
                      result.summary(), result.data_docs_url or "(none)", outcome.check_seconds)  # fmt: skip
