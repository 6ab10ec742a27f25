"""The pipeline spec: one typed, frozen model read from ``include/pipelines/<name>.yaml``.

DAGs, jobs, topic plans and quality suites all take this model; nothing else reads the YAML.
A bad spec fails with :class:`~streamjoin.core.errors.SpecError` naming the file, the path inside it,
the bad value and what is allowed.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable
from datetime import date
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from streamjoin.core.errors import SpecError, field_path, value_at
from streamjoin.core.shapes import SHAPES, Kind, Role, Shape, traits

__all__ = ["Kind", "Role", "Shape"]  # defined with the shapes' traits; read from here as well

_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)?\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, None: 1}


def parse_duration_ms(value: Any) -> int:
    """``"10s"``, ``"250ms"``, ``"5m"``, ``"1h"``, ``"2d"`` or a plain number of milliseconds."""
    if isinstance(value, bool):
        raise ValueError("a duration such as '10s', '250ms', '5m', '1h' or milliseconds")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("a duration must not be negative")
        return value
    match = _DURATION.match(str(value))
    if not match:
        raise ValueError("a duration such as '10s', '250ms', '5m', '1h' or milliseconds")
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


DurationMs = Annotated[int, BeforeValidator(parse_duration_ms)]
TopicName = Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,249}$")]
DottedPath = Annotated[str, Field(pattern=r"^[A-Za-z_][\w.]*(:[A-Za-z_]\w*)?$")]


def import_function(path: str, *, file: str = "<spec>", where: str = "function") -> Callable[..., Any]:
    """``"package.module:name"`` (or ``"package.module.name"``) -> the callable.

    :raises SpecError: naming ``file``, the field ``where`` and ``path``: not a dotted path, not importable
        (the import's own error), or not callable
    """
    module_name, _, name = path.partition(":") if ":" in path else path.rpartition(".")
    if not module_name or not name:
        raise SpecError(file, where, path, "a dotted path 'module.path:name'")
    try:
        function = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise SpecError(file, where, path, f"an importable function (importing it failed: {exc})") from None
    if not callable(function):
        raise SpecError(file, where, path, "a callable (this name is not one)")
    return function


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class Format(StrEnum):
    STRING = "string"
    JSON = "json"
    LONG = "long"  # 8-byte big-endian, as Java's LongSerializer writes it
    AVRO = "avro"  # Confluent wire format: magic byte 0, 4-byte big-endian schema id, Avro binary payload
    #: Confluent wire format with the message indexes before the payload
    PROTOBUF = "protobuf"
    #: Confluent wire format, then the value's JSON text; its Spark type from the subject's latest JSON Schema
    JSON_SCHEMA = "json_schema"

    @property
    def in_registry(self) -> bool:
        """Confluent's wire format with the schema in a registry (``avro``, ``protobuf``, ``json_schema``)."""
        return self in (Format.AVRO, Format.PROTOBUF, Format.JSON_SCHEMA)

    @property
    def label(self) -> str:
        """The format's name in messages (``Avro``, ``Protobuf``, ``JSON Schema``; else its value)."""
        return {"avro": "Avro", "protobuf": "Protobuf", "json_schema": "JSON Schema"}.get(self.value, self.value)


#: the Airflow connection of a schema registry when a serde names none (``registry``)
DEFAULT_REGISTRY = "schema_registry_default"


class SubjectNameStrategy(StrEnum):
    """Which registry subject a topic's schemas live under, as Confluent's serializers name them."""

    TOPIC_NAME = "topic_name"  # <topic>-key / <topic>-value
    RECORD_NAME = "record_name"  # <fully qualified record name>
    TOPIC_RECORD_NAME = "topic_record_name"  # <topic>-<fully qualified record name>


class Compatibility(StrEnum):
    """A subject's compatibility level in the registry (Confluent's names)."""

    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"
    NONE = "NONE"


_AVRO_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def subject_name(strategy: SubjectNameStrategy, topic: str, is_key: bool, record_name: str | None) -> str:
    """The registry subject of a topic's keys or values under ``strategy`` (Confluent's naming)."""
    if strategy is SubjectNameStrategy.TOPIC_NAME:
        return f"{topic}-{'key' if is_key else 'value'}"
    assert record_name is not None, "record strategies need the record's full name"
    return record_name if strategy is SubjectNameStrategy.RECORD_NAME else f"{topic}-{record_name}"


class FieldType(StrEnum):
    STRING = "string"
    LONG = "long"
    DOUBLE = "double"
    BOOLEAN = "boolean"


class Serde(_Model):
    """How a key or value is encoded on the topic. JSON needs a flat schema: field -> type. Avro's schemas are
    in a schema registry (``registry``: an Airflow connection id); the values decode with ``reader_schema``
    (an Avro schema, JSON text or a mapping), by default the subject's latest version when the job starts."""

    format: Format = Format.STRING
    fields: dict[str, FieldType] | None = Field(default=None, alias="schema")
    registry: str | None = None
    subject_name_strategy: SubjectNameStrategy = SubjectNameStrategy.TOPIC_NAME
    #: the full name of the record (``namespace.Name``) for the record subject strategies; default: the reader
    #: schema's
    record_name: str | None = None
    reader_schema: dict[str, Any] | str | None = None

    @model_validator(mode="after")
    def _json_needs_schema(self) -> Serde:
        if self.format is Format.JSON and not self.fields:
            raise ValueError("format 'json' needs a 'schema' mapping field names to string|long|double|boolean")
        if self.format not in (Format.JSON, Format.JSON_SCHEMA) and self.fields:
            raise ValueError(f"'schema' is only for format 'json' or 'json_schema', not {self.format.value!r}")
        if self.format is Format.PROTOBUF and self.reader_schema is not None:
            raise ValueError("'reader_schema' is only for format 'avro': a Protobuf value is read with its "
                             "subject's latest schema (record_name: which message)")  # fmt: skip
        if self.format is Format.JSON_SCHEMA and self.reader_schema is not None:
            raise ValueError("'reader_schema' is only for format 'avro': a json_schema value's fields come from "
                             "its subject's latest JSON Schema, or from 'schema' (field -> type)")  # fmt: skip
        if self.format not in (Format.AVRO, Format.PROTOBUF, Format.JSON_SCHEMA):
            for name in ("registry", "record_name", "reader_schema"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name!r} is only for format 'avro', 'protobuf' or 'json_schema', not "
                                     f"{self.format.value!r}")  # fmt: skip
            if self.subject_name_strategy is not SubjectNameStrategy.TOPIC_NAME:
                raise ValueError(f"'subject_name_strategy' is only for format 'avro', 'protobuf' or 'json_schema', "
                                 f"not {self.format.value!r}")  # fmt: skip
            return self
        if self.record_name is not None and not _AVRO_NAME.match(self.record_name):
            raise ValueError(f"record_name {self.record_name!r} is not an Avro full name (namespace.Name)")
        if self.reader_schema is not None:
            _check_avro_schema(self.reader_schema)
        strategy = self.subject_name_strategy
        if strategy is not SubjectNameStrategy.TOPIC_NAME and self.full_record_name is None:
            raise ValueError(
                f"subject_name_strategy {strategy.value!r} needs 'record_name' (namespace.Name) or a "
                "'reader_schema' of a named record"
            )
        return self

    @property
    def registry_conn_id(self) -> str:
        """The schema registry's Airflow connection id."""
        return self.registry or DEFAULT_REGISTRY

    @property
    def reader_schema_text(self) -> str | None:
        """``reader_schema`` as Avro JSON text."""
        schema = self.reader_schema
        return schema if schema is None or isinstance(schema, str) else json.dumps(schema, separators=(",", ":"))

    @property
    def full_record_name(self) -> str | None:
        """``record_name``, else the reader schema's full name (None if neither names a record)."""
        if self.record_name is not None:
            return self.record_name
        if self.reader_schema is None:
            return None
        schema = json.loads(self.reader_schema_text or "null")
        if not isinstance(schema, dict) or "name" not in schema:
            return None
        name = str(schema["name"])
        return name if "." in name or not schema.get("namespace") else f"{schema['namespace']}.{name}"

    def subject(self, topic: str, *, is_key: bool = False) -> str:
        """The registry subject of ``topic``'s values (keys with ``is_key``) under this serde's strategy."""
        return subject_name(self.subject_name_strategy, topic, is_key, self.full_record_name)


