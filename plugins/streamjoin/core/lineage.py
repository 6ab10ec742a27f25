"""Lineage of a pipeline's tasks, from its spec: which Kafka topics and files a task reads and writes, and the
join it runs. Plain data (stdlib and the spec): :mod:`streamjoin.airflow.openlineage_facets` turns it into the
OpenLineage provider's ``OperatorLineage``, :class:`streamjoin.airflow.lineage.SpecLineageMixin` gives it to
the operators.

Dataset names follow OpenLineage's naming: a topic is ``kafka://<first bootstrap host:port>`` / ``<topic>``,
a local path ``file`` / ``<absolute path>``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from streamjoin.core.backfill import partition_path
from streamjoin.core.plans import PROJECT_HOME, resolve
from streamjoin.core.spec import Format, PipelineSpec, Serde, Sink


@dataclass(frozen=True)
class DatasetRef:
    namespace: str
    name: str
    #: the record's fields as ``(name, type)``, where the spec or the registry knows them: ``key`` and ``value``
    #: of a scalar format, ``value.<field>`` of a JSON, Avro, Protobuf or JSON Schema record
    fields: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class SpecLineage:
    """What one task of a pipeline reads and writes, and the join it runs (the job facet's fields)."""

    inputs: tuple[DatasetRef, ...]
    outputs: tuple[DatasetRef, ...]
    join: dict[str, Any] = field(default_factory=dict)


def kafka_namespace(bootstrap: str) -> str:
    """``kafka://host:port`` of the first bootstrap server (OpenLineage's Kafka namespace)."""
    first = bootstrap.split(",")[0].strip()
    return f"kafka://{first.split('://', 1)[-1]}"


def join_facts(spec: PipelineSpec) -> dict[str, Any]:
    """The join as a job facet: shape, kind, sides, window, grace, joiner and aggregate, from the spec; a
    pipeline of several join stages gives the last one's at the top and every stage's under ``stages``."""
    stages = [_stage_facts(spec, index) for index in range(len(spec.stages))]
    facts: dict[str, Any] = {"pipeline": spec.name, **stages[-1]}
    if spec.chained:
        facts["stages"] = stages
    if spec.aggregate is not None:
        facts["aggregate"] = {
            "reduce": spec.aggregate.reduce.value,
            "emit": spec.aggregate.emit.value,
            "group_by": spec.aggregate.group_by.model_dump(mode="json", exclude_none=True),
        }
    return facts


def _stage_facts(spec: PipelineSpec, index: int) -> dict[str, Any]:
    """Join stage ``index``: its shape, kind, sides (a later stage's left is the previous stage), window, grace,
    joiner and projections."""
    join = spec.stages[index]
    left = spec.inputs.get(join.left) if index == 0 else None
    right = spec.inputs[join.right]
    facts: dict[str, Any] = {
        "shape": join.shape.value,
        "kind": join.kind.value,
        "left": {"stage": join.left} if left is None else
                {"input": join.left, "topic": left.topic, "role": left.role.value},
        "right": {"input": join.right, "topic": right.topic, "role": right.role.value},
        "grace_ms": join.grace,
        "joiner": join.joiner.model_dump(mode="json", exclude_none=True) or {"default": "{left, right}"},
    }  # fmt: skip
    if join.window is not None:
        facts["window_ms"] = {"before": join.window.before, "after": join.window.after}
    for name in ("key_selector", "foreign_key"):
        projection = getattr(join, name)
        if projection is not None:
            facts[name] = projection.model_dump(mode="json", exclude_none=True)
    return facts


def record_fields(
    key: Serde,
    value: Serde,
    reader_schema: str | None = None,
    message_fields: tuple[tuple[str, str], ...] = (),
) -> tuple[tuple[str, str], ...]:
    """An input record's fields, as the spec declares them: a scalar key or value as itself, a JSON or JSON
    Schema value's ``schema``, an Avro value's reader schema (the spec's, else ``reader_schema``: the registry's
    latest) by field, a JSON Schema value without ``schema`` by the properties of ``reader_schema`` (the
    registry's latest JSON Schema), a Protobuf value by ``message_fields`` (its message's, which the caller
    compiled); none for what neither gives (an Avro key: its bytes)."""
    fields: list[tuple[str, str]] = []
    for name, serde in (("key", key), ("value", value)):
        if serde.format in (Format.STRING, Format.LONG):
            fields.append((name, serde.format.value))
        elif serde.format in (Format.JSON, Format.JSON_SCHEMA) and serde.fields:
            fields += [(f"{name}.{field}", kind.value) for field, kind in serde.fields.items()]
        elif name != "value":
            continue
        elif serde.format is Format.AVRO:
            fields += schema_fields(Format.AVRO, serde.reader_schema_text or reader_schema)
        elif serde.format in (Format.JSON_SCHEMA, Format.PROTOBUF):
            fields += schema_fields(serde.format, reader_schema, message_fields)
    return tuple(fields)


def schema_fields(
    fmt: Format, schema: str | None, message_fields: tuple[tuple[str, str], ...] = ()
) -> tuple[tuple[str, str], ...]:
    """A value's fields (``value.<field>``, type) from its registered schema: an Avro record's fields, a JSON
    Schema's properties, a Protobuf message's ``message_fields`` (which the caller compiled); a scalar schema (an
    aggregate's ``"long"``, ``{"type": "integer"}``) is the field ``value``; none without."""
    if fmt is Format.PROTOBUF:
        return tuple((f"value.{field}", kind) for field, kind in message_fields)
    parsed = json.loads(schema) if schema else {}
    if isinstance(parsed, str) or (fmt is Format.JSON_SCHEMA and parsed.get("type") not in (None, "object")):
        return (("value", _avro_type(parsed) if fmt is Format.AVRO else _json_schema_type(parsed)),)
    if fmt is Format.AVRO:
        return tuple((f"value.{f['name']}", _avro_type(f["type"])) for f in parsed.get("fields", []))
    if fmt is Format.JSON_SCHEMA:
        return tuple((f"value.{p}", _json_schema_type(s)) for p, s in parsed.get("properties", {}).items())
    return ()


def _json_schema_type(schema: Any) -> str:
    """A JSON Schema property's type as text: its ``type`` (several joined by ``|``), an array's items in
    ``array<...>``; ``any`` when it names none (``$ref``, ``oneOf``, ...)."""
    if not isinstance(schema, dict) or "type" not in schema:
        return "any"
    kind = schema["type"]
    if isinstance(kind, list):
        return "|".join(map(str, kind))
    if kind == "array" and isinstance(schema.get("items"), dict):
        return f"array<{_json_schema_type(schema['items'])}>"
    return str(kind)


def _avro_type(avro: Any) -> str:
    """An Avro field type as text: a primitive's name, a union's members joined by ``|``, a named type's name."""
    if isinstance(avro, list):
        return "|".join(_avro_type(member) for member in avro)
    if isinstance(avro, dict):
        return str(avro.get("logicalType") or avro.get("name") or avro.get("type"))
    return str(avro)


def spec_lineage(
    spec: PipelineSpec,
    bootstrap: str,
    *,
    day: date | None = None,
    home: Path = PROJECT_HOME,
    reader_schemas: Mapping[str, str] | None = None,
    message_fields: Mapping[str, tuple[tuple[str, str], ...]] | None = None,
    output_fields: Mapping[str, tuple[tuple[str, str], ...]] | None = None,
) -> SpecLineage:
    """Lineage of the streaming job (``day`` None: its topics and file outputs) or of reprocessing ``day``
    (its input topics; the published day partitions, no topics).

    :param reader_schemas: an Avro or JSON Schema input's schema by topic, where the spec gives none (the
        registry's latest, which the caller looked up)
    :param message_fields: a Protobuf input's fields by topic (:func:`record_fields`)
    :param output_fields: an output topic's fields (an Avro, JSON Schema or Protobuf output's registered schema's:
        :func:`schema_fields`), by topic
    """
    kafka = kafka_namespace(bootstrap)
    readers, messages = reader_schemas or {}, message_fields or {}
    inputs = tuple(DatasetRef(kafka, inp.topic, record_fields(inp.key, inp.value, readers.get(inp.topic),
                                                              messages.get(inp.topic, ())))
                   for inp in spec.inputs.values())  # fmt: skip
    stages = [join.output for join in spec.earlier_joins if join.output is not None]
    sinks: list[Sink] = [*stages, spec.output] + ([spec.aggregate.output] if spec.aggregate is not None else [])
    outputs: list[DatasetRef] = []
    for sink in sinks:
        if sink.topic is not None and day is None:
            outputs.append(DatasetRef(kafka, sink.topic, (output_fields or {}).get(sink.topic, ())))
        if sink.files is not None:
            root = resolve(sink.files.path, home)
            outputs.append(DatasetRef("file", str(partition_path(root, day) if day else root)))
    if day is None:
        outputs.append(DatasetRef(kafka, spec.dead_letter_topic))
    return SpecLineage(inputs, tuple(outputs), join_facts(spec))
