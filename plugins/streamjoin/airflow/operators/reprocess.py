"""Reprocess a past day of a pipeline: plan it, check Kafka still holds its range, spark-submit the batch job.

A pipeline with a quality suite (:func:`checked_before_publishing`) has the day staged, checked and published
(or quarantined, or kept) by that one application (``jobs/reprocess_day.py --check``,
:mod:`streamjoin.quality.gate`), which records what it did (``DayOutcome``); the next task
(``CheckAndPublishDayOperator``, operators/publish_day.py) reports it: fails and alerts on a failed check,
records the day's asset event on a published one. Without a suite the job publishes the day itself. Either
way one run at a time reprocesses a pipeline-day (``streamjoin.core.publish.DayLock``), and a day whose input
topics hold no record of it is skipped with a warning (nothing published).

Values from a trigger form reach spark-submit only as separate list arguments (never a shell string), and
``day`` must parse as a date before anything runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from airflow.sdk import Asset, BaseOperator

from streamjoin.airflow.lineage import SpecLineageMixin
from streamjoin.airflow.ui_paths import DATA_DOCS_DIR
from streamjoin.core.backfill import (
    BackfillPlan,
    RetentionFact,
    check_retention,
    parse_day,
    partition_path,
    plan_day,
)
from streamjoin.core.plans import (
    PROJECT_HOME,
    SubmitPlan,
    connector_jars,
    job_plan,
    package_zip,
    resolve,
    secrets_dir,
)
from streamjoin.core.publish import DayBusy, DayLock, lock_location
from streamjoin.core.spec import PipelineSpec, Role, load_spec
from streamjoin.core.storage import LocalStorage
from streamjoin.kafka.client_config import KafkaTarget

REPROCESS_JOB = "jobs/reprocess_day.py"


def daily_asset(spec: PipelineSpec, home: Path = PROJECT_HOME) -> Asset | None:
    """The asset of a pipeline's published days (``<output files>/daily``); each event's extra names the day."""
    if spec.output.files is None:
        return None
    root = resolve(spec.output.files.path, home) / "daily"
    return Asset(name=f"streamjoin_{spec.name}_daily", uri=f"file://{root}", group="streamjoin")


def checked_before_publishing(spec: PipelineSpec) -> bool:
    """Is a reprocessed day of ``spec`` staged and checked before it is published (it has a quality suite and
    file output)? Then the check task publishes it and carries the day's asset; else reprocessing does."""
    return spec.quality is not None and spec.output.files is not None


def day_lock(spec: PipelineSpec, day: date, home: Path = PROJECT_HOME) -> DayLock | None:
    """The lock of a pipeline-day (None: the pipeline writes no files, nothing to publish)."""
    if spec.output.files is None:
        return None
    return DayLock(LocalStorage(), lock_location(str(resolve(spec.output.files.path, home)), day), spec.name, day)


def run_identity(context: Any) -> tuple[str, str]:
    """``(dag_id, run_id)`` of the task's DAG run, which holds a day's lock; an ``execute`` called outside a DAG
    run (a script, a test) gets a one-off identity, which no run holds (another run may take the lock over)."""
    dag_id = getattr(context.get("dag"), "dag_id", None) or getattr(context.get("ti"), "dag_id", None)
    run_id = context.get("run_id")
    if dag_id is None or run_id is None:
        return "<outside a DAG run>", f"direct-{uuid.uuid4().hex[:12]}"
    return str(dag_id), str(run_id)


def run_is_active(context: Any) -> Any:
    """``(dag_id, run_id) -> bool`` through the task's API client: is that run still queued or running?"""
    ti = context.get("ti")

    def active(dag_id: str, run_id: str) -> bool:
        try:
            state = ti.get_dagrun_state(dag_id, run_id)
        except Exception:  # the run is gone (deleted): nothing holds the day
            return False
        return str(state).lower().rsplit(".", 1)[-1] in ("queued", "running")

    return active


def input_records_of_day(kafka: KafkaTarget, spec: PipelineSpec, plan: BackfillPlan) -> dict[str, int]:
    """Per input topic that drives the output (stream inputs; every input when there is none): how many of
    its records Kafka finds by timestamp within the day (offsets-for-time of day start and day end)."""
    from streamjoin.kafka.clients import offsets_for_time

    streams = [r for r in plan.reads if r.role is Role.STREAM] or list(plan.reads)
    counts = {}
    for read in streams:
        first = offsets_for_time(kafka, read.topic, plan.start_ms)
        after = offsets_for_time(kafka, read.topic, plan.end_ms)
        counts[read.topic] = sum(max(0, after[p] - first.get(p, after[p])) for p in after)
    return counts