def _check_avro_schema(schema: dict[str, Any] | str) -> None:
    """:raises ValueError: ``schema`` is not a valid Avro schema (fastavro's message)."""
    import fastavro

    try:
        parsed = json.loads(schema) if isinstance(schema, str) else schema
        fastavro.parse_schema(parsed)
    except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException) as exc:
        raise ValueError(f"reader_schema is not a valid Avro schema: {type(exc).__name__}: {exc}") from None
    if not isinstance(parsed, dict) or parsed.get("type") != "record" or not isinstance(parsed.get("fields"), list):
        raise ValueError("reader_schema must be an Avro record with 'fields' (the joiner addresses its fields)")


class Versioned(_Model):
    """A versioned table keeps history: lookups see the value as of a timestamp."""

    history_retention: DurationMs


class Input(_Model):
    topic: TopicName
    role: Role
    key: Serde = Serde()
    value: Serde = Serde()
    versioned: Versioned | None = None
    #: re-key this input onto an internal topic co-partitioned with the other side (seed 003's remedy for
    #: inputs with different partition counts): ``<pipeline>-<input>-repartition``, murmur2 placement
    repartition: bool = False

    @model_validator(mode="after")
    def _only_tables_are_versioned(self) -> Input:
        if self.versioned is not None and self.role is Role.STREAM:
            raise ValueError("'versioned' applies to tables, not to role 'stream'")
        return self


