"""Launch a pipeline's streaming join job through the Spark provider's spark-submit hook."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from streamjoin.core.plans import connector_jars, package_zip, plan_submit, resolve, secrets_dir
from streamjoin.core.spec import load_spec


class StreamJoinJobOperator(BaseOperator):
    """Submit ``jobs/stream_join.py`` for a pipeline spec.

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
        self._hook: Any = None

    def execute(self, context: Any) -> dict[str, Any]:
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook

        spec = load_spec(resolve(self.spec_path))
        kafka = StreamJoinKafkaHook(self.kafka_conn_id).checked_config()
        kafka_args = kafka.job_arguments(secrets_dir())  # the job deletes the file once read
        # Executors import streamjoin from the shipped zip; their Python may differ from ours on a cluster
        # (STREAMJOIN_EXECUTOR_PYTHON, e.g. the Spark image's python3 in docker-compose.yaml).
        plan = plan_submit(
            spec, self.spec_path, kafka_args, connector_jars(), available_now=self.available_now,
            python=os.environ.get("STREAMJOIN_EXECUTOR_PYTHON") or sys.executable, driver_python=sys.executable,
            py_files=[str(package_zip())],
        )  # fmt: skip
        self.log.info("submitting %s: %s %s", plan.name, plan.application, " ".join(plan.application_args))
        self._hook = SparkSubmitHook(
            conf=plan.conf,
            conn_id=self.spark_conn_id,
            jars=",".join(plan.jars),
            py_files=",".join(plan.py_files) or None,
            name=plan.name,
            application_args=plan.application_args,
            env_vars={"PYSPARK_PYTHON": sys.executable},
        )
        self._hook.submit(plan.application)
        return {"pipeline": spec.name, "available_now": self.available_now}

    def on_kill(self) -> None:
        if self._hook is not None:
            self._hook.on_kill()
