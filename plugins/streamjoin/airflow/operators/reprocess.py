"""Reprocess a past day of a pipeline: plan it, check Kafka still holds its range, spark-submit the batch job.

Values from a trigger form reach spark-submit only as separate list arguments (never a shell string), and
``day`` must parse as a date before anything runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from airflow.sdk import Asset, BaseOperator

from streamjoin.airflow.lineage import SpecLineageMixin
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
from streamjoin.core.spec import PipelineSpec, load_spec
from streamjoin.kafka.client_config import KafkaClientConfig, KafkaTarget

REPROCESS_JOB = "jobs/reprocess_day.py"


def daily_asset(spec: PipelineSpec, home: Path = PROJECT_HOME) -> Asset | None:
    """The asset of a pipeline's published days (``<output files>/daily``); each event's extra names the day."""
    if spec.output.files is None:
        return None
    root = resolve(spec.output.files.path, home) / "daily"
    return Asset(name=f"streamjoin_{spec.name}_daily", uri=f"file://{root}", group="streamjoin")


def plan_reprocess(
    spec: PipelineSpec,
    spec_path: str | Path,
    kafka_args: Sequence[str],
    days: Iterable[date],
    jars: list[str],
    *,
    dry_run: bool = False,
    home: Path = PROJECT_HOME,
    py_files: Sequence[str] = (),
) -> SubmitPlan:
    """spark-submit plan of ``jobs/reprocess_day.py`` (``kafka_args``: ``--bootstrap B`` or
    ``--kafka-config FILE``, see ``KafkaClientConfig.job_arguments``)."""
    args = ["--spec", str(resolve(spec_path, home)), "--home", str(home)]
    for day in days:
        args += ["--day", parse_day(day).isoformat()]
    if dry_run:
        args.append("--dry-run")
    return job_plan(f"streamjoin-reprocess-{spec.name}", home / REPROCESS_JOB, args, kafka_args, spec, jars,
                    py_files=py_files, conf={"spark.ui.enabled": "false"})  # fmt: skip


def retention_facts(kafka: KafkaTarget, topics: Iterable[str], timeout: float = 10.0) -> dict[str, RetentionFact]:
    """Per topic: were records deleted (log start offset > 0), and the earliest available record time."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    from streamjoin.kafka.admin import admin_client

    cluster = KafkaClientConfig.of(kafka)
    admin = admin_client(cluster.librdkafka())
    facts: dict[str, RetentionFact] = {}
    for topic in topics:
        metadata = admin.list_topics(topic, timeout=timeout).topics[topic]
        if metadata.error is not None:
            raise ValueError(f"topic {topic!r} at {cluster.describe()}: {metadata.error}")
        parts = [TopicPartition(topic, p) for p in metadata.partitions]
        starts = admin.list_offsets({tp: OffsetSpec.earliest() for tp in parts}, request_timeout=timeout)
        firsts = admin.list_offsets({tp: OffsetSpec.for_timestamp(0) for tp in parts}, request_timeout=timeout)
        truncated = any(f.result(timeout=timeout).offset > 0 for f in starts.values())
        stamps = [r.timestamp for r in (f.result(timeout=timeout) for f in firsts.values()) if r.offset >= 0]
        facts[topic] = RetentionFact(truncated, min((t for t in stamps if t >= 0), default=None))
    return facts


class ReprocessDayOperator(SpecLineageMixin, BaseOperator):
    """Recompute one past day of a pipeline with the streaming job's code and publish it atomically under
    ``<output files>/daily/date=D/``; emits an asset event (extra: pipeline, day, path) unless ``dry_run``.

    :param spec_path: pipeline spec, relative to the project home or absolute (templated)
    :param day: ``YYYY-MM-DD`` (templated)
    :param dry_run: count only, write nothing (kept as ``count_only``: ``BaseOperator.dry_run`` is a method)
    """

    template_fields: Sequence[str] = ("spec_path", "day", "kafka_conn_id", "spark_conn_id")

    def __init__(
        self,
        *,
        spec_path: str,
        day: str,
        dry_run: bool = False,
        kafka_conn_id: str = "streamjoin_kafka_default",
        spark_conn_id: str = "spark_default",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.spec_path, self.day, self.count_only = spec_path, day, dry_run
        self.kafka_conn_id, self.spark_conn_id = kafka_conn_id, spark_conn_id
        self._launcher: Any = None

    def execute(self, context: Any) -> dict[str, Any]:
        from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook
        from streamjoin.airflow.launcher import SparkJobLauncher, spark_target

        spec = load_spec(resolve(self.spec_path))
        dry_run = bool(self.count_only) and str(self.count_only).lower() not in ("false", "0")
        plan: BackfillPlan = plan_day(spec, self.day)
        kafka = StreamJoinKafkaHook(self.kafka_conn_id).checked_config()
        check_retention(plan, retention_facts(kafka, [r.topic for r in plan.reads]))
        submit = plan_reprocess(spec, self.spec_path, kafka.job_arguments(secrets_dir()), [plan.day], connector_jars(),
                                dry_run=dry_run, py_files=[str(package_zip())])  # fmt: skip
        self.log.info("reprocessing %s %s", spec.name, plan.day)
        self._launcher = SparkJobLauncher(submit, spark_target(self.spark_conn_id))
        self._launcher.run(self.log)
        outcome: dict[str, Any] = {"pipeline": spec.name, "day": plan.day.isoformat(), "dry_run": dry_run}
        if dry_run or spec.output.files is None:
            self.log.info("progress: %s %s done (dry run: nothing written)", spec.name, plan.day)
            return outcome
        path = partition_path(resolve(spec.output.files.path), plan.day)
        if not path.is_dir():
            raise RuntimeError(f"the reprocessing job ended but {path} is missing")
        outcome["path"] = str(path)
        asset = daily_asset(spec)
        events = context.get("outlet_events")
        if asset is not None and events is not None:
            for outlet in self.outlets:
                if getattr(outlet, "name", None) == asset.name:
                    events[outlet].extra = {**outcome}
                elif type(outlet).__name__ == "AssetAlias":
                    events[outlet].add(asset, extra={**outcome})
        self.log.info("progress: %s %s published at %s", spec.name, plan.day, path)
        return outcome

    def on_kill(self) -> None:
        if self._launcher is not None:
            self._launcher.kill()