class Window(_Model):
    """Stream-stream join window: a right record joins a left one if
    ``left.ts - before <= right.ts <= left.ts + after``."""

    before: DurationMs
    after: DurationMs


class Projection(_Model):
    """A value computed from a join result: a Spark SQL expression or a dotted path to a Python function.

    Expressions see the columns ``key``, ``left``, ``right`` (joiners) or ``key``, ``value`` (aggregations).
    A function is called as ``fn(key, left, right)`` (joiners) or ``fn(key, value)`` (selectors).
    """

    expr: str | None = None
    function: DottedPath | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Projection:
        if (self.expr is None) == (self.function is None):
            raise ValueError("give exactly one of 'expr' (Spark SQL) or 'function' (module.path:name)")
        return self


class Joiner(_Model):
    """Builds the joined value. Default: a struct ``{left, right}`` of both sides' values."""

    #: field -> Spark SQL expression (a struct), or one expression (a scalar value)
    select: dict[str, str] | Annotated[str, Field(min_length=1)] | None = None
    function: DottedPath | None = None

    @model_validator(mode="after")
    def _at_most_one(self) -> Joiner:
        if self.select is not None and self.function is not None:
            raise ValueError("give 'select' (field -> Spark SQL expression, or one expression) or 'function', not both")
        return self

    @property
    def builds_struct(self) -> bool:
        """The value is a struct: the default ``{left, right}`` or a ``select`` of fields."""
        return self.function is None and not isinstance(self.select, str)

    @property
    def is_default(self) -> bool:
        return self.select is None and self.function is None


class Join(_Model):
    shape: Shape
    kind: Kind
    left: str
    right: str
    window: Window | None = None
    grace: DurationMs = 0
    joiner: Joiner = Joiner()
    #: stream-globaltable: derives the table key from the stream record (default: the stream key)
    key_selector: Projection | None = None
    #: table-table-fk: derives the right table's key from the left value
    foreign_key: Projection | None = None
    #: a stage of ``joins:``: its name (default ``stage<N>``, N from 1), which the next stage's ``left`` names
    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")] | None = None
    #: an earlier stage of ``joins:`` may also write its result (the last stage's is the spec's ``output``)
    output: Sink | None = None


class Reduce(StrEnum):
    SUM = "sum"
    COUNT = "count"


class FileSink(_Model):
    """Files under ``path``: the stream writes ``stream/batch_id=N/date=D/``; day partitions that
    reprocessing publishes live in ``daily/date=D/``."""

    path: str
    format: str = Field(default="parquet", pattern="^(parquet|json)$")


class Delivery(StrEnum):
    """How the pipeline's Kafka outputs survive a crash (its files are exactly once either way)."""

    AT_LEAST_ONCE = "at_least_once"  # a batch written again after a crash is on the topics twice
    EXACTLY_ONCE = "exactly_once"  # transactions: consumers with isolation.level=read_committed see it once


