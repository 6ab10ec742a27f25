"""A Confluent-compatible schema registry as the pipelines use it: writer schemas by id, a subject's versions,
the reader schema of an Avro input, and an Avro output's schema registered under its subject.

The registry is an Airflow connection (a serde's ``registry``, default ``schema_registry_default``):

=======================  =============================================================================
``extra.url``            the API's base URL (``https://sr.example.com``); else ``http(s)://host:port/schema``
                         (``https`` when ``extra.protocol`` is ``https`` or a TLS setting is given)
login / password         basic auth (``basic.auth.user.info``)
``extra.ssl.*``          ``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``,
                         ``ssl.key.password``: TLS, as Confluent's client takes them
=======================  =============================================================================

Clients are kept per connection and process (the driver's): a schema fetched by id is fetched once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from streamjoin.core.errors import SchemaRegistrationError, SchemaRegistryConfigError, SchemaRegistryUnavailableError
from streamjoin.core.spec import Format, Input, PipelineSpec, Serde, Sink

_TLS_KEYS = ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password")


@dataclass(frozen=True)
class RegistryConfig:
    """Confluent's ``SchemaRegistryClient`` settings of one registry; ``repr`` shows no secret."""

    url: str
    conn_id: str = "<settings>"
    settings: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    @classmethod
    def from_connection(cls, conn_id: str) -> RegistryConfig:
        """The Airflow connection ``conn_id``: ``AIRFLOW_CONN_<ID>``, a secrets backend, or the metastore (a task
        asks through Airflow's API; a job's driver that is no task reads the metastore itself).

        :raises SchemaRegistryConfigError: no such connection, or it has no address (terminal)
        """
        from airflow.sdk.bases.hook import BaseHook
        from airflow.sdk.exceptions import AirflowNotFoundException

        try:
            conn = BaseHook.get_connection(conn_id)
        except AirflowNotFoundException:
            try:
                from airflow.models.connection import Connection

                conn = Connection.get_connection_from_secrets(conn_id)
            except Exception as exc:
                raise SchemaRegistryConfigError(
                    conn_id,
                    f"not found ({type(exc).__name__}: {exc}): create it in Admin > Connections, or set "
                    f"AIRFLOW_CONN_{conn_id.upper()} in the environment of Airflow and of the jobs",
                ) from None
        extra = dict(conn.extra_dejson or {})
        settings = {key: str(extra[key]) for key in _TLS_KEYS if extra.get(key)}
        url = extra.get("url")
        if not url:
            if not conn.host:
                raise SchemaRegistryConfigError(conn_id, "it has neither extra.url nor a host: give the registry's URL")
            scheme = "https" if extra.get("protocol") == "https" or settings else "http"
            port = f":{conn.port}" if conn.port else ""
            path = f"/{conn.schema.strip('/')}" if conn.schema else ""
            url = f"{scheme}://{conn.host}{port}{path}"
        if conn.login:
            settings["basic.auth.user.info"] = f"{conn.login}:{conn.password or ''}"
        return cls(str(url).rstrip("/"), conn_id, tuple(sorted(settings.items())))

    def client_conf(self) -> dict[str, str]:
        return {"url": self.url, **dict(self.settings)}


@cache
def registry_config(conn_id: str) -> RegistryConfig:
    """:meth:`RegistryConfig.from_connection`, once per process."""
    return RegistryConfig.from_connection(conn_id)


@cache
def client(config: RegistryConfig) -> Any:
    """Confluent's client of ``config`` (it caches schemas by id), one per process."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient(config.client_conf())


def _call(config: RegistryConfig, what: str, call: Any, *args: Any) -> Any:
    """``call(*args)``; the registry not answering (or a 5xx) is :class:`SchemaRegistryUnavailableError`."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    try:
        return call(*args)
    except SchemaRegistryError as exc:
        if exc.http_status_code >= 500:
            raise SchemaRegistryUnavailableError(config.url, f"{what}: {exc}") from exc
        raise
    except Exception as exc:  # connection refused, timeouts, TLS: httpx's errors
        raise SchemaRegistryUnavailableError(config.url, f"{what}: {type(exc).__name__}: {exc}") from exc


