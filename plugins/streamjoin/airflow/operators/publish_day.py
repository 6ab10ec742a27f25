"""Check a staged day and publish it only if it passes: the gate between reprocessing and consumers.

``ReprocessDayOperator`` stages the day in ``<files.path>/daily/_staging/date=D``; this operator validates it
(GX, as :class:`DataQualityOperator`) and then, by :func:`streamjoin.core.publish.decide`:

* passed: swaps it in as ``daily/date=D`` (replacing a published or quarantined day) and succeeds, so the
  day's asset event is recorded (its extra names the day);
* failed, nothing published yet: swaps it in quarantined (``_QUARANTINED``), fails, alerts, no asset event;
* failed, a day already there: that day stays as it is (published, or quarantined), the staged one is
  dropped; fails, alerts, no asset event;
* failed with ``force``: swaps it in anyway with ``_FORCED.json`` (who, which run, what failed), logs a
  warning and succeeds (the asset event's extra says ``forced``).

It releases the day's lock that reprocessing took, whatever happens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from streamjoin.airflow.operators.quality import DataQualityOperator, QualityCheckFailed
from streamjoin.airflow.operators.reprocess import checked_before_publishing, day_lock, emit_day_event, run_identity
from streamjoin.core.backfill import parse_day, partition_location
from streamjoin.core.plans import resolve
from streamjoin.core.publish import Action, ForcedRecord, decide, record_forced, staged_location, swap_in
from streamjoin.core.spec import PipelineSpec, load_spec
from streamjoin.core.storage import LocalStorage
from streamjoin.quality.results import (
    QUARANTINE_FILE,
    CheckResult,
    is_quarantined,
    release_quarantine,
    write_check_result,
)


def _true(value: Any) -> bool:
    return value is True or str(value).strip().lower() in ("true", "1", "yes")


def day_targets(spec: PipelineSpec, day: Any) -> list[tuple[str, str]]:
    """(staged, published) locations of the day, the enriched output first, then the aggregate's."""
    sinks = [spec.output.files] + ([spec.aggregate.output.files] if spec.aggregate is not None else [])
    return [
        (staged_location(str(resolve(f.path)), day), partition_location(str(resolve(f.path)), day))
        for f in sinks
        if f is not None
    ]


class CheckAndPublishDayOperator(DataQualityOperator):
    """Validate the staged day of a pipeline's enriched output and publish it only if it passes (or with
    ``force``); see the module docstring. Alerts through ``on_failure_callback``.

    :param spec_path: pipeline spec (templated)
    :param day: ``YYYY-MM-DD`` (templated)
    :param data_docs_dir: root of the Data Docs (templated)
    :param force: publish even if a blocking check fails (recorded in ``_FORCED.json``) (templated)
    :param dry_run: the reprocessing was a dry run: nothing staged, this task is skipped (templated)
    """

    template_fields: Sequence[str] = (*DataQualityOperator.template_fields, "force", "count_only")

    def __init__(
        self, *, spec_path: str, day: str, data_docs_dir: str, force: bool | str = False,
        dry_run: bool | str = False, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(spec_path=spec_path, day=day, partition_path="", data_docs_dir=data_docs_dir, **kwargs)
        self.force, self.count_only = force, dry_run

    def execute(self, context: Any) -> dict[str, Any]:

        if _true(self.count_only):
            raise AirflowSkipException("dry run: nothing was staged, nothing to check or publish")
        spec = load_spec(resolve(self.spec_path))
        if not checked_before_publishing(spec):
            raise AirflowSkipException(f"{spec.name} has no quality suite: reprocess_day published the day itself")
        day = parse_day(str(self.day))
        if spec.output.files is None:
            raise AirflowFailException(f"{spec.name} writes no files: there is no day to check")
        targets = day_targets(spec, day)
        staged, published = Path(targets[0][0]), Path(targets[0][1])
        lock = day_lock(spec, day)
        run = run_identity(context)
        try:
            if not staged.is_dir():
                raise AirflowFailException(
                    f"nothing is staged for {spec.name} {day} at {staged}: the reprocess_day task stages it"
                )
            result = replace(self.check(context, staged), partition_path=str(published))  # where it ends up
            was_quarantined = published.is_dir() and is_quarantined(published)
            action = decide(result.success, force=_true(self.force), published_exists=published.is_dir())
            consequence = self._apply(action, context, spec, targets, result, was_quarantined)
        finally:
            if lock is not None:
                lock.release(*run)
        if action in (Action.QUARANTINE, Action.KEEP):
            raise QualityCheckFailed(result, consequence)
        outcome = {"pipeline": spec.name, "day": day.isoformat(), "path": str(published),
                   "forced": action is Action.FORCE, "warnings": result.warnings,
                   "data_docs_url": result.data_docs_url}  # fmt: skip
        emit_day_event(context, self.outlets, spec, {k: outcome[k] for k in ("pipeline", "day", "path", "forced")})
        self.log.info("progress: %s %s %s at %s", spec.name, day, consequence, published)
        return outcome

    def _apply(
        self, action: Action, context: Any, spec: PipelineSpec, targets: list[tuple[str, str]],
        result: CheckResult, was_quarantined: bool,
    ) -> str:  # fmt: skip
        """Do what the verdict decided; returns what became of the day, in words."""
        storage = LocalStorage()
        published = Path(targets[0][1])
        again = " (reprocess with force to publish it anyway)"
        if action is Action.KEEP:
            for staged, _ in targets:
                storage.delete(staged)
            if was_quarantined:  # the newest verdict on the day, kept beside its (older) data
                write_check_result(result, published)
                return f"the day stays quarantined at {published}; nothing republished{again}"
            return f"the published day {published} stays as it was; the new computation was dropped{again}"
        for staged, target in targets:
            swap_in(storage, staged, target)
        write_check_result(result, published)
        if action is Action.PUBLISH:
            return "passed its check and was published" + (" (its quarantine lifted)" if was_quarantined else "")
        if action is Action.QUARANTINE:
            marker = (published / QUARANTINE_FILE).read_text()
            for _, target in targets[1:]:
                if Path(target).is_dir():
                    (Path(target) / QUARANTINE_FILE).write_text(marker)
            return f"day quarantined at {published} (nothing was published before){again}"
        for _, target in targets:
            release_quarantine(target)
        dag_run = context.get("dag_run")
        dag_id, run_id = run_identity(context)
        record = ForcedRecord(
            day=result.day, dag_id=dag_id, run_id=run_id,
            user=getattr(dag_run, "triggering_user_name", None), failed=result.blocking_failed,
            summary=result.summary(), at=datetime.now(UTC).isoformat(timespec="seconds"),
        )  # fmt: skip
        path = record_forced(storage, str(published), record)
        self.log.warning("%s %s published with force over a failed check (%s); recorded in %s",
                         spec.name, result.day, ", ".join(result.blocking_failed), path)  # fmt: skip
        return f"published with force over its failed check ({', '.join(result.blocking_failed)}), recorded in {path}"