class Sink(_Model):
    topic: TopicName | None = None
    value_format: Format = Format.JSON
    files: FileSink | None = None
    #: set on the pipeline's ``output``: it covers every topic the pipeline writes (the aggregate's, the dead
    #: letters' too)
    delivery: Delivery = Delivery.AT_LEAST_ONCE
    #: ``value_format: avro``, ``json_schema`` or ``protobuf``: the schema registry's Airflow connection id (default
    #: ``schema_registry_default``), the subject's naming and the compatibility level the job sets on it before
    #: registering the value's schema
    registry: str | None = None
    subject_name_strategy: SubjectNameStrategy = SubjectNameStrategy.TOPIC_NAME
    compatibility: Compatibility = Compatibility.BACKWARD

    @model_validator(mode="after")
    def _registry_only_for_avro(self) -> Sink:
        if self.value_format not in (Format.AVRO, Format.JSON_SCHEMA, Format.PROTOBUF):
            if self.registry is not None or self.subject_name_strategy is not SubjectNameStrategy.TOPIC_NAME:
                raise ValueError(f"'registry' and 'subject_name_strategy' are only for value_format 'avro', "
                                 f"'json_schema' or 'protobuf', not {self.value_format.value!r}")  # fmt: skip
        elif self.topic is None:
            raise ValueError(f"value_format {self.value_format.value!r} needs a 'topic' (its subject is named after "
                             "it)")  # fmt: skip
        return self

    @property
    def registry_conn_id(self) -> str:
        """The schema registry's Airflow connection id."""
        return self.registry or DEFAULT_REGISTRY

    @property
    def record_name(self) -> str:
        """The full name of the value's Avro record (a JSON Schema's title, a Protobuf message's full name):
        ``streamjoin.<topic>`` (characters Avro names cannot hold become ``_``)."""
        assert self.topic is not None
        name = re.sub(r"[^A-Za-z0-9_]", "_", self.topic)
        return f"streamjoin.{'_' + name if name[0].isdigit() else name}"

    @property
    def subject(self) -> str:
        """The registry subject of the values (an Avro, JSON Schema or Protobuf output's)."""
        assert self.topic is not None
        return subject_name(self.subject_name_strategy, self.topic, False, self.record_name)


class Emit(StrEnum):
    EVERY_CHANGE = "every_change"  # one changelog update per input record
    PER_BATCH = "per_batch"  # the latest value per group once per micro-batch (like Kafka Streams' cache)


class Aggregate(_Model):
    """Re-key the join result and reduce it into a changelog table (seed 000's clicks per region)."""

    group_by: Projection
    reduce: Reduce
    value: Projection | None = None
    emit: Emit = Emit.EVERY_CHANGE
    output: Sink

    @model_validator(mode="after")
    def _sum_needs_value(self) -> Aggregate:
        if self.reduce is Reduce.SUM and self.value is None:
            raise ValueError("reduce 'sum' needs 'value' (the expression to add up)")
        return self


class KafkaSettings(_Model):
    partitions: Annotated[int, Field(ge=1)] = 4
    replication_factor: Annotated[int, Field(ge=1)] = 1
    min_insync_replicas: Annotated[int, Field(ge=1)] | None = None


class Trigger(_Model):
    processing_time: DurationMs = 1000
    max_offsets_per_trigger: Annotated[int, Field(ge=1)] | None = None


#: a JVM memory size as Spark writes it: ``512m``, ``4g``
MemorySize = Annotated[str, Field(pattern=r"^[1-9][0-9]*[kmgt]$")]
#: Spark properties a spec may not set: they go on spark-submit's command line, where no secret may
_SECRET_CONF = re.compile(r"(?i)secret|password|token|access[.]?key|credential")


def _not_a_secret(key: str) -> str:
    if _SECRET_CONF.search(key):
        raise ValueError(f"{key!r} looks like a secret, and a spec's Spark properties go on spark-submit's command "
                         "line: give it to the cluster instead (spark-defaults.conf, a Hadoop credential provider, "
                         "the environment)")  # fmt: skip
    return key


class SparkSettings(_Model):
    """What the pipeline's Spark jobs (the streaming job, a day's reprocessing) ask spark-submit for. In local
    mode the driver runs the tasks too: its memory is theirs (Spark's default is ``1g``)."""

    driver_memory: MemorySize | None = None
    executor_memory: MemorySize | None = None
    executor_cores: Annotated[int, Field(ge=1)] | None = None
    #: any other Spark property (``spark.executor.instances``, ``spark.hadoop.fs.s3a.endpoint``...)
    conf: dict[Annotated[str, AfterValidator(_not_a_secret)], str] = {}

    def properties(self) -> dict[str, str]:
        """The settings as Spark properties."""
        sized = {"spark.driver.memory": self.driver_memory, "spark.executor.memory": self.executor_memory,
                 "spark.executor.cores": None if self.executor_cores is None else str(self.executor_cores)}  # fmt: skip
        return {**self.conf, **{key: value for key, value in sized.items() if value is not None}}


class Quality(_Model):
    """Where the pipeline's expectation suite lives (see streamjoin.quality.suites)."""

    suite: str


