"""The operators' OpenLineage methods (:class:`SpecLineageMixin`): the lineage of the task's pipeline, from its
spec (:mod:`streamjoin.core.lineage`, plain data), as the OpenLineage provider's ``OperatorLineage``
(:mod:`streamjoin.airflow.openlineage_facets`, imported only when the provider asks).
"""

from __future__ import annotations

import logging
from datetime import date
from typing import Any

from streamjoin.core.backfill import parse_day
from streamjoin.core.lineage import DatasetRef, SpecLineage, join_facts, kafka_namespace, spec_lineage
from streamjoin.core.plans import resolve
from streamjoin.core.spec import Format, PipelineSpec, load_spec

#: (the plain data lives in core, re-exported here)
log = logging.getLogger(__name__)

__all__ = ["DatasetRef", "SpecLineage", "SpecLineageMixin", "join_facts", "kafka_namespace", "spec_lineage"]


class SpecLineageMixin:
    """OpenLineage methods for operators that run a pipeline spec (``spec_path``, ``kafka_conn_id``): the
    provider calls them when the task starts and completes; nothing is imported unless it does."""

    spec_path: str
    kafka_conn_id: str

    def _lineage_day(self) -> date | None:
        """The day a task reprocesses (its ``day``, rendered); None for the streaming job."""
        day = getattr(self, "day", None)
        return parse_day(day) if day else None

    def get_openlineage_facets_on_start(self) -> Any:
        from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook
        from streamjoin.airflow.openlineage_facets import operator_lineage

        spec = load_spec(resolve(self.spec_path))
        bootstrap = StreamJoinKafkaHook(self.kafka_conn_id).bootstrap_servers()
        day = self._lineage_day()
        readers, messages = _registry_schemas(spec)
        lineage = spec_lineage(spec, bootstrap, day=day, reader_schemas=readers, message_fields=messages,
                               output_fields=_output_fields(spec))  # fmt: skip
        return operator_lineage(lineage, streaming=day is None)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        return self.get_openlineage_facets_on_start()


def _registry_schemas(spec: PipelineSpec) -> tuple[dict[str, str], dict[str, tuple[tuple[str, str], ...]]]:
    """The fields of the datasets whose spec does not give them, by topic: the registry's latest schema of each
    Avro input without a reader schema and JSON Schema input without ``schema``; the fields of each Protobuf
    input's message (the one the job reads, in the latest schema, compiled by protoc). Best effort: lineage
    never fails a task, so a registry that does not answer, or a schema that does not compile, is logged."""
    from streamjoin.kafka.schema_registry import input_schemas

    readers, messages = {}, {}
    for spec_input in spec.inputs.values():
        serde = spec_input.value
        wanted = (
            (serde.format is Format.AVRO and serde.reader_schema is None)
            or (serde.format is Format.JSON_SCHEMA and not serde.fields)
            or serde.format is Format.PROTOBUF
        )
        if not wanted:
            continue
        try:
            reader = input_schemas(spec_input).reader
            if serde.format is Format.PROTOBUF:
                messages[spec_input.topic] = _message_fields(
                    reader, serde.full_record_name, serde.subject(spec_input.topic)
                )
            else:
                readers[spec_input.topic] = reader
        except Exception as exc:  # the registry's errors, typed or not: the dataset goes without its fields
            log.warning("lineage of %s: no schema fields for %s: %s", spec.name, spec_input.topic, exc)
    return readers, messages


def _output_fields(spec: PipelineSpec) -> dict[str, tuple[tuple[str, str], ...]]:
    """The fields of each registry output's registered schema (the join's, a chain stage's, the aggregate's in
    Avro, JSON Schema or Protobuf: the latest version of its subject, which the job registers at its first batch;
    none before), by topic. Best effort, as :func:`_registry_schemas`."""
    from streamjoin.core.lineage import schema_fields
    from streamjoin.kafka.schema_registry import latest_schema, registry_config, registry_outputs

    fields: dict[str, tuple[tuple[str, str], ...]] = {}
    for _path, sink in registry_outputs(spec):
        assert sink.topic is not None  # registry_outputs lists Kafka outputs only
        try:
            schema = latest_schema(registry_config(sink.registry_conn_id), sink.subject)
            if schema is None:
                continue
            if sink.value_format is Format.PROTOBUF:
                message = _message_fields(schema, sink.record_name, sink.subject)
                fields[sink.topic] = schema_fields(Format.PROTOBUF, None, message)
            else:
                fields[sink.topic] = schema_fields(sink.value_format, schema)
        except Exception as exc:  # as _registry_schemas: the dataset goes without its fields
            log.warning("lineage of %s: no schema fields for %s: %s", spec.name, sink.topic, exc)
    return fields


def _message_fields(proto: str, record_name: str | None, subject: str) -> tuple[tuple[str, str], ...]:
    """The fields of message ``record_name`` (else the first) of the ``.proto`` text ``proto``."""
    from streamjoin.kafka import protobuf

    fds = protobuf.descriptor_set(proto, subject)
    name = record_name or protobuf.main_message(fds)
    return tuple(protobuf.message_fields(fds, name)) if name else ()
