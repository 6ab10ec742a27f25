"""Create and check a pipeline's Kafka topics before its join job starts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from streamjoin.core.plans import resolve
from streamjoin.core.spec import load_spec
from streamjoin.core.topic_plan import plan_topics


class ProvisionTopicsOperator(BaseOperator):
    """Provision the topics of a pipeline spec: create the missing ones, check the existing ones.

    Fails before creating anything when the plan cannot work: co-partitioned inputs with different
    partition counts, a table topic that is not compacted, more replicas than brokers.

    :param spec_path: pipeline spec, relative to the project home or absolute (templated)
    :param kafka_conn_id: the ``streamjoin_kafka`` connection of the cluster (templated)
    :param timeout: seconds for all broker calls together
    """

    template_fields: Sequence[str] = ("spec_path", "kafka_conn_id")
    ui_color = "#e8f4ea"

    def __init__(
        self,
        *,
        spec_path: str,
        kafka_conn_id: str = "streamjoin_kafka_default",
        timeout: float = 60.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.spec_path = spec_path
        self.kafka_conn_id = kafka_conn_id
        self.timeout = timeout

    def execute(self, context: Any) -> dict[str, Any]:
        from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook
        from streamjoin.kafka.admin import ensure_topics

        spec = load_spec(resolve(self.spec_path))
        plan = plan_topics(spec)
        kafka = StreamJoinKafkaHook(self.kafka_conn_id).checked_config()  # a refused password fails here
        self.log.info("provisioning %d topics of pipeline %s at %s", len(plan.topics), spec.name, kafka.describe())
        report = ensure_topics(kafka.librdkafka(), plan, timeout=self.timeout)
        for outcome in report.topics:
            self.log.info("%s", outcome.summary())
        return {**report.as_dict(), "registry_warnings": self._registry_warnings(spec)}

    def _registry_warnings(self, spec: Any) -> list[str]:
        """Registry join keys (Avro, Protobuf, JSON Schema) under two schema ids never match
        (``schema_registry.key_subject_warnings``): logged as warnings, as is a registry that cannot be asked;
        none without such keys."""
        from streamjoin.core.errors import StreamJoinError
        from streamjoin.kafka.schema_registry import key_subject_warnings

        try:
            warnings = [str(w) for w in key_subject_warnings(spec)]
        except StreamJoinError as exc:
            warnings = [f"the key subjects could not be checked: {exc}"]
        for warning in warnings:
            self.log.warning("%s", warning)
        return warnings
