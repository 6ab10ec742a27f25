"""Validate one day partition of a pipeline output with GX 1.x; quarantine it if a blocking check fails.

The downstream asset is the operator's ``outlets``: Airflow records an asset event only when the task
succeeds, so a quarantined day never reaches consumers scheduled on the asset.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from streamjoin.airflow.launcher import spark_target
from streamjoin.airflow.notifiers import quality_notifiers
from streamjoin.core.plans import resolve
from streamjoin.core.spec import PipelineSpec, load_spec
from streamjoin.quality.gate import served_url
from streamjoin.quality.results import RESULT_FILE, CheckResult
from streamjoin.quality.suites import Target, build_check_plan, default_suite_path, load_settings


class QualityCheckFailed(AirflowFailException):
    """A blocking expectation failed: no retry (the data would not change), the day stays quarantined.

    Notifiers read :attr:`check_result` from the failure callback's ``exception``.
    """

    def __init__(self, result: CheckResult, consequence: str | None = None) -> None:
        self.check_result = result
        #: what became of the day (alerts say it): default "day quarantined"
        self.consequence = consequence or "day quarantined"
        docs = f"; Data Docs: {result.data_docs_url}" if result.data_docs_url else ""
        where = consequence or f"partition {result.partition_path} quarantined"
        super().__init__(f"{result.summary()}; {where}{docs}")


class DataQualityOperator(BaseOperator):
    """Check a day partition of a pipeline's output against its suite (defaults from the spec + suite file).

    Writes ``_CHECK_RESULT.json`` into the partition; on a blocking failure also ``_QUARANTINED`` and fails
    without retry (failed warning checks are logged only). A passing run removes an old quarantine marker.

    :param spec_path: pipeline spec, relative to the project home or absolute (templated)
    :param partition_path: the day's directory, e.g. ``var/output/x/enriched/date={{ ds }}`` (templated)
    :param day: the partition's day, ``YYYY-MM-DD`` (templated)
    :param target: ``enriched`` (the joined output) or ``aggregate``
    :param left_input_count: left input records of the day, for ``left_records_complete`` (templated)
    :param data_docs_dir: root of the Data Docs; each run gets ``<pipeline>/<target>/<day>/<run>/`` (templated)
    :param data_docs_base_url: URL under which ``data_docs_dir`` is served, for links in alerts and logs; default
        for the directory the plugin serves (``var/data_docs``): its route under Airflow's ``[api] base_url``
        (:func:`streamjoin.airflow.ui_paths.data_docs_base_url`) (templated)
    :param suite_path: suite file; default: the spec's ``quality.suite``, else
        ``include/expectations/<pipeline>.yaml`` beside the spec (templated)
    :param smtp_conn_id: SMTP connection for alerts (needs ``alert_to``)
    :param alert_to: e-mail recipients (templated)
    :param from_email: sender, else the SMTP connection's ``from_email`` extra
    :param webhook_conn_id: HTTP connection whose URL receives the alert as JSON
    :param webhook_endpoint: path appended to the webhook connection's URL
    :param spark_conn_id: Spark connection giving the master for the in-task session (``local[*]``,
        ``spark://host:port``)
    :param spark_master: overrides the connection (tests, local tools) (templated)
    :param spark_conf: extra Spark settings of the in-task session (memory, UI, shuffle partitions)
    """

    template_fields: Sequence[str] = (
        "spec_path",
        "partition_path",
        "day",
        "target",
        "left_input_count",
        "data_docs_dir",
        "data_docs_base_url",
        "suite_path",
        "spark_master",
    )
    ui_color = "#e8f4ea"

    def __init__(
        self,
        *,
        spec_path: str,
        partition_path: str,
        day: str,
        data_docs_dir: str,
        target: str = Target.ENRICHED.value,
        left_input_count: int | str | None = None,
        data_docs_base_url: str | None = None,
        suite_path: str | None = None,
        smtp_conn_id: str | None = None,
        alert_to: str | list[str] | None = None,
        from_email: str | None = None,
        webhook_conn_id: str | None = None,
        webhook_endpoint: str | None = None,
        spark_conn_id: str = "spark_default",
        spark_master: str | None = None,
        spark_conf: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        notifiers = quality_notifiers(
            smtp_conn_id=smtp_conn_id,
            alert_to=alert_to,
            from_email=from_email,
            webhook_conn_id=webhook_conn_id,
            webhook_endpoint=webhook_endpoint,
        )
        if notifiers:
            callbacks = kwargs.get("on_failure_callback") or []
            callbacks = list(callbacks) if isinstance(callbacks, list | tuple) else [callbacks]
            kwargs["on_failure_callback"] = [*callbacks, *notifiers]
        super().__init__(**kwargs)
        self.spec_path = spec_path
        self.partition_path = partition_path
        self.day = day
        self.target = target
        self.left_input_count = left_input_count
        self.data_docs_dir = data_docs_dir
        self.data_docs_base_url = data_docs_base_url
        self.suite_path = suite_path
        self.spark_conn_id = spark_conn_id
        self.spark_master = spark_master
        self.spark_conf = spark_conf or {}
        self._spark: Any = None

    def execute(self, context: Any) -> dict[str, Any]:
        result = self.check(context, resolve(self.partition_path))
        if not result.success:
            raise QualityCheckFailed(result)  # the partition is quarantined; the outlet is not updated
        return {
            "success": True,
            "warnings": result.warnings,
            "result_file": str(resolve(self.partition_path) / RESULT_FILE),
            "data_docs_url": result.data_docs_url,
        }

    def check(self, context: Any, partition: Path) -> CheckResult:
        """Validate ``partition`` and record the verdict in it (``_CHECK_RESULT.json``, ``_QUARANTINED``)."""
        spec_file = resolve(self.spec_path)
        spec = load_spec(spec_file)
        if self.suite_path:
            suite_file = resolve(self.suite_path)
        elif spec.quality is not None:  # the suite the spec names
            suite_file = resolve(spec.quality.suite)
        else:
            suite_file = default_suite_path(spec_file, spec.name)
        day = date.fromisoformat(str(self.day))
        plan = build_check_plan(
            spec,
            load_settings(suite_file, spec.name),
            day=day,
            target=Target(self.target),
            left_input_count=_optional_int(self.left_input_count),
            suite_file=str(suite_file),
        )
        if not partition.is_dir():
            # not a quality verdict: the job may still be writing; a retry can help
            raise FileNotFoundError(f"partition {partition} does not exist: has the join job written {day}?")

        from streamjoin.quality.validate import check_partition, run_slug  # GX and pyspark: only here

        ti = context.get("ti")
        run_name = f"{context.get('run_id') or 'manual'}-try{getattr(ti, 'try_number', 0)}"
        docs_root = resolve(self.data_docs_dir)
        base_url = self.data_docs_base_url or _plugin_docs_url(docs_root)
        self.log.info("validating %s (%d checks from %s)", partition, len(plan.checks), suite_file)
        result = check_partition(
            self._session(),
            plan,
            partition,
            docs_dir=docs_root / spec.name / plan.target.value / day.isoformat() / run_slug(run_name),
            run_id=run_name,
            docs_url=(lambda url: served_url(url, docs_root, base_url)) if base_url else None,
            file_format=_files_format(spec, plan.target),
        )
        for outcome in result.failed:
            level = "error" if outcome.blocking else "warning"
            getattr(self.log, level)(
                "%s failed (%s): observed %s -- %s", outcome.name, level, outcome.observed_text(), outcome.description
            )
        self.log.info("%s; Data Docs: %s", result.summary(), result.data_docs_url or "(none)")
        return result

    def _session(self) -> Any:
        from streamjoin.spark.session import build_session

        master = self.spark_master or spark_target(self.spark_conn_id).master
        self._spark = build_session(
            f"streamjoin-quality-{self.task_id}", master=master, with_kafka=False, extra_conf=self.spark_conf,
            jvm_log=logging.getLogger("streamjoin.spark.jvm"),  # Spark's lines at their level, not as [error]
        )
        return self._spark

    def on_kill(self) -> None:
        if self._spark is not None:
            self._spark.sparkContext.cancelAllJobs()


def _files_format(spec: PipelineSpec, target: Target) -> str:
    """How the spec writes the target's files (the day is read back the same way)."""
    sink = spec.aggregate.output if target is Target.AGGREGATE and spec.aggregate is not None else spec.output
    return sink.files.format if sink.files is not None else "parquet"


def _optional_int(value: int | str | None) -> int | None:
    if value is None or value == "" or value == "None":
        return None
    return int(value)


def _plugin_docs_url(docs_root: Path) -> str | None:
    """The plugin's Data Docs route when ``docs_root`` is the directory it serves, else None."""
    from streamjoin.airflow.ui_paths import DATA_DOCS_DIR, data_docs_base_url

    return data_docs_base_url() if docs_root.resolve() == resolve(DATA_DOCS_DIR).resolve() else None