def plan_reprocess(
    spec: PipelineSpec,
    spec_path: str | Path,
    kafka_args: Sequence[str],
    days: Iterable[date],
    jars: list[str],
    *,
    dry_run: bool = False,
    stage: bool = False,
    home: Path = PROJECT_HOME,
    py_files: Sequence[str] = (),
    check_args: Sequence[str] = (),
) -> SubmitPlan:
    """spark-submit plan of ``jobs/reprocess_day.py`` (``kafka_args``: ``--bootstrap B`` or
    ``--kafka-config FILE``, see ``KafkaClientConfig.job_arguments``; ``check_args``: ``--check`` and its
    options, see the job's docstring)."""
    args = ["--spec", str(resolve(spec_path, home)), "--home", str(home)]
    for day in days:
        args += ["--day", parse_day(day).isoformat()]
    if dry_run:
        args.append("--dry-run")
    if stage:
        args.append("--stage")
    args += list(check_args)
    return job_plan(f"streamjoin-reprocess-{spec.name}", home / REPROCESS_JOB, args, kafka_args, spec, jars,
                    py_files=py_files, conf={"spark.ui.enabled": "false"})  # fmt: skip


def retention_facts(kafka: KafkaTarget, topics: Iterable[str], timeout: float = 10.0) -> dict[str, RetentionFact]:
    """Per topic: were records deleted (log start offset > 0), and the earliest available record time."""
    from streamjoin.kafka.offsets import KafkaOffsets

    offsets = KafkaOffsets(kafka, timeout=timeout)
    facts: dict[str, RetentionFact] = {}
    for topic in topics:
        parts = offsets.partitions([topic])
        truncated = any(start > 0 for start in offsets.earliest(parts).values())
        stamps = [ts for ts in offsets.first_timestamps(parts).values() if ts is not None]
        facts[topic] = RetentionFact(truncated, min(stamps, default=None))
    return facts


