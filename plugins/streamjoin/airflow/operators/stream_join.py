"""Run a pipeline's streaming join job attached (until it stops: ``available_now`` for demos and catch-up).
The long-running job is owned by :class:`~streamjoin.airflow.operators.supervise.SuperviseStreamJoinOperator`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from streamjoin.airflow.lineage import SpecLineageMixin
from streamjoin.core.plans import connector_jars, package_zip, plan_submit, resolve, secrets_dir
from streamjoin.core.spec import load_spec


class StreamJoinJobOperator(SpecLineageMixin, BaseOperator):
    """Submit ``jobs/stream_join.py`` for a pipeline spec through the one launcher and wait for it.

    The master comes from the Spark connection (``local[*]``, ``spark://``, ``yarn``, ``k8s://``): moving
    to a cluster changes the connection only. The job's progress lines appear in this task's log.

    :param spec_path: pipeline spec, relative to the project home or absolute (templated)
    :param kafka_conn_id: the Kafka connection, security settings included (templated)
    :param spark_conn_id: Spark connection giving the master (templated)
    :param available_now: process what the input topics hold now, then stop (demo, catch-up)
    """

    template_fields: Sequence[str] = ("spec_path", "kafka_conn_id", "spark_conn_id")

    def __init__(
        self,
        *,
        spec_path: str,
        kafka_conn_id: str = "streamjoin_kafka_default",
        spark_conn_id: str = "spark_default",
        available_now: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.spec_path = spec_path
        self.kafka_conn_id = kafka_conn_id
        self.spark_conn_id = spark_conn_id
        self.available_now = available_now
        self._launcher: Any = None

    def execute(self, context: Any) -> dict[str, Any]:
        from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook
        from streamjoin.airflow.launcher import SparkJobLauncher, spark_target

        spec = load_spec(resolve(self.spec_path))
        kafka = StreamJoinKafkaHook(self.kafka_conn_id).checked_config()
        # executors import streamjoin from the shipped zip (their Python: STREAMJOIN_EXECUTOR_PYTHON)
        plan = plan_submit(spec, self.spec_path, kafka.job_arguments(secrets_dir()), connector_jars(),
                           available_now=self.available_now, py_files=[str(package_zip())])  # fmt: skip
        self._launcher = SparkJobLauncher(plan, spark_target(self.spark_conn_id))
        self._launcher.run(self.log)
        return {"pipeline": spec.name, "available_now": self.available_now}

    def on_kill(self) -> None:
        if self._launcher is not None:
            self._launcher.kill()