class Alerts(_Model):
    """Where a pipeline's alerts go (failed quality checks, the stream owner's crash loop or lag, a failed
    reprocessing): Airflow connection ids. The project-wide default has the same fields
    (``include/alerts.yaml``, :mod:`streamjoin.core.alerts`); a spec's ``alerts:`` replaces it."""

    #: an HTTP connection; the alert is POSTed to it as JSON
    webhook_conn_id: str | None = None
    #: path appended to the webhook connection's URL
    webhook_endpoint: str | None = None
    #: an SMTP connection; needs ``to``
    smtp_conn_id: str | None = None
    to: list[str] = []
    #: sender; default: the SMTP connection's ``from_email`` extra
    from_email: str | None = None

    @model_validator(mode="after")
    def _smtp_needs_recipients(self) -> Alerts:
        if self.smtp_conn_id and not self.to:
            raise ValueError(f"smtp_conn_id {self.smtp_conn_id!r} needs 'to' (the recipients)")
        return self


class Backfill(_Model):
    """The daily backfill DAG: ``start`` is the first day its catchup runs (default: none, only the latest day
    runs once the DAG is unpaused; days before the topics' first record are skipped either way)."""

    start: date | None = None


class PipelineSpec(_Model):
    """One join pipeline: inputs, the join, an optional aggregation, outputs and the dead-letter topic."""

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")]
    description: str = ""
    kafka: KafkaSettings = KafkaSettings()
    inputs: dict[str, Input]
    #: the join, or the last stage of ``joins:`` (what the aggregate, the outputs and the quality suite follow)
    join: Join
    #: the stages of ``joins:`` before the last one (empty for ``join:``); :attr:`stages` lists them all. The
    #: YAML writes ``joins:`` (a list); this field is how the model keeps it without changing ``join``
    earlier_joins: tuple[Join, ...] = ()
    output: Sink = Sink()
    aggregate: Aggregate | None = None
    dead_letter_topic: TopicName
    trigger: Trigger = Trigger()
    quality: Quality | None = None
    #: where alerts go; default: the project's (``include/alerts.yaml``)
    alerts: Alerts | None = None
    backfill: Backfill = Backfill()
    spark: SparkSettings = SparkSettings()
    #: where the job keeps its offsets, state and lease: a Hadoop filesystem URI of this pipeline's own
    #: folder (``hdfs://namenode:8020/streamjoin/clicks``, ``s3a://bucket/...``, ``file:///...``); default:
    #: ``var/checkpoints/<name>`` on the machine that runs the driver
    checkpoint_location: Annotated[str, Field(pattern=r"^[a-z][a-z0-9+.-]*://[^\s]+$")] | None = None

    @model_validator(mode="before")
    @classmethod
    def _joins_list(cls, data: Any) -> Any:
        return _split_stages(data)

    @model_serializer(mode="wrap")
    def _as_written(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Dumped as the spec file writes it, so that a dump parses again (jobs get the spec as JSON): ``join``
        alone, or every stage under ``joins``."""
        data = handler(self)
        earlier = data.pop("earlier_joins", None) or []
        if not earlier:
            return data
        return {("joins" if key == "join" else key): ([*earlier, value] if key == "join" else value)
                for key, value in data.items()}  # fmt: skip

    @property
    def stages(self) -> tuple[Join, ...]:
        """Every join stage in order: the stages of ``joins:``, or the one ``join:``. :attr:`join` is the last."""
        return (*self.earlier_joins, self.join)

    @property
    def chained(self) -> bool:
        """Several join stages (``joins:`` with more than one)."""
        return bool(self.earlier_joins)

    def stage_path(self, index: int) -> str:
        """Where stage ``index`` is written in the spec: ``join`` (the one-join form) or ``joins[index]``."""
        return "join" if not self.earlier_joins and self.join.name is None else f"joins[{index}]"

    def stage_input(self, index: int) -> Input | None:
        """Stage ``index``'s left input, or None where its left side is the previous stage's result."""
        return self.inputs[self.stages[0].left] if index == 0 else None

    @property
    def left(self) -> Input:
        """The left input of the (first) join: the one whose key the results carry."""
        return self.inputs[self.stages[0].left]

    @property
    def right(self) -> Input:
        """The right input of the (last) join."""
        return self.inputs[self.join.right]

    def repartition_topic(self, name: str) -> str:
        """The internal topic input ``name`` is repartitioned into (whether or not it asks to be)."""
        return f"{self.name}-{name}-repartition"

    @property
    def exactly_once(self) -> bool:
        return self.output.delivery is Delivery.EXACTLY_ONCE

    @property
    def marker_topic(self) -> str:
        """The topic an exactly-once pipeline's write tasks mark their committed batches on."""
        return f"{self.name}-batch-markers"

    def input_by_topic(self, topic: str) -> tuple[str, Input]:
        for name, spec in self.inputs.items():
            if spec.topic == topic:
                return name, spec
        raise KeyError(topic)


def _cross_field_problems(spec: PipelineSpec) -> list[tuple[str, Any, str]]:
    """Rules that span several fields, as (path, bad value, what is allowed)."""
    join, inputs = spec.join, spec.inputs
    problems: list[tuple[str, Any, str]] = []
    for index, stage in enumerate(spec.stages):
        found, fatal = _stage_problems(spec, index, stage)
        problems += found
        if fatal:  # its sides are unusable: the rules after it would only repeat that
            return problems
    problems += _repartition_problems(spec)
    registered = (Format.AVRO, Format.JSON_SCHEMA, Format.PROTOBUF)
    if spec.output.value_format not in (Format.JSON, *registered) and join.joiner.builds_struct:
        problems.append(
            (
                "output.value_format",
                spec.output.value_format.value,
                "'json', 'avro', 'json_schema' or 'protobuf': the joiner builds a struct; a select of one "
                "expression or a function joiner returning a scalar can be written as 'string' or 'long'",
            )
        )
    if spec.output.value_format in registered and not join.joiner.builds_struct:
        what = {Format.AVRO: "Avro output's record", Format.JSON_SCHEMA: "JSON Schema output's schema",
                Format.PROTOBUF: "Protobuf output's message"}[spec.output.value_format]  # fmt: skip
        problems.append(
            ("output.value_format", spec.output.value_format.value,
             f"'json', 'string' or 'long': an {what} is derived from a joiner that builds a struct "
             "(the default {left, right} or a select of fields), not from one expression or a function"),
        )  # fmt: skip
    for name, inp in inputs.items():
        # a registry key is its serialized bytes, as Kafka Streams compares keys: nothing reads its fields
        for field, given in (("reader_schema", inp.key.reader_schema), ("schema", inp.key.fields)):
            if inp.key.format.in_registry and given is not None:
                problems.append(
                    (f"inputs.{name}.key.{field}", given,
                     f"none: a {inp.key.format.label} key is joined by its serialized bytes (magic byte, schema "
                     "id, payload), as Kafka Streams compares keys; it is not decoded"),
                )  # fmt: skip
    if spec.aggregate is not None and spec.aggregate.output.delivery is not Delivery.AT_LEAST_ONCE:
        problems.append(
            ("aggregate.output.delivery", spec.aggregate.output.delivery.value,
             "unset: output.delivery covers every topic of the pipeline, the aggregate's included"),
        )  # fmt: skip
    for index, stage in enumerate(spec.earlier_joins):
        if stage.output is not None and stage.output.delivery is not Delivery.AT_LEAST_ONCE:
            problems.append(
                (f"{spec.stage_path(index)}.output.delivery", stage.output.delivery.value,
                 "unset: output.delivery covers every topic of the pipeline, the stages' outputs included"),
            )  # fmt: skip
    if spec.output.topic is None and spec.output.files is None and spec.aggregate is None:
        problems.append(("output", None, "an output topic or files, or an aggregate"))
    return problems


def _split_stages(data: Any) -> Any:
    """``joins: [stage, ...]`` -> ``join`` (the last stage) and ``earlier_joins``: each stage named (default
    ``stage<N>``), a later stage's ``left`` (default) the previous stage's name."""
    if not isinstance(data, dict):
        return data
    if "earlier_joins" in data:
        raise ValueError("'earlier_joins' is not a spec field: write the stages as 'joins:' (a list)")
    if "joins" not in data:
        return data
    if "join" in data:
        raise ValueError("give 'join' (one join) or 'joins' (a list of join stages), not both")
    joins = data["joins"]
    if not isinstance(joins, list) or not joins:
        raise ValueError(f"'joins' must be a list of at least one join stage, got {joins!r}")
    stages: list[Any] = []
    for number, stage in enumerate(joins, start=1):
        if isinstance(stage, dict):
            stage = {"name": f"stage{number}", **stage}
            previous = stages[-1] if stages else None
            if isinstance(previous, dict) and "left" not in stage:
                stage["left"] = previous["name"]
        stages.append(stage)
    rest = {key: value for key, value in data.items() if key != "joins"}
    return {**rest, "join": stages[-1], "earlier_joins": stages[:-1]}


def _user_loc(data: Any, loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """A field error's location as the spec file writes it: the stages of ``joins:`` as ``joins[i]``."""
    if not isinstance(data, dict) or "joins" not in data:
        return loc
    if not loc or "join" in data or not isinstance(data["joins"], list):
        return loc or ("joins",)
    if loc[0] == "join":
        return ("joins", len(data["joins"]) - 1, *loc[1:])
    if loc[0] == "earlier_joins":
        return ("joins", *loc[1:])
    return loc


def _result_role(stage: Join) -> Role:
    """What a stage yields for the next one: a stream or a table (its shape's result)."""
    return Role.TABLE if traits(stage.shape).table_result else Role.STREAM


def _stage_problems(spec: PipelineSpec, index: int, join: Join) -> tuple[list[tuple[str, Any, str]], bool]:
    """The rules of join stage ``index`` (``join``, or ``joins[index]``), and whether its sides are unusable
    (the rules after it are then not checked). Stage 1 joins two inputs; a later stage joins the previous
    stage's result (its ``left``: that stage's name) with an input, in any shape whose left side takes what
    the previous stage yields (a stream or a table)."""
    inputs, path, stages = spec.inputs, spec.stage_path(index), spec.stages
    problems: list[tuple[str, Any, str]] = []
    if index == 0:
        sides: tuple[str, ...] = ("left", "right")
    else:
        previous = stages[index - 1]
        if join.left != previous.name:
            expected = (f"{previous.name!r}, the name of {spec.stage_path(index - 1)} (or leave 'left' out): a later "
                        "stage joins the previous stage's result with an input")  # fmt: skip
            return [(f"{path}.left", join.left, expected)], True
        sides = ("right",)
    for side in sides:
        name = getattr(join, side)
        if name not in inputs:
            return [(f"{path}.{side}", name, f"one of the inputs {sorted(inputs)}")], True
    shape = traits(join.shape)
    if index == 0 and join.left == join.right and join.shape is not Shape.STREAM_STREAM:
        topic = inputs[join.left].topic
        clash = f"input {join.left!r} is both {path}.left and {path}.right (topic {topic!r})"
        return [(f"{path}.right", join.right, f"another input: {clash}: only a stream-stream join may join an input "
                 "with itself (a self-join)")], True  # fmt: skip
    used = {n: inputs[n].topic for stage in stages[: index + 1] for n in (stage.left, stage.right) if n in inputs}
    same_topic = [other for other, topic in used.items() if topic == inputs[join.right].topic and other != join.right]
    if same_topic:
        # records are routed to a side by their topic: two inputs on one topic would both see every record
        clash = f"inputs {same_topic[0]!r} and {join.right!r} both read topic {inputs[join.right].topic!r}"
        remedy = "name one input on both sides of a stream-stream join for a self-join, or join a copy of the topic"
        return [(f"{path}.right", join.right, f"an input reading another topic: {clash}: {remedy}")], True
    joins_what = f"shape {join.shape.value!r} joins a {shape.left.value} (left) with a {shape.right.value} (right)"
    left_role = inputs[join.left].role if index == 0 else _result_role(stages[index - 1])
    if index == 0 and left_role is not shape.left:
        problems.append((f"inputs.{join.left}.role", left_role.value, f"{shape.left.value!r}: {joins_what}"))
    elif left_role is not shape.left:
        allowed = sorted(s.value for s, t in SHAPES.items() if t.left is left_role)
        yields = f"{spec.stage_path(index - 1)} ({stages[index - 1].shape.value}) yields a {left_role.value}"
        problems.append((f"{path}.shape", join.shape.value, f"one of {allowed}: {yields}, and {joins_what}"))
    right_role = inputs[join.right].role
    if right_role is not shape.right:
        problems.append((f"inputs.{join.right}.role", right_role.value, f"{shape.right.value!r}: {joins_what}"))
    key_join = join.shape in (Shape.STREAM_STREAM, Shape.STREAM_TABLE, Shape.TABLE_TABLE)
    root = stages[0].left  # every stage's result is keyed as the first stage's left input
    left_key, right_key = inputs[root].key.format, inputs[join.right].key.format
    if key_join and left_key is not right_key:
        # Kafka Streams joins serialized keys: a string "5" and a long 5 never match
        problems.append(
            (
                f"inputs.{join.right}.key.format",
                right_key.value,
                f"{left_key.value!r}, the key format of {root!r}: a {join.shape.value} join matches equal keys",
            )
        )
    if join.kind not in shape.kinds:
        allowed_kinds = ", ".join(sorted(k.value for k in shape.kinds))
        problems.append((f"{path}.kind", join.kind.value, f"one of {allowed_kinds} for shape {join.shape.value!r}"))
    if (join.window is not None) != shape.windowed:
        problems.append((f"{path}.window", join.window, "a window for stream-stream joins, none for other shapes"))
    if join.grace and not shape.grace:
        problems.append((f"{path}.grace", join.grace, "0: grace applies to stream-stream and stream-table joins"))
    if join.grace and shape.grace and not shape.windowed:  # a lookup's grace: stream records wait for versions
        versioned = inputs[join.right].versioned
        if versioned is None or versioned.history_retention < join.grace:
            problems.append(
                (
                    f"inputs.{join.right}.versioned",
                    versioned,
                    f"a versioned table with history_retention >= grace ({join.grace} ms)",
                )
            )
    if (join.foreign_key is not None) != shape.foreign_key:
        problems.append(
            (f"{path}.foreign_key", join.foreign_key, "a foreign_key for table-table-fk joins, none for other shapes")
        )
    if join.key_selector is not None and not shape.key_selector:
        problems.append((f"{path}.key_selector", join.key_selector, "no key_selector outside stream-globaltable"))
    if join.output is not None and index == len(stages) - 1:
        problems.append((f"{path}.output", join.output.model_dump(mode="json", exclude_defaults=True),
                         "unset on the last stage: the pipeline's 'output' is its result"))  # fmt: skip
    if join.name is not None and join.name in inputs:
        problems.append((f"{path}.name", join.name, "a name no input has"))
    if join.name is not None and [s.name for s in stages].count(join.name) > 1:
        problems.append((f"{path}.name", join.name, "a name no other stage has"))
    return problems, False


def _repartition_problems(spec: PipelineSpec) -> list[tuple[str, Any, str]]:
    """``inputs.<name>.repartition``: only a side of a co-partitioned join, into a valid, unused topic name."""
    problems: list[tuple[str, Any, str]] = []
    used = {inp.topic for inp in spec.inputs.values()} | {spec.dead_letter_topic, spec.output.topic}
    if spec.aggregate is not None:
        used.add(spec.aggregate.output.topic)
    for name, inp in spec.inputs.items():
        if not inp.repartition:
            continue
        path, internal = f"inputs.{name}.repartition", spec.repartition_topic(name)
        stage = next((s for s in spec.stages if name in (s.left, s.right)), spec.join)
        if not traits(stage.shape).copartitioned:
            problems.append((path, True, f"false: shape {stage.shape.value!r} does not need co-partitioned inputs"))
        elif name not in (stage.left, stage.right):
            problems.append((path, True, f"false: input {name!r} is not a side of the join"))
        elif not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", internal):
            problems.append((path, True, f"false, or an input name that makes a valid topic name (got {internal!r})"))
        elif internal in used:
            problems.append((path, True, f"false, or no other topic named {internal!r} (its internal topic)"))
    return problems


def _validated(data: Any, source: str) -> tuple[PipelineSpec | None, list[SpecError]]:
    try:
        spec = PipelineSpec.model_validate(data)
    except ValidationError as exc:
        errors = [(_user_loc(data, tuple(e["loc"])), e["msg"]) for e in exc.errors()]
        return None, [SpecError(source, field_path(loc), value_at(data, loc), msg) for loc, msg in errors]
    problems = [SpecError(source, path, value, expected) for path, value, expected in _cross_field_problems(spec)]
    return spec, problems


def parse_spec(data: Any, source: str = "<spec>") -> PipelineSpec:
    """Validate a mapping (as read from YAML) into a :class:`PipelineSpec`.

    :raises SpecError: the first problem (:func:`spec_problems` lists them all).
    """
    spec, problems = _validated(data, source)
    if problems or spec is None:
        raise problems[0]
    return spec


def spec_problems(data: Any, source: str = "<spec>") -> list[SpecError]:
    """Every problem of a spec at once (empty: valid): all field errors, or if the fields are valid, all
    rules that span fields."""
    return _validated(data, source)[1]


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise SpecError(str(path), "", None, "an existing pipeline spec file") from None
    except yaml.YAMLError as exc:
        raise SpecError(str(path), "", None, f"valid YAML ({exc})") from None


def load_spec(path: str | Path) -> PipelineSpec:
    """Read and validate ``include/pipelines/<name>.yaml``."""
    return parse_spec(_read_yaml(Path(path)), str(path))


def spec_file_problems(path: str | Path) -> list[SpecError]:
    """Every problem of a spec file (unreadable: that one problem)."""
    try:
        data = _read_yaml(Path(path))
    except SpecError as exc:
        return [exc]
    return spec_problems(data, str(path))


def find_spec(name: str, directory: str | Path) -> PipelineSpec:
    """Load the spec called ``name`` from ``directory``; the error lists the pipelines there."""
    path = Path(directory) / f"{name}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in Path(directory).glob("*.yaml"))
        raise SpecError(str(path), "name", name, f"one of the pipelines {known}")
    return load_spec(path)
