"""The pipeline spec: one typed, frozen model read from ``include/pipelines/<name>.yaml``.

DAGs, jobs, topic plans and quality suites all take this model; nothing else reads the YAML.
A bad spec fails with :class:`~streamjoin.core.errors.SpecError` naming the file, the path inside it,
the bad value and what is allowed.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from datetime import date
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from streamjoin.core.errors import SpecError, field_path, value_at
from streamjoin.core.shapes import Kind, Role, Shape, traits

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


class FieldType(StrEnum):
    STRING = "string"
    LONG = "long"
    DOUBLE = "double"
    BOOLEAN = "boolean"


class Serde(_Model):
    """How a key or value is encoded on the topic. JSON needs a flat schema: field -> type."""

    format: Format = Format.STRING
    fields: dict[str, FieldType] | None = Field(default=None, alias="schema")

    @model_validator(mode="after")
    def _json_needs_schema(self) -> Serde:
        if self.format is Format.JSON and not self.fields:
            raise ValueError("format 'json' needs a 'schema' mapping field names to string|long|double|boolean")
        if self.format is not Format.JSON and self.fields:
            raise ValueError(f"'schema' is only for format 'json', not {self.format.value!r}")
        return self


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
    join: Join
    output: Sink = Sink()
    aggregate: Aggregate | None = None
    dead_letter_topic: TopicName
    trigger: Trigger = Trigger()
    quality: Quality | None = None
    #: where alerts go; default: the project's (``include/alerts.yaml``)
    alerts: Alerts | None = None
    backfill: Backfill = Backfill()
    #: where the job keeps its offsets, state and lease: a Hadoop filesystem URI of this pipeline's own
    #: folder (``hdfs://namenode:8020/streamjoin/clicks``, ``s3a://bucket/...``, ``file:///...``); default:
    #: ``var/checkpoints/<name>`` on the machine that runs the driver
    checkpoint_location: Annotated[str, Field(pattern=r"^[a-z][a-z0-9+.-]*://[^\s]+$")] | None = None

    @property
    def left(self) -> Input:
        return self.inputs[self.join.left]

    @property
    def right(self) -> Input:
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
    for side in ("left", "right"):
        name = getattr(join, side)
        if name not in inputs:
            return [(f"join.{side}", name, f"one of the inputs {sorted(inputs)}")]
    left_topic, right_topic = inputs[join.left].topic, inputs[join.right].topic
    if left_topic == right_topic:
        # Every record is routed to its side by topic, so both sides would read the same records as the
        # left side and the join would see an empty right side: refuse it rather than join nothing.
        clash = (
            f"input {join.left!r} is both join.left and join.right (topic {left_topic!r})"
            if join.left == join.right
            else f"inputs {join.left!r} and {join.right!r} both read topic {left_topic!r}"
        )
        return [
            (
                "join.right",
                join.right,
                f"an input reading another topic than join.left: {clash}: a self-join is not supported; "
                "copy the topic into a second topic (e.g. a job that forwards every record) and join "
                "against the copy",
            )
        ]
    problems: list[tuple[str, Any, str]] = []
    shape = traits(join.shape)
    problems += _repartition_problems(spec)
    left_role, right_role, kinds = shape.left, shape.right, shape.kinds
    for side, role in (("left", left_role), ("right", right_role)):
        actual = inputs[getattr(join, side)].role
        if actual is not role:
            problems.append(
                (
                    f"inputs.{getattr(join, side)}.role",
                    actual.value,
                    f"{role.value!r}: shape {join.shape.value!r} joins a {left_role.value} (left) "
                    f"with a {right_role.value} (right)",
                )
            )
    key_join = join.shape in (Shape.STREAM_STREAM, Shape.STREAM_TABLE, Shape.TABLE_TABLE)
    left_key, right_key = inputs[join.left].key.format, inputs[join.right].key.format
    if key_join and left_key is not right_key:
        # Kafka Streams joins serialized keys: a string "5" and a long 5 never match
        problems.append(
            (
                f"inputs.{join.right}.key.format",
                right_key.value,
                f"{left_key.value!r}, the key format of {join.left!r}: a {join.shape.value} join matches equal keys",
            )
        )
    if join.kind not in kinds:
        allowed = ", ".join(sorted(k.value for k in kinds))
        problems.append(("join.kind", join.kind.value, f"one of {allowed} for shape {join.shape.value!r}"))
    if (join.window is not None) != shape.windowed:
        problems.append(("join.window", join.window, "a window for stream-stream joins, none for other shapes"))
    if join.grace and not shape.grace:
        problems.append(("join.grace", join.grace, "0: grace applies to stream-stream and stream-table joins"))
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
            ("join.foreign_key", join.foreign_key, "a foreign_key for table-table-fk joins, none for other shapes")
        )
    if join.key_selector is not None and not shape.key_selector:
        problems.append(("join.key_selector", join.key_selector, "no key_selector outside stream-globaltable"))
    if spec.output.value_format is not Format.JSON and join.joiner.builds_struct:
        problems.append(
            (
                "output.value_format",
                spec.output.value_format.value,
                "'json': the joiner builds a struct; a select of one expression or a function joiner returning "
                "a scalar can be written as 'string' or 'long'",
            )
        )
    if spec.aggregate is not None and spec.aggregate.output.delivery is not Delivery.AT_LEAST_ONCE:
        problems.append(
            ("aggregate.output.delivery", spec.aggregate.output.delivery.value,
             "unset: output.delivery covers every topic of the pipeline, the aggregate's included"),
        )  # fmt: skip
    if spec.output.topic is None and spec.output.files is None and spec.aggregate is None:
        problems.append(("output", None, "an output topic or files, or an aggregate"))
    return problems


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
        if not traits(spec.join.shape).copartitioned:
            problems.append((path, True, f"false: shape {spec.join.shape.value!r} does not need co-partitioned inputs"))
        elif name not in (spec.join.left, spec.join.right):
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
        errors = [(tuple(e["loc"]), e["msg"]) for e in exc.errors()]
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