class ReprocessDayOperator(SpecLineageMixin, BaseOperator):
    """Recompute one past day of a pipeline with the streaming job's code. A pipeline checked before
    publishing (:func:`checked_before_publishing`) gets the day staged, checked and published or not in the
    same Spark application, which records what it did for the check task (that task then holds the day's lock
    and reports); any other is published atomically under ``<output files>/daily/date=D/`` with an asset
    event (extra: pipeline, day, path) unless ``dry_run``. A day without input records is skipped.

    :param spec_path: pipeline spec, relative to the project home or absolute (templated)
    :param day: ``YYYY-MM-DD`` (templated)
    :param dry_run: count only, write nothing (kept as ``count_only``: ``BaseOperator.dry_run`` is a method)
    :param force: publish a checked day even if a blocking check fails (recorded in ``_FORCED.json`` with the
        run's triggering user) (templated)
    :param force_reason: why, in the user's words (recorded with ``force``) (templated)
    :param data_docs_dir: root of the checks' Data Docs (templated)
    :param data_docs_base_url: URL ``data_docs_dir`` is served under, for links in alerts, logs and pages;
        default for the directory the plugin serves: its route under Airflow's ``[api] base_url`` (templated)
    """

    #: ``count_only`` too: inside a mapped task group its value arrives as a mapped argument, resolved on rendering
    template_fields: Sequence[str] = ("spec_path", "day", "kafka_conn_id", "spark_conn_id", "count_only", "force",
                                      "force_reason", "data_docs_dir", "data_docs_base_url")  # fmt: skip

    def __init__(
        self,
        *,
        spec_path: str,
        day: str,
        dry_run: bool | str = False,
        kafka_conn_id: str = "streamjoin_kafka_default",
        spark_conn_id: str = "spark_default",
        force: bool | str = False,
        force_reason: str | None = None,
        data_docs_dir: str = DATA_DOCS_DIR,
        data_docs_base_url: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.spec_path, self.day, self.count_only = spec_path, day, dry_run
        self.kafka_conn_id, self.spark_conn_id = kafka_conn_id, spark_conn_id
        self.force, self.force_reason = force, force_reason
        self.data_docs_dir, self.data_docs_base_url = data_docs_dir, data_docs_base_url
        self._launcher: Any = None

    def execute(self, context: Any) -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowSkipException

        from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook

        spec = load_spec(resolve(self.spec_path))
        dry_run = is_true(self.count_only)
        plan: BackfillPlan = plan_day(spec, self.day)
        kafka = StreamJoinKafkaHook(self.kafka_conn_id).checked_config()
        check_retention(plan, retention_facts(kafka, [r.topic for r in plan.reads]))
        found = input_records_of_day(kafka, spec, plan)
        if not any(found.values()):
            topics = ", ".join(sorted(found))
            self.log.warning("%s %s: no input records in the day on %s: nothing to reprocess, nothing published",
                             spec.name, plan.day, topics)  # fmt: skip
            raise AirflowSkipException(f"{spec.name} {plan.day}: no input records on {topics}; nothing published")
        stage = checked_before_publishing(spec) and not dry_run
        lock = None if dry_run else day_lock(spec, plan.day)
        run = run_identity(context)
        if lock is not None:
            try:
                lock.acquire(*run, run_is_active(context))
            except DayBusy as exc:  # that run does the day: nothing for the team to act on
                from streamjoin.airflow.notifiers import RequestRefused

                raise RequestRefused(str(exc)) from None
        try:
            outcome = self._reprocess(context, spec, plan, kafka, dry_run=dry_run, stage=stage)
        except BaseException:
            if lock is not None:
                lock.release(*run)
            raise
        if lock is not None and not stage:
            lock.release(*run)
        return outcome

    def _reprocess(
        self, context: Any, spec: PipelineSpec, plan: BackfillPlan, kafka: Any, *, dry_run: bool, stage: bool
    ) -> dict[str, Any]:
        from streamjoin.airflow.launcher import SparkJobLauncher, spark_target
        from streamjoin.core.publish import outcome_location, read_outcome

        files = str(resolve(spec.output.files.path)) if spec.output.files is not None else None
        check_args: list[str] = []
        if stage and files is not None:
            LocalStorage().delete(outcome_location(files, plan.day))  # an earlier run's: never read as this one's
            check_args = self._check_args(context)
        submit = plan_reprocess(spec, self.spec_path, kafka.job_arguments(secrets_dir()), [plan.day], connector_jars(),
                                dry_run=dry_run, py_files=[str(package_zip())], check_args=check_args)  # fmt: skip
        self.log.info("reprocessing %s %s%s", spec.name, plan.day,
                      " (staged, checked and published or not in the same application)" if stage else "")  # fmt: skip
        self._launcher = SparkJobLauncher(submit, spark_target(self.spark_conn_id))
        self._launcher.run(self.log)
        outcome: dict[str, Any] = {"pipeline": spec.name, "day": plan.day.isoformat(), "dry_run": dry_run}
        if dry_run or files is None:
            self.log.info("progress: %s %s done (dry run: nothing written)", spec.name, plan.day)
            return outcome
        if stage:
            where = outcome_location(files, plan.day)
            recorded = read_outcome(LocalStorage(), where)
            if recorded is None:
                raise RuntimeError(f"the reprocessing job of {spec.name} {plan.day} ended without recording its "
                                   f"outcome at {where}: see the job's lines above")  # fmt: skip
            outcome.update(action=recorded.action, path=recorded.path, consequence=recorded.consequence)
            self.log.info("progress: %s %s checked in the same application: %s; check_quality reports it",
                          spec.name, plan.day, recorded.consequence)  # fmt: skip
            return outcome
        path = partition_path(files, plan.day)
        if not path.is_dir():
            raise RuntimeError(f"the reprocessing job ended but {path} is missing")
        outcome["path"] = str(path)
        emit_day_event(context, self.outlets, spec, outcome)
        self.log.info("progress: %s %s published at %s", spec.name, plan.day, path)
        return outcome

    def _check_args(self, context: Any) -> list[str]:
        """The job's ``--check`` arguments: who asks, how the check is named, where its Data Docs go, force."""
        from streamjoin.airflow.ui_paths import data_docs_base_url

        dag_id, run_id = run_identity(context)
        ti = context.get("ti")
        docs_root = resolve(self.data_docs_dir)
        served = docs_root.resolve() == resolve(DATA_DOCS_DIR).resolve()  # the directory the plugin serves
        base_url = self.data_docs_base_url or (data_docs_base_url() if served else None)
        # one "--name=value" argument each: a value from a form that starts with "-" stays a value
        args = ["--check", f"--dag-id={dag_id}", f"--run-id={run_id}",
                f"--check-run={context.get('run_id') or 'manual'}-try{getattr(ti, 'try_number', 0)}",
                f"--data-docs-dir={docs_root}"]  # fmt: skip
        if base_url:
            args.append(f"--data-docs-url={base_url}")
        if is_true(self.force):
            user = getattr(context.get("dag_run"), "triggering_user_name", None)
            args += ["--force"] + ([f"--user={user}"] if user else [])
            reason = "" if self.force_reason is None else str(self.force_reason).strip()
            if reason and reason != "None":
                args.append(f"--reason={reason}")
        return args

    def on_kill(self) -> None:
        if self._launcher is not None:
            self._launcher.kill()


def is_true(value: Any) -> bool:
    """A flag that may arrive rendered from a template or a form (``"True"``, ``"false"``, ``1``)."""
    return value is True or str(value).strip().lower() in ("true", "1", "yes")


def emit_day_event(context: Any, outlets: Iterable[Any], spec: PipelineSpec, extra: dict[str, Any]) -> None:
    """The day's asset event: on the pipeline's daily asset if it is an outlet, through an alias outlet
    otherwise (an asset outlet gets its event from Airflow when the task succeeds; this sets its extra)."""
    asset = daily_asset(spec)
    events = context.get("outlet_events")
    if asset is None or events is None:
        return
    for outlet in outlets:
        if getattr(outlet, "name", None) == asset.name:
            events[outlet].extra = {**extra}
        elif type(outlet).__name__ == "AssetAlias":
            events[outlet].add(asset, extra={**extra})