@dataclass(frozen=True)
class AvroSchemas:
    """An Avro input's schemas for one batch: the reader schema, and each version's writer schema by id."""

    subject: str
    reader: str
    #: ``(schema id, writer schema)`` of each version of the subject, oldest first
    writers: tuple[tuple[int, str], ...]

    @property
    def ids(self) -> list[int]:
        return [schema_id for schema_id, _ in self.writers]

    @property
    def key(self) -> str:
        """Names the decoding program of these schemas (:func:`~streamjoin.spark.templates.templated`)."""
        return f"{self.subject}@{','.join(map(str, self.ids))}:{hash(self.reader)}"


def subject_ids(config: RegistryConfig, subject: str) -> list[int]:
    """The schema id of each of ``subject``'s versions (oldest first): one listing, then a call per version
    not seen before in this process (a version's id never changes)."""
    return [schema_id for _, schema_id in subject_versions(config, subject)]


def subject_versions(config: RegistryConfig, subject: str) -> list[tuple[int, int]]:
    """``(version, schema id)`` of each of ``subject``'s versions, oldest first (none: no such subject)."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    registry = client(config)
    try:
        versions = _call(config, f"versions of {subject!r}", registry.get_versions, subject)
    except SchemaRegistryError as exc:
        if exc.http_status_code == 404:
            return []
        raise
    return [(v, _version_id(config, subject, v)) for v in versions]


@cache
def _version_id(config: RegistryConfig, subject: str, version: int) -> int:
    found = _call(config, f"version {version} of {subject!r}", client(config).get_version, subject, version)
    return int(found.schema_id)


def writer_schema(config: RegistryConfig, schema_id: int) -> str:
    """The schema of ``schema_id`` (fetched once per process: Confluent's client caches it)."""
    return str(_call(config, f"schema id {schema_id}", client(config).get_schema, schema_id).schema_str)


def latest_schema(config: RegistryConfig, subject: str) -> str | None:
    """The schema of ``subject``'s latest version now (None: no versions); not cached."""
    versions = subject_versions(config, subject)
    return writer_schema(config, versions[-1][1]) if versions else None


@cache
def _latest_reader(config: RegistryConfig, subject: str) -> str:
    """The subject's latest schema when first asked in this process (the job's start)."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    try:
        latest = _call(config, f"latest version of {subject!r}", client(config).get_latest_version, subject)
    except SchemaRegistryError as exc:
        raise SchemaRegistrationError(
            subject,
            None,
            f"{exc}: an Avro, Protobuf or JSON Schema input needs its subject registered (Avro: or "
            "a reader_schema in the spec)",
        ) from exc
    return str(latest.schema.schema_str)


def input_schemas(spec_input: Input) -> AvroSchemas:
    """The schemas an Avro input's values decode with in this batch (lists the subject's versions once)."""
    serde = spec_input.value
    config = registry_config(serde.registry_conn_id)
    subject = serde.subject(spec_input.topic)
    reader = serde.reader_schema_text or _latest_reader(config, subject)
    ids = subject_ids(config, subject)
    return AvroSchemas(subject, reader, tuple((i, writer_schema(config, i)) for i in ids))


def encoding_schema(serde: Serde, topic: str, *, is_key: bool = False) -> tuple[int, str]:
    """``(schema id, schema)`` that JSON values of ``topic`` (keys with ``is_key``) are encoded with where no
    producer wrote them (``streamjoin replay``'s records file): the serde's reader schema when it is a version of
    the subject, else the subject's latest version (once per process).

    :raises SchemaRegistrationError: the subject has no versions (terminal: register the topic's schema)
    """
    subject = serde.subject(topic, is_key=is_key)
    return _encoding_schema(serde.registry_conn_id, subject, serde.reader_schema_text, topic, is_key)


@cache
def _encoding_schema(conn_id: str, subject: str, reader: str | None, topic: str, is_key: bool) -> tuple[int, str]:
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    config = registry_config(conn_id)
    if reader is not None:
        try:
            lookup = client(config).lookup_schema
            found = _call(config, f"lookup in {subject!r}", lookup, subject, Schema(reader, "AVRO"))
            return int(found.schema_id), reader
        except SchemaRegistryError as exc:
            if exc.http_status_code != 404:
                raise
    versions = subject_versions(config, subject)
    if reader is not None:  # a registry that matches the text only (Apicurio 2.1): the same JSON is the schema
        for _version, schema_id in versions:
            if json.loads(writer_schema(config, schema_id)) == json.loads(reader):
                return schema_id, reader
    if not versions:
        what = "keys" if is_key else "values"
        raise SchemaRegistrationError(subject, None, f"no versions at {config.url}: the JSON {what} of {topic!r} "
                                      "are encoded with the subject's latest schema; register it")  # fmt: skip
    return versions[-1][1], writer_schema(config, versions[-1][1])


def batch_schemas(spec: PipelineSpec) -> dict[str, AvroSchemas]:
    """Each Avro or Protobuf input's :class:`AvroSchemas` by topic (a Protobuf input's: its ``.proto`` texts,
    the latest at the job's start the reader); empty without them: no registry call."""
    registered = (Format.AVRO, Format.PROTOBUF, Format.JSON_SCHEMA)
    return {i.topic: input_schemas(i) for i in spec.inputs.values() if i.value.format in registered}


@cache
def register_output(sink: Sink, schema: str, schema_type: str = "AVRO", message: str | None = None) -> int:
    """Register an output's value schema (``schema_type``: ``AVRO``, ``JSON`` or ``PROTOBUF``; ``message``: a
    Protobuf one's full name) under its subject: its compatibility level set first, then the registry asked whether
    the schema is compatible with the latest version (:func:`output_incompatibility`), then registered; the
    schema's id. Registering a schema the subject has returns its id. Once per process and schema.

    :raises SchemaRegistrationError: the registry refuses it or finds it incompatible (terminal: names subject,
        latest version, the fields that differ and the registry's message)
    :raises SchemaRegistryUnavailableError: the registry does not answer (transient)
    """
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    config = registry_config(sink.registry_conn_id)
    registry, subject, level = client(config), sink.subject, sink.compatibility.value
    try:
        # the level first, so that it decides this registration; a registry may refuse a config for a subject
        # that does not exist yet (Apicurio: 404): then the first version needs no check, and the level follows
        new = not subject_ids(config, subject)
        if not new:
            _call(config, f"compatibility of {subject!r}", registry.set_compatibility, subject, level)
            refused = output_incompatibility(sink, schema, schema_type, message)
            if refused is not None:
                raise SchemaRegistrationError(subject, refused[0], f"{refused[1]}; {_what_to_do(sink)}; the "
                                              f"schema: {schema}")  # fmt: skip
        schema_id = int(_call(config, f"register under {subject!r}", registry.register_schema, subject,
                              Schema(schema, schema_type)))  # fmt: skip
        if new:
            _call(config, f"compatibility of {subject!r}", registry.set_compatibility, subject, level)
        return schema_id
    except SchemaRegistryError as exc:
        versions = subject_versions(config, subject)
        latest = versions[-1][0] if versions else None
        raise SchemaRegistrationError(subject, latest, f"{exc.error_message} (HTTP {exc.http_status_code}); "
                                      f"the schema: {schema if schema_type == 'PROTOBUF' else json.loads(schema)}"
                                      ) from exc  # fmt: skip


def _what_to_do(sink: Sink) -> str:
    return (f"a person must act: keep the output's fields and their types, or set the output's compatibility "
            f"(now {sink.compatibility.value}), or write to a new topic")  # fmt: skip


def output_incompatibility(
    sink: Sink, schema: str, schema_type: str, message: str | None = None
) -> tuple[int, str] | None:
    """None when ``sink``'s subject has no versions (nothing to be compatible with) or the registry finds
    ``schema`` compatible with its latest version under the subject's level (``POST
    /compatibility/subjects/{subject}/versions/latest``); else ``(latest version, why)``: the fields that differ
    from it by name and type, or the registry's own failure when its check fails with HTTP 500 the same way twice
    while it answers (Apicurio 2.1.5 answers HTTP 500, a NullPointerException, to a Protobuf version that drops a
    field: no restart helps).

    :raises SchemaRegistryUnavailableError: the registry does not answer, or fails the check once (transient)
    """
    from confluent_kafka.schema_registry import Schema

    config = registry_config(sink.registry_conn_id)
    subject = sink.subject
    versions = subject_versions(config, subject)
    if not versions:
        return None
    version, latest_id = versions[-1]
    verdict = _compatible(config, subject, Schema(schema, schema_type))
    if verdict is True:
        return None
    changes = field_changes(schema_type, writer_schema(config, latest_id), schema, message)
    if verdict is False:
        return version, (f"the registry finds the derived {_LABELS[schema_type]} schema incompatible with it "
                         f"under its compatibility level: {changes}")  # fmt: skip
    return version, (f"the registry fails checking the derived {_LABELS[schema_type]} schema against it, twice the "
                     f"same way ({verdict}): a restart does not help; {changes}")  # fmt: skip


_LABELS = {"AVRO": "Avro", "JSON": "JSON Schema", "PROTOBUF": "Protobuf"}


def _compatible(config: RegistryConfig, subject: str, schema: Any) -> bool | str:
    """The registry's compatibility verdict on ``schema`` against ``subject``'s latest version; a string: the
    registry's message when its check failed with HTTP 500 twice alike while the registry answers a listing of the
    subject (a bug of the registry's checker, not an outage: 502-504 and differing failures stay transient)."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    check = client(config).test_compatibility
    what = f"compatibility check in {subject!r}"
    failures = []
    for _ in range(2):
        try:
            return bool(_call(config, what, check, subject, schema))
        except SchemaRegistryUnavailableError as exc:
            cause = exc.__cause__
            if not isinstance(cause, SchemaRegistryError) or cause.http_status_code != 500:
                raise  # no answer, or a gateway's or an unavailable registry's status: an outage
            failures.append(f"HTTP 500: {cause.error_message}")
    if failures[0] != failures[1]:
        raise SchemaRegistryUnavailableError(config.url, f"{what}: {failures[-1]}")
    subject_versions(config, subject)  # the registry answers (else: transient, raised here)
    return failures[0]


def field_changes(schema_type: str, before: str, after: str, message: str | None = None) -> str:
    """The fields of ``after`` that differ from ``before`` by name and type (``field 'clicks': long -> string``,
    ``field 'page' removed``, ``field 'n' added``); the top-level value when it is no record, object or message."""
    old, new = _fields(schema_type, before, message), _fields(schema_type, after, message)
    changes = [f"field {name!r}: {old[name]} -> {new[name]}" for name in new if name in old and old[name] != new[name]]
    changes += [f"field {name!r} removed" for name in old if name not in new]
    changes += [f"field {name!r} added ({new[name]})" for name in new if name not in old]
    return "; ".join(changes) or "no field differs by name and type"


def _fields(schema_type: str, text: str, message: str | None) -> dict[str, str]:
    """``{field: type}`` of a schema's record, object or message (``{"<value>": type}`` for a primitive)."""
    if schema_type == "PROTOBUF":
        from streamjoin.kafka import protobuf

        fds = protobuf.descriptor_set(text, "schema")
        name = message or protobuf.main_message(fds)
        try:
            return dict(protobuf.message_fields(fds, name)) if name else {}
        except KeyError:
            return {}
    schema = json.loads(text)
    if schema_type == "AVRO" and isinstance(schema, dict) and schema.get("type") == "record":
        return {f["name"]: json.dumps(f["type"]) for f in schema["fields"]}
    if schema_type == "JSON" and isinstance(schema, dict) and "properties" in schema:
        return {name: json.dumps(prop.get("type", prop)) for name, prop in schema["properties"].items()}
    if isinstance(schema, dict):
        schema = schema.get("type", schema)
    return {"<value>": json.dumps(schema)}


@dataclass(frozen=True)
class SubjectProblem:
    """What ``streamjoin validate --registry`` found for a subject: the spec's field, the subject, the version
    (None: the subject itself) and what is wrong (with the Avro field where one is at fault)."""

    path: str
    subject: str
    version: int | None
    problem: str

    def __str__(self) -> str:
        at = f"version {self.version} of subject {self.subject!r}" if self.version else f"subject {self.subject!r}"
        return f"{self.path}: {at}: {self.problem}"


def subject_problems(spec: PipelineSpec) -> list[SubjectProblem]:
    """Each Avro input's subject has versions, and its reader schema (the spec's, else the latest) can read
    every one of them (Avro's schema resolution: a field the reader has and the writer lacks needs a default,
    a type must promote); a Protobuf or JSON Schema input's as the job reads it; a registry key's subject
    (Avro, Protobuf, JSON Schema) has versions. None without them. Asks the registry of each serde's connection."""
    import avro.compatibility
    import avro.schema

    problems: list[SubjectProblem] = []
    checker = avro.compatibility.ReaderWriterCompatibilityChecker()
    for name, spec_input in spec.inputs.items():
        key = spec_input.key
        if key.format.in_registry:  # not decoded, but a producer of the wire format registered its schema
            config = registry_config(key.registry_conn_id)
            subject = key.subject(spec_input.topic, is_key=True)
            if not subject_versions(config, subject):
                problems.append(_no_versions(f"inputs.{name}.key", config, subject))
        serde, path = spec_input.value, f"inputs.{name}.value"
        if serde.format is Format.PROTOBUF:
            problems += _protobuf_problems(path, serde, spec_input.topic)
            continue
        if serde.format is Format.JSON_SCHEMA:
            problems += _json_schema_problems(path, serde, spec_input.topic)
            continue
        if serde.format is not Format.AVRO:
            continue
        config = registry_config(serde.registry_conn_id)
        subject = serde.subject(spec_input.topic)
        versions = subject_versions(config, subject)
        if not versions:
            problems.append(_no_versions(path, config, subject))
            continue
        reader_text = serde.reader_schema_text or writer_schema(config, versions[-1][1])
        reader = avro.schema.parse(reader_text)
        for version, schema_id in versions:
            result = checker.get_compatibility(reader, avro.schema.parse(writer_schema(config, schema_id)))
            if result.compatibility is avro.compatibility.SchemaCompatibilityType.compatible:
                continue
            kinds = ", ".join(sorted({kind.value for kind in result.incompatibilities}))
            fields = ", ".join(sorted(map(str, result.messages)))
            problems.append(SubjectProblem(path, subject, version, f"the reader schema cannot read it: field "
                                           f"{fields} ({kinds} at {', '.join(sorted(result.locations))})"))  # fmt: skip
    return problems


def registry_outputs(spec: PipelineSpec) -> list[tuple[str, Sink]]:
    """``(spec path, sink)`` of each Kafka output in a registry format: the join's, a chain stage's, the
    aggregate's."""
    stages = [(f"{spec.stage_path(i)}.output", s.output) for i, s in enumerate(spec.earlier_joins) if s.output]
    wanted = [("output", spec.output), *stages]
    if spec.aggregate is not None:
        wanted.append(("aggregate.output", spec.aggregate.output))
    return [(path, sink) for path, sink in wanted if sink.topic and sink.value_format.in_registry]


def _protobuf_problems(path: str, serde: Serde, topic: str) -> list[SubjectProblem]:
    """A Protobuf input's subject has versions, and each compiles and holds the message the job reads
    (``record_name``, else the latest version's first message): a version without it has its records
    dead-lettered. Field changes between versions are not checked."""
    from streamjoin.core.errors import SpecError
    from streamjoin.kafka import protobuf

    config = registry_config(serde.registry_conn_id)
    subject = serde.subject(topic)
    versions = subject_versions(config, subject)
    if not versions:
        return [_no_versions(path, config, subject)]
    problems, message = [], serde.full_record_name
    for version, schema_id in reversed(versions):  # the latest first: its first message is the default
        try:
            fds = protobuf.descriptor_set(writer_schema(config, schema_id), subject)
        except SpecError as exc:
            problems.append(SubjectProblem(path, subject, version, f"protoc cannot compile it: {exc.expected}"))
            continue
        message = message or protobuf.main_message(fds)
        if message is None or protobuf.message_indexes(fds, message) is None:
            problem = f"it has no message {message!r}: its records would be dead letters; set record_name"
            problems.append(SubjectProblem(path, subject, version, problem))
    return sorted(problems, key=lambda p: p.version or 0)


def _no_versions(path: str, config: RegistryConfig, subject: str) -> SubjectProblem:
    """An input's subject has no versions in the registry."""
    return SubjectProblem(path, subject, None, f"no versions at {config.url}: register the topic's schema, or check "
                          "subject_name_strategy and record_name")  # fmt: skip


def _json_schema_problems(path: str, serde: Serde, topic: str) -> list[SubjectProblem]:
    """A JSON Schema input's subject has versions, and (without the spec's ``schema``) its latest maps to
    Spark's types: the job reads with it. Field changes between versions are not checked."""
    from streamjoin.core.errors import SpecError
    from streamjoin.spark.json_schema import json_schema_spark_type

    config = registry_config(serde.registry_conn_id)
    subject = serde.subject(topic)
    versions = subject_versions(config, subject)
    if not versions:
        return [_no_versions(path, config, subject)]
    if serde.fields:
        return []
    try:
        json_schema_spark_type(json.loads(writer_schema(config, versions[-1][1])), subject)
    except SpecError as exc:
        return [SubjectProblem(path, subject, versions[-1][0], f"{exc.path}: {exc.value}: not supported; give the "
                               "input a 'schema' (field -> type)")]  # fmt: skip
    return []


def key_subject_warnings(spec: PipelineSpec) -> list[SubjectProblem]:
    """A key join of two registry keys (Avro, Protobuf, JSON Schema) matches serialized bytes, the schema id among
    them: a warning when the two key subjects' latest schema ids differ (equal keys written under them never
    match), or one has none."""
    from streamjoin.core.shapes import traits

    left, right = spec.left, spec.right
    if not traits(spec.join.shape).copartitioned or not left.key.format.in_registry:
        return []
    if right.key.format is not left.key.format:
        return []
    keys = f"{left.key.format.label} keys"
    latest = {}
    for side, spec_input in ((spec.join.left, left), (spec.join.right, right)):
        config = registry_config(spec_input.key.registry_conn_id)
        subject = spec_input.key.subject(spec_input.topic, is_key=True)
        versions = subject_versions(config, subject)
        latest[side] = (subject, versions[-1] if versions else None)
    (lsub, lver), (rsub, rver) = latest[spec.join.left], latest[spec.join.right]
    path = f"inputs.{spec.join.right}.key"
    if lver is None or rver is None:
        missing = lsub if lver is None else rsub
        return [SubjectProblem(path, missing, None, "no versions: cannot check that both sides' keys are written "
                               f"with one schema id ({keys} join by their serialized bytes)")]  # fmt: skip
    if lver[1] != rver[1]:
        return [SubjectProblem(path, rsub, rver[0], f"its schema id {rver[1]} differs from {lsub!r}'s (version "
                               f"{lver[0]}, id {lver[1]}): {keys} join by their serialized bytes, which hold the "
                               "id, so equal keys never match; write both topics' keys with one schema")]  # fmt: skip
    return []
