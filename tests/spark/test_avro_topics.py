"""Avro topics through a real schema registry (the local Apicurio, Confluent API), a real broker and the real
streaming job in this process's Spark session: seed 000's join (clicks left-joined with regions, summed per
region) with Avro clicks and regions and an Avro output, checked per key against the reference engine. The
keys are Avro records too (one key schema, so one schema id, on both topics): the join matches their bytes.

One job run serves the module's tests: the clicks topic holds records of two schema versions (v2 adds a field
with a default, registered after v1's records were written), one record whose schema id is not the subject's
and one whose payload does not decode; the job's batches are cut small so several list the subject's versions.
"""

from __future__ import annotations

import io
import json
import os
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from streamjoin.core.avro import decode_wire, encode_wire, wire_header
from streamjoin.core.codec import decode
from streamjoin.core.records import Emitted, Record
from streamjoin.core.reference import ReferenceEngine
from streamjoin.core.spec import Format, PipelineSpec, parse_spec
from streamjoin.core.topic_plan import plan_topics
from streamjoin.kafka.admin import ensure_topics
from streamjoin.kafka.clients import consume_all, produce_records
from streamjoin.localdev.schema_registry import SchemaRegistry

#: beside the test brokers' and test_schema_registry's ports (+30, +31)
PORT = int(os.environ.get("STREAMJOIN_TEST_KAFKA_PORT", "19092")) + 33
UNKNOWN_ID = 987_654

CLICK_V1 = {"type": "record", "name": "Click", "namespace": "demo",
            "fields": [{"name": "clicks", "type": "long"}]}  # fmt: skip
CLICK_V2 = {**CLICK_V1, "fields": [*CLICK_V1["fields"], {"name": "page", "type": "string", "default": "home"}]}
REGION = {"type": "record", "name": "Region", "namespace": "demo", "fields": [{"name": "region", "type": "string"}]}
USER_KEY = {"type": "record", "name": "UserKey", "namespace": "demo", "fields": [{"name": "user", "type": "string"}]}
#: the JSON Schema run's keys, on both topics
JSON_KEY = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "UserKey", "type": "object",
            "properties": {"user": {"type": "string"}}}  # fmt: skip


def _spec(suffix: str) -> PipelineSpec:
    """Seed 000's shape (include/pipelines/clicks_per_region.yaml) on Avro values; the select also carries
    v2's field, which v1's records get as its default."""
    return parse_spec({
        "name": "avro_clicks",
        "kafka": {"partitions": 1},
        "inputs": {
            "clicks": {"topic": f"avro-clicks{suffix}", "role": "stream", "key": {"format": "avro"},
                       "value": {"format": "avro"}},
            "regions": {"topic": f"avro-regions{suffix}", "role": "table", "key": {"format": "avro"},
                        "value": {"format": "avro"}},
        },
        "join": {"shape": "stream-table", "kind": "left", "left": "clicks", "right": "regions",
                 "joiner": {"select": {"region": "coalesce(right.region, 'UNKNOWN')", "clicks": "left.clicks",
                                       "page": "left.page"}}},
        "output": {"topic": f"avro-enriched{suffix}", "value_format": "avro"},
        "aggregate": {"group_by": {"expr": "value.region"}, "reduce": "sum", "value": {"expr": "value.clicks"},
                      "output": {"topic": f"avro-per-region{suffix}", "value_format": "long"}},
        "dead_letter_topic": f"avro-dlq{suffix}",
        "trigger": {"max_offsets_per_trigger": 12},
    }, "avro test")  # fmt: skip


def _reference_functions() -> dict[str, Any]:
    return {
        "joiner": lambda key, left, right: {
            "region": right["region"] if right else "UNKNOWN",
            "clicks": left["clicks"],
            "page": left["page"],
        },
        "group_by": lambda key, value: value["region"],
        "value": lambda key, value: value["clicks"],
    }


@dataclass
class Run:
    spec: PipelineSpec
    registry: SchemaRegistry
    bootstrap: str
    base: int
    #: what was produced: (topic, key bytes, value bytes, ts) in order
    produced: list[tuple[str, bytes, bytes | None, int]]
    ids: dict[str, int]

    def writer(self, schema_id: int) -> str:
        from streamjoin.kafka.schema_registry import registry_config, writer_schema

        return writer_schema(registry_config("schema_registry_default"), schema_id)


@pytest.fixture(scope="module")
def avro_run(spark, kafka_broker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """The registry (started here, stopped after the module), the topics, the records, and one available-now
    run of the streaming job over them."""
    from confluent_kafka.schema_registry import Schema

    from streamjoin.kafka import schema_registry
    from streamjoin.spark.job import JobSettings, run_stream

    registry = SchemaRegistry(tmp_path_factory.mktemp("registry"), PORT)
    registry.start(timeout=90)
    conn = {"conn_type": "http", "host": "127.0.0.1", "port": PORT, "schema": "apis/ccompat/v6"}
    before = os.environ.get("AIRFLOW_CONN_SCHEMA_REGISTRY_DEFAULT")
    os.environ["AIRFLOW_CONN_SCHEMA_REGISTRY_DEFAULT"] = json.dumps(conn)
    schema_registry.registry_config.cache_clear()
    try:
        suffix = "-" + uuid.uuid4().hex[:8]
        spec = _spec(suffix)
        bootstrap = kafka_broker.bootstrap
        ensure_topics({"bootstrap.servers": bootstrap}, plan_topics(spec))
        client = schema_registry.client(schema_registry.registry_config("schema_registry_default"))
        clicks, regions = spec.left.topic, spec.right.topic
        ids = {"region": client.register_schema(f"{regions}-value", Schema(json.dumps(REGION), "AVRO")),
               "v1": client.register_schema(f"{clicks}-value", Schema(json.dumps(CLICK_V1), "AVRO")),
               "key": client.register_schema(f"{clicks}-key", Schema(json.dumps(USER_KEY), "AVRO"))}  # fmt: skip
        assert client.register_schema(f"{regions}-key", Schema(json.dumps(USER_KEY), "AVRO")) == ids["key"]

        def key(user: str) -> bytes:
            return encode_wire({"user": user}, ids["key"], json.dumps(USER_KEY)) or b""

        base = int(time.time() // 3600 * 3600 * 1000) - 3_600_000  # an hour's start: the records lie in one day
        users = ["ann", "bob", "cid", "dan", "eve"]
        produced: list[tuple[str, bytes, bytes | None, int]] = []
        ts = base
        for i, user in enumerate(users[:4]):
            ts += 10
            produced.append((regions, key(user), encode_wire({"region": ["europe", "asia"][i % 2]}, ids["region"],
                                                        json.dumps(REGION)), ts))  # fmt: skip
        for i in range(14):  # v1 clicks: eve has no region (UNKNOWN)
            ts += 10
            value = encode_wire({"clicks": i + 1}, ids["v1"], json.dumps(CLICK_V1))
            produced.append((clicks, key(users[i % 5]), value, ts))
        # mid-stream: the producer moves to v2 (a field with a default); v1 records keep coming too
        ids["v2"] = client.register_schema(f"{clicks}-value", Schema(json.dumps(CLICK_V2), "AVRO"))
        ts += 10
        americas = encode_wire({"region": "americas"}, ids["region"], json.dumps(REGION))
        produced.append((regions, key("bob"), americas, ts))
        ts += 10
        produced.append((regions, key("cid"), None, ts))  # cid's region deleted
        for i in range(14, 30):
            ts += 10
            if i % 3:
                value = encode_wire({"clicks": i + 1, "page": f"p{i}"}, ids["v2"], json.dumps(CLICK_V2))
            else:
                value = encode_wire({"clicks": i + 1}, ids["v1"], json.dumps(CLICK_V1))
            produced.append((clicks, key(users[i % 5]), value, ts))
        ts += 10
        unknown = wire_header(UNKNOWN_ID) + (encode_wire({"clicks": 5}, ids["v1"], json.dumps(CLICK_V1)) or b"")[5:]
        produced.append((clicks, key("ann"), unknown, ts))
        ts += 10
        produced.append((clicks, key("bob"), wire_header(ids["v2"]) + b"\xff\xff", ts))  # a truncated varint
        produce_records(bootstrap, [(t, k, v, stamp, []) for t, k, v, stamp in produced])
        settings = JobSettings(bootstrap=bootstrap, checkpoint_dir=str(tmp_path_factory.mktemp("ck")),
                               available_now=True, home=str(tmp_path_factory.mktemp("home")))  # fmt: skip
        run_stream(spark, spec, settings)
        yield Run(spec, registry, bootstrap, base, produced, ids)
    finally:
        if before is None:
            os.environ.pop("AIRFLOW_CONN_SCHEMA_REGISTRY_DEFAULT", None)
        else:
            os.environ["AIRFLOW_CONN_SCHEMA_REGISTRY_DEFAULT"] = before
        schema_registry.registry_config.cache_clear()
        registry.stop()


def _per_key(rows: list[tuple[str, Any, Any, int]]) -> dict[tuple[str, Any], list[tuple[Any, int]]]:
    grouped: dict[tuple[str, Any], list[tuple[Any, int]]] = defaultdict(list)
    for topic, key, value, ts in rows:
        grouped[(topic, key)].append((value, ts))
    return dict(grouped)


def _reference(run: Run, spec: PipelineSpec | None = None, functions: dict[str, Any] | None = None) -> list[Emitted]:
    """The reference engine over the records that decode (read as the job reads them: v2 is the reader), for
    ``spec`` (default: the run's) over the run's topics."""
    records = []
    for offset, (topic, key, data, ts) in enumerate(run.produced):
        if data is not None and int.from_bytes(data[1:5], "big") == UNKNOWN_ID:
            continue
        try:
            value = decode_wire(data, run.writer, json.dumps(CLICK_V2) if topic == run.spec.left.topic else None)
        except Exception:  # the truncated payload: fastavro cannot read it either
            continue
        records.append(Record(topic, key.hex().upper(), value, ts - run.base, 0, offset))
    return ReferenceEngine(spec or run.spec, functions or _reference_functions()).replay_batch(records)


@pytest.mark.spark
@pytest.mark.kafka
def test_seed_join_on_avro_topics_matches_the_reference_per_key(avro_run: Run) -> None:
    run, spec = avro_run, avro_run.spec
    assert spec.output.topic is not None and spec.aggregate is not None and spec.aggregate.output.topic is not None
    got: list[tuple[str, Any, Any, int]] = []
    ids = set()
    for record in consume_all(run.bootstrap, spec.output.topic, timeout=30):
        ids.add(int.from_bytes(record.value[1:5], "big"))
        value = decode_wire(record.value, run.writer)
        key = record.key.hex().upper()  # the join's key: the Avro key's bytes
        got.append((spec.output.topic, key, value, int(dict(record.headers)["ts"]) - run.base))
    totals = spec.aggregate.output.topic
    for record in consume_all(run.bootstrap, totals, timeout=30):
        value = decode(record.value, Format.LONG)
        got.append((totals, record.key.decode(), value, int(dict(record.headers)["ts"]) - run.base))
    expected = [(e.topic, e.key, e.value, e.ts) for e in _reference(run) if e.topic != spec.dead_letter_topic]
    assert len([e for e in expected if e[0] == spec.output.topic]) == 30  # every click that decodes
    assert _per_key(got) == _per_key(expected)
    # the output's values carry one schema id: the record derived from the select, registered under
    # <topic>-value, named after the topic
    (output_id,) = ids
    schema = json.loads(run.writer(output_id))
    assert schema["name"] == spec.output.topic.replace("-", "_") and schema["namespace"] == "streamjoin"
    assert [f["name"] for f in schema["fields"]] == ["region", "clicks", "page"]
    from streamjoin.kafka.schema_registry import registry_config, subject_ids

    assert subject_ids(registry_config("schema_registry_default"), f"{spec.output.topic}-value") == [output_id]


@pytest.mark.spark
@pytest.mark.kafka
def test_records_of_both_schema_versions_are_read_without_loss(avro_run: Run) -> None:
    """v1's clicks written before and after v2 was registered get v2's default; v2's keep their page."""
    run, spec = avro_run, avro_run.spec
    assert spec.output.topic is not None
    pages = defaultdict(list)
    for record in consume_all(run.bootstrap, spec.output.topic, timeout=30):
        value = decode_wire(record.value, run.writer)
        pages[value["page"] == "home"].append(value["clicks"])
    v1_clicks = [i + 1 for i in range(30) if i < 14 or i % 3 == 0]
    assert sorted(pages[True]) == v1_clicks
    assert sorted(pages[False]) == sorted(set(range(1, 31)) - set(v1_clicks))


@pytest.mark.spark
@pytest.mark.kafka
def test_unknown_schema_id_and_undecodable_payload_are_dead_letters_with_reasons(avro_run: Run) -> None:
    run, spec = avro_run, avro_run.spec
    dead = consume_all(run.bootstrap, spec.dead_letter_topic, timeout=30)
    reasons = {r.value: dict(r.headers)["reason"].decode() for r in dead}
    unknown, truncated = run.produced[-2][2], run.produced[-1][2]
    assert set(reasons) == {unknown, truncated}  # the original bytes, nothing else
    subject = f"{spec.left.topic}-value"
    ids = [run.ids["v1"], run.ids["v2"]]
    assert reasons[unknown] == (
        f"undecodable-value: schema id {UNKNOWN_ID} is not a version of subject {subject!r} (its ids: {ids})"
    )
    assert reasons[truncated] == (
        f"undecodable-value: the bytes do not decode as Avro with schema id {run.ids['v2']} of subject "
        f"{subject!r} (malformed or truncated payload)"
    )
    for record in dead:
        assert dict(record.headers)["source_topic"].decode() == spec.left.topic
    assert sorted(r.key for r in dead) == sorted([run.produced[-2][1], run.produced[-1][1]])  # the keys' bytes


@pytest.mark.spark
@pytest.mark.kafka
def test_an_output_schema_the_registry_refuses_is_a_terminal_error_naming_subject_and_version(avro_run: Run) -> None:
    """The output's subject holds the job's record; a select whose clicks became text is not BACKWARD
    compatible with it (the registry's check, as at a redeploy's first batch)."""
    from pyspark.sql import types as T

    from streamjoin.core.errors import SchemaRegistrationError
    from streamjoin.spark.serde import registered_output

    sink = avro_run.spec.output
    changed = T.StructType([T.StructField("region", T.StringType(), False), T.StructField("clicks", T.StringType())])
    with pytest.raises(SchemaRegistrationError) as caught:
        registered_output(sink, changed)
    error = caught.value
    assert (error.subject, error.version, error.transient) == (f"{sink.topic}-value", 1, False)
    # the registry's compatibility check (before registering) says no; the error names the field that changed
    assert "incompatible with it under its compatibility level: field 'clicks': " in error.message
    assert "a person must act" in error.message and '"name":"clicks"' in error.message  # the derived schema too


@pytest.mark.spark
@pytest.mark.kafka
def test_validate_and_provisioning_check_the_subjects(
    avro_run: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml
    from confluent_kafka.schema_registry import Schema

    from streamjoin.cli import main
    from streamjoin.kafka import schema_registry

    data = avro_run.spec.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)
    paths = []
    needs_user = {**CLICK_V1, "fields": [*CLICK_V1["fields"], {"name": "user", "type": "string"}]}
    # the regions' keys under another subject, whose schema (so its id) differs from the clicks' keys'
    other_key = {**USER_KEY, "name": "OtherKey"}
    client = schema_registry.client(schema_registry.registry_config("schema_registry_default"))
    other_id = client.register_schema("demo.OtherKey", Schema(json.dumps(other_key), "AVRO"))
    by_record = {"format": "avro", "subject_name_strategy": "record_name", "record_name": "demo.OtherKey"}
    for name, change in [
        ("ok", {}),
        ("reader", {"clicks": {"format": "avro", "reader_schema": needs_user}}),
        ("subject", {"regions": {"format": "avro", "subject_name_strategy": "record_name", "record_name": "demo.No"}}),
        ("keys", {"regions": by_record}),
    ]:
        spec = json.loads(json.dumps(data))
        for input_name, value in change.items():
            spec["inputs"][input_name]["key" if name == "keys" else "value"] = value
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(spec))
        paths.append(str(path))
    assert main(["validate", "--registry", *paths]) == 1
    lines = _verdicts(capsys.readouterr().out)
    subject = f"{avro_run.spec.left.topic}-value"
    assert lines == [
        f"ok: {paths[0]}",
        *(f"error: {paths[1]}: inputs.clicks.value: version {v} of subject {subject!r}: the reader schema cannot "
          "read it: field user (reader_field_missing_default_value at /fields/1)" for v in (1, 2)),
        f"error: {paths[2]}: inputs.regions.value: subject 'demo.No': no versions at {avro_run.registry.url}: "
        "register the topic's schema, or check subject_name_strategy and record_name",
        f"warning: {paths[3]}: inputs.regions.key: version 1 of subject 'demo.OtherKey': its schema id {other_id} "
        f"differs from '{avro_run.spec.left.topic}-key''s (version 1, id {avro_run.ids['key']}): Avro keys join by "
        "their serialized bytes, which hold the id, so equal keys never match; write both topics' keys with one "
        "schema",
        f"ok: {paths[3]}",
        "4 specs, 2 invalid",
    ]  # fmt: skip
    # provisioning warns too (the topics exist: it only checks them)
    from streamjoin.airflow.operators.provision_topics import ProvisionTopicsOperator

    kafka_conn = {"conn_type": "streamjoin_kafka", "host": "127.0.0.1", "port": int(avro_run.bootstrap.split(":")[1])}
    monkeypatch.setenv("AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT", json.dumps(kafka_conn))
    report = ProvisionTopicsOperator(task_id="provision", spec_path=paths[3]).execute(context={})
    assert report["created"] == [] and report["registry_warnings"] == [lines[-3].split(": ", 2)[2]]
    assert ProvisionTopicsOperator(task_id="provision", spec_path=paths[0]).execute({})["registry_warnings"] == []


@pytest.mark.spark
@pytest.mark.kafka
def test_validate_checks_each_registry_outputs_derived_schema_against_its_subjects_latest_version(
    avro_run: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``streamjoin validate --registry`` derives each registry output's schema as the job does (its batch
    program's value type) and asks the registry about it: the run's own select is compatible with the version the
    job registered; a select whose clicks became text is not (named: subject, version, field); an Avro aggregate
    output (a "long") is fine on a subject without versions, and refused on one that holds a string."""
    import yaml

    from streamjoin.cli import main
    from streamjoin.kafka import schema_registry

    run = avro_run
    data = run.spec.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)
    client = schema_registry.client(schema_registry.registry_config("schema_registry_default"))
    from confluent_kafka.schema_registry import Schema

    taken = f"avro-totals-taken-{uuid.uuid4().hex[:8]}"
    client.register_schema(f"{taken}-value", Schema(json.dumps("string"), "AVRO"))
    client.set_compatibility(f"{taken}-value", "BACKWARD")
    paths = []
    for name in ("ok", "text clicks", "new totals", "taken totals"):
        spec = json.loads(json.dumps(data))
        if name == "text clicks":
            spec["join"]["joiner"]["select"]["clicks"] = "cast(left.clicks as string)"
        if name.endswith("totals"):
            topic = taken if name == "taken totals" else f"avro-totals-new-{uuid.uuid4().hex[:8]}"
            spec["aggregate"]["output"] = {"topic": topic, "value_format": "avro"}
        path = tmp_path / f"{name.replace(' ', '_')}.yaml"
        path.write_text(yaml.safe_dump(spec))
        paths.append(str(path))
    assert main(["validate", "--registry", *paths]) == 1
    subject = f"{run.spec.output.topic}-value"
    assert _verdicts(capsys.readouterr().out) == [
        f"ok: {paths[0]}",
        f"error: {paths[1]}: output.value_format: version 1 of subject {subject!r}: the registry finds the derived "
        "Avro schema incompatible with it under its compatibility level: field 'clicks': [\"null\", \"long\"] -> "
        "[\"null\", \"string\"]",
        f"ok: {paths[2]}",
        f"error: {paths[3]}: aggregate.output.value_format: version 1 of subject '{taken}-value': the registry finds "
        "the derived Avro schema incompatible with it under its compatibility level: field '<value>': \"string\" -> "
        "\"long\"",
        "4 specs, 2 invalid",
    ]  # fmt: skip


#: each registry format's aggregate: (reduce, value expression); its values are longs (a sum adds longs)
AGGREGATES = {"avro": ("sum", "value.clicks"), "json_schema": ("count", None), "protobuf": ("sum", "value.clicks")}


class _SerializedProtobuf(SchemaRegistryClient):
    """Confluent's client, but a Protobuf schema asked for in ``format=serialized`` (as ProtobufDeserializer asks)
    comes as Confluent's registry gives it: the base64 FileDescriptorProto. Apicurio 2.1.5 ignores ``format`` and
    answers the ``.proto`` text, which the Python deserializer cannot parse (it has no protoc)."""

    def __init__(self, url: str) -> None:
        super().__init__({"url": url})

    def get_schema(self, schema_id: int, subject_name: str | None = None, fmt: str | None = None,
                   reference_format: str | None = None) -> Schema:  # fmt: skip
        import base64

        from google.protobuf import descriptor_pb2

        from streamjoin.kafka import protobuf

        schema = super().get_schema(schema_id, subject_name, fmt)
        if fmt != "serialized" or schema.schema_type != "PROTOBUF" or schema.schema_str is None:
            return schema
        files = descriptor_pb2.FileDescriptorSet.FromString(protobuf.descriptor_set(schema.schema_str, "schema"))
        text = base64.b64encode(files.file[-1].SerializeToString()).decode()  # the schema's own file: the last
        return Schema(text, "PROTOBUF", schema.references)


@dataclass
class AggregateRun:
    spec: PipelineSpec
    fmt: str
    expected: list[tuple[str, Any, Any, int]]


@pytest.fixture(scope="module", params=sorted(AGGREGATES))
def aggregate_run(request: pytest.FixtureRequest, spark: Any, avro_run: Run,
                  tmp_path_factory: pytest.TempPathFactory) -> AggregateRun:  # fmt: skip
    """avro_run's topics through the job again, its aggregate's output in a registry format (Avro and Protobuf: the
    sum of clicks; JSON Schema: the count), the join's output left out."""
    from streamjoin.spark.job import JobSettings, run_stream

    fmt = request.param
    reduce, expr = AGGREGATES[fmt]
    suffix = "-" + uuid.uuid4().hex[:8]
    data = avro_run.spec.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)
    data["output"] = {}
    data["aggregate"] = {"group_by": {"expr": "value.region"}, "reduce": reduce,
                         **({"value": {"expr": expr}} if expr else {}),
                         "output": {"topic": f"agg-{fmt.replace('_', '-')}{suffix}", "value_format": fmt}}  # fmt: skip
    data["dead_letter_topic"] = f"agg-dlq{suffix}"
    spec = parse_spec(data, f"{fmt} aggregate test")
    ensure_topics({"bootstrap.servers": avro_run.bootstrap}, plan_topics(spec))
    settings = JobSettings(bootstrap=avro_run.bootstrap, checkpoint_dir=str(tmp_path_factory.mktemp("agg-ck")),
                           available_now=True, home=str(tmp_path_factory.mktemp("agg-home")))  # fmt: skip
    run_stream(spark, spec, settings)
    topic = spec.aggregate.output.topic  # type: ignore[union-attr]
    expected = [(e.topic, e.key, e.value, e.ts) for e in _reference(avro_run, spec) if e.topic == topic]
    return AggregateRun(spec, fmt, expected)


@pytest.mark.spark
@pytest.mark.kafka
def test_an_aggregate_output_in_a_registry_format_is_what_confluents_deserializers_read(
    avro_run: Run, aggregate_run: AggregateRun
) -> None:
    """Per key, the aggregate's updates read back by confluent-kafka's own deserializer of the format (as a
    consumer with Confluent's serdes reads them) are the reference engine's; the subject holds one schema, a
    primitive (Avro "long", JSON Schema "integer") or Protobuf's one-field message ``int64 value = 1``."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from streamjoin.kafka import protobuf, schema_registry

    run, sink = aggregate_run, aggregate_run.spec.aggregate.output  # type: ignore[union-attr]
    assert sink.topic is not None
    config = schema_registry.registry_config("schema_registry_default")
    client = schema_registry.client(config)
    ((_, schema_id),) = schema_registry.subject_versions(config, sink.subject)
    schema = avro_run.writer(schema_id)
    if run.fmt == "avro":
        assert json.loads(schema) == "long"
        deserialize: Any = AvroDeserializer(client)
    elif run.fmt == "json_schema":
        assert json.loads(schema)["type"] == "integer" and json.loads(schema)["title"] == sink.record_name
        deserialize = JSONDeserializer(None, schema_registry_client=client)
    else:
        fds = protobuf.descriptor_set(schema, sink.subject)
        assert protobuf.message_fields(fds, sink.record_name) == [("value", "int64")]
        message = protobuf._message_class(fds, sink.record_name)
        reader = ProtobufDeserializer(message, {"use.deprecated.format": False}, _SerializedProtobuf(config.url))
        deserialize = lambda data, ctx: reader(data, ctx).value  # noqa: E731
    context = SerializationContext(sink.topic, MessageField.VALUE)
    got = []
    for record in consume_all(avro_run.bootstrap, sink.topic, timeout=30):
        assert record.value[:5] == wire_header(schema_id)
        value = deserialize(record.value, context)
        assert isinstance(value, int)
        got.append((sink.topic, record.key.decode(), value, int(dict(record.headers)["ts"]) - avro_run.base))
    assert len(run.expected) > 4 and _per_key(got) == _per_key(run.expected)


def _verdicts(out: str) -> list[str]:
    """``streamjoin validate``'s lines but the join stages it describes under a valid spec (indented)."""
    return [line for line in out.splitlines() if not line.startswith("  ")]


def _as_json(run: Run) -> list[dict[str, Any]]:
    """The produced records that decode, as a replay records file writes them: keys and values as their own
    writer schema's JSON (v1 clicks without ``page``), ts from the run's base."""
    records = []
    for topic, key, data, ts in run.produced:
        if data is not None and int.from_bytes(data[1:5], "big") == UNKNOWN_ID:
            continue
        try:
            value = decode_wire(data, run.writer)
        except Exception:  # the truncated payload
            continue
        records.append({"topic": topic, "key": decode_wire(key, run.writer), "value": value, "ts": ts - run.base})
    return records


@pytest.mark.spark
@pytest.mark.kafka
def test_replay_encodes_a_json_records_file_with_the_subjects_schemas(spark, avro_run: Run) -> None:
    """``streamjoin replay`` on the Avro spec: the file's JSON keys and values are encoded with their subjects'
    latest schemas (v1's clicks get v2's default page) and decoded by the job's path; the output per key is the
    reference engine's, with the Avro keys back as JSON."""
    from streamjoin.spark.replay import replay

    run, spec = avro_run, avro_run.spec
    records = _as_json(run)
    assert len(records) == 36 and any("page" not in r["value"] for r in records if r["topic"] == spec.left.topic)
    keyless = {"topic": spec.right.topic, "key": None, "value": {"region": "nowhere"}, "ts": records[-1]["ts"]}
    emitted = replay(spark, spec, [*records, keyless], batch=True)
    # a region without a key is a dead letter, its value printed back as JSON
    (letter,) = [r for r in emitted if r["topic"] == spec.dead_letter_topic]
    assert (letter["key"], letter["value"], letter["headers"]["reason"]) == (None, keyless["value"], "null-key")
    got = [(r["topic"], r["key"], r["value"], r["ts"]) for r in emitted if r["topic"] != spec.dead_letter_topic]
    expected = []
    for e in _reference(run):
        assert e.topic != spec.dead_letter_topic
        key = decode_wire(bytes.fromhex(e.key), run.writer) if e.topic == spec.output.topic else e.key
        expected.append((e.topic, key, e.value, e.ts))
    assert len([g for g in got if g[0] == spec.output.topic]) == 30
    assert _per_key([(t, json.dumps(k), v, ts) for t, k, v, ts in got]) == _per_key(
        [(t, json.dumps(k), v, ts) for t, k, v, ts in expected]
    )
    # the schema a file's values are encoded with: a reader schema the subject holds (v1), else the latest (v2)
    from streamjoin.core.spec import Serde
    from streamjoin.kafka.schema_registry import encoding_schema

    unregistered = {**CLICK_V1, "fields": [*CLICK_V1["fields"], {"name": "n", "type": "long", "default": 0}]}
    for reader, schema_id in ((CLICK_V1, run.ids["v1"]), (unregistered, run.ids["v2"])):
        serde = Serde.model_validate({"format": "avro", "reader_schema": reader})
        assert encoding_schema(serde, spec.left.topic)[0] == schema_id
    bad = [{**records[-1], "value": {"clicks": "many"}}]
    with pytest.raises(ValueError, match=f"line 1: value .* of topic '{spec.left.topic}' does not fit the Avro schema "
                       f"of subject '{spec.left.topic}-value'"):  # fmt: skip
        replay(spark, spec, bad, batch=True)


@pytest.mark.spark
@pytest.mark.kafka
def test_reprocessing_a_day_of_avro_topics_decodes_as_the_stream(spark, avro_run: Run, tmp_path: Path) -> None:
    """Reprocessing reads the Avro topics back from Kafka with the job's decoding: the day's enriched files hold
    the reference's results per key, and the two undecodable clicks are its dead letters."""
    from datetime import UTC, datetime

    from streamjoin.core.backfill import plan_day
    from streamjoin.core.spec import FileSink
    from streamjoin.spark.reprocess import reprocess_day

    run = avro_run
    output = run.spec.output.model_copy(update={"files": FileSink(path=str(tmp_path / "enriched"))})
    spec = run.spec.model_copy(update={"output": output})
    day = datetime.fromtimestamp(run.base / 1000, UTC).date()
    result = reprocess_day(spark, spec, plan_day(spec, day), run.bootstrap, home=tmp_path)
    assert (result.input_rows, result.dead_letters) == (len(run.produced), 2)
    rows = spark.read.parquet(result.paths["enriched"]).select("key", "value", "ts").collect()
    topic = spec.output.topic or ""
    got = [(topic, bytes(r["key"]), r["value"].asDict(), r["ts"] - run.base) for r in rows]
    expected = [(e.topic, bytes.fromhex(e.key), e.value, e.ts) for e in _reference(run) if e.topic == topic]

    def ordered(rows: list[tuple[str, Any, Any, int]]) -> dict[tuple[str, Any], list[tuple[Any, int]]]:
        return {k: sorted(v, key=lambda r: (r[1], json.dumps(r[0]))) for k, v in _per_key(rows).items()}

    assert len(got) == 30 and ordered(got) == ordered(expected)  # files keep no order: by ts per key


#: the Protobuf clicks: v1, then v2 (a field added) registered mid-stream; the job reads with v2 (the latest)
CLICK_PROTO_V1 = 'syntax = "proto3";\npackage demo;\n\nmessage Click {\n  int64 clicks = 1;\n  string page = 2;\n}\n'
CLICK_PROTO_V2 = CLICK_PROTO_V1.replace("string page = 2;\n", "string page = 2;\n  string referrer = 3;\n")
#: the Protobuf run's keys, on both topics (one schema, so one id)
KEY_PROTO = 'syntax = "proto3";\npackage demo;\n\nmessage UserKey {\n  string user = 1;\n}\n'


@dataclass
class ProtobufRun:
    spec: PipelineSpec
    #: (topic, key bytes, value bytes, ts) in the order the reference reads them
    produced: list[tuple[str, bytes, bytes | None, int]]
    ids: dict[str, int]
    #: a click sent with a key that is not the wire format (not in ``produced``)
    bad_key: tuple[bytes, bytes] | None = None

    def key_json(self, key: bytes, writer: Any) -> Any:
        """A key of the run as JSON: Avro's, (the JSON Schema run's) the text after the header, or (the Protobuf
        run's) the UserKey message."""
        if self.spec.left.key.format is Format.JSON_SCHEMA:
            return json.loads(key[5:])
        if self.spec.left.key.format is not Format.PROTOBUF:
            return decode_wire(key, writer)
        from streamjoin.kafka import protobuf

        return protobuf.decode_message(protobuf.descriptor_set(KEY_PROTO, "test key"), "demo.UserKey", key[6:])


@pytest.fixture(scope="module")
def protobuf_run(spark, avro_run: Run, tmp_path_factory: pytest.TempPathFactory) -> ProtobufRun:
    """Protobuf clicks in Confluent's wire format (magic byte, id, the message indexes as Confluent's
    serializer writes them, the payload) at avro_run's clicks' times, joined with avro_run's Avro regions (on a
    topic of its own) into a Protobuf output; the keys on both topics are Protobuf (UserKey) of avro_run's users.
    One record of an unknown id, one truncated payload, one whose key is not the wire format."""
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry._sync.protobuf import ProtobufSerializer

    from streamjoin.kafka import protobuf, schema_registry
    from streamjoin.spark.job import JobSettings, run_stream

    suffix = "-" + uuid.uuid4().hex[:8]
    data = avro_run.spec.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)
    clicks, regions = f"pb-clicks{suffix}", f"pb-regions{suffix}"
    data["inputs"]["clicks"] = {**data["inputs"]["clicks"], "topic": clicks, "value": {"format": "protobuf"},
                                "key": {"format": "protobuf"}}  # fmt: skip
    data["inputs"]["regions"] = {**data["inputs"]["regions"], "topic": regions, "key": {"format": "protobuf"}}
    data["output"].update(topic=f"pb-enriched{suffix}", value_format="protobuf")
    data["aggregate"]["output"]["topic"] = f"pb-per-region{suffix}"
    data["dead_letter_topic"] = f"pb-dlq{suffix}"
    spec = parse_spec(data, "protobuf test")
    ensure_topics({"bootstrap.servers": avro_run.bootstrap}, plan_topics(spec))
    client = schema_registry.client(schema_registry.registry_config("schema_registry_default"))
    ids = {"v1": client.register_schema(f"{clicks}-value", Schema(CLICK_PROTO_V1, "PROTOBUF")),
           "key": client.register_schema(f"{clicks}-key", Schema(KEY_PROTO, "PROTOBUF"))}  # fmt: skip
    assert client.register_schema(f"{regions}-key", Schema(KEY_PROTO, "PROTOBUF")) == ids["key"]
    assert client.register_schema(f"{regions}-value", Schema(json.dumps(REGION), "AVRO")) == avro_run.ids["region"]
    indexes = io.BytesIO()
    ProtobufSerializer._encode_varints(indexes, [0])  # Click is the file's first message: Confluent's [0]

    def message(proto: str, name: str, schema_id: int, **fields: Any) -> bytes:
        payload = protobuf._message_class(protobuf.descriptor_set(proto, "test"), name)(**fields).SerializeToString()
        return wire_header(schema_id) + indexes.getvalue() + payload

    def click(version: str, **fields: Any) -> bytes:
        return message(CLICK_PROTO_V1 if version == "v1" else CLICK_PROTO_V2, "demo.Click", ids[version], **fields)

    produced: list[tuple[str, bytes, bytes | None, int]] = []
    for topic, key, value, ts in avro_run.produced[:-2]:  # the Avro clicks that decode, and the regions
        key = message(KEY_PROTO, "demo.UserKey", ids["key"], user=decode_wire(key, avro_run.writer)["user"])
        if topic == avro_run.spec.right.topic:
            topic = regions
        else:
            clicks_n = decode_wire(value, avro_run.writer)["clicks"]
            if clicks_n == 15:  # mid-stream, the producer moves to v2
                ids["v2"] = client.register_schema(f"{clicks}-value", Schema(CLICK_PROTO_V2, "PROTOBUF"))
            if clicks_n > 14 and clicks_n % 2:
                value = click("v2", clicks=clicks_n, page=f"p{clicks_n}", referrer="r")
            else:
                value = click("v1", clicks=clicks_n, page="home" if clicks_n % 3 else "")
            topic = clicks
        produced.append((topic, key, value, ts))
    last_key, ts = produced[-1][1], produced[-1][3]
    unknown = wire_header(UNKNOWN_ID) + produced[-1][2][5:]  # type: ignore[index]
    truncated = wire_header(ids["v2"]) + indexes.getvalue() + b"\x08\xff"  # a varint cut short
    for value in (unknown, truncated):
        ts += 10
        produced.append((clicks, last_key, value, ts))
    bad_key = (b"ann", click("v1", clicks=99, page="bad key"))  # a producer's plain text key
    sent = [*produced, (clicks, *bad_key, ts + 10)]
    produce_records(avro_run.bootstrap, [(t, k, v, stamp, []) for t, k, v, stamp in sent])
    settings = JobSettings(bootstrap=avro_run.bootstrap, checkpoint_dir=str(tmp_path_factory.mktemp("pb-ck")),
                           available_now=True, home=str(tmp_path_factory.mktemp("pb-home")))  # fmt: skip
    run_stream(spark, spec, settings)
    return ProtobufRun(spec, produced, ids, bad_key)


@pytest.mark.spark
@pytest.mark.kafka
def test_protobuf_clicks_joined_with_an_avro_table_match_the_reference_per_key(
    avro_run: Run, protobuf_run: ProtobufRun
) -> None:
    """Both Protobuf versions' clicks decode with the latest (v1's lack referrer: Protobuf reads fields by
    number); per key the Protobuf output (its message derived from the select, registered under the output's
    subject: the header's id, then Confluent's indexes of the first message) and the totals are the reference
    engine's over the decoded records."""
    from streamjoin.kafka import protobuf
    from streamjoin.kafka.schema_registry import registry_config, subject_ids

    run, spec = protobuf_run, protobuf_run.spec
    assert spec.output.topic is not None and spec.aggregate is not None and spec.aggregate.output.topic is not None
    fds = protobuf.descriptor_set(CLICK_PROTO_V2, "test")
    records = []
    for offset, (topic, key, data, ts) in enumerate(run.produced[:-2]):
        if topic == spec.left.topic:
            value = protobuf.decode_message(fds, "demo.Click", (data or b"")[6:])
        else:
            value = decode_wire(data, avro_run.writer)
        records.append(Record(topic, key.hex().upper(), value, ts - avro_run.base, 0, offset))
    expected = [
        (e.topic, e.key, e.value, e.ts)
        for e in ReferenceEngine(spec, _reference_functions()).replay_batch(records)
        if e.topic != spec.dead_letter_topic
    ]
    got: list[tuple[str, Any, Any, int]] = []
    (output_id,) = subject_ids(registry_config("schema_registry_default"), f"{spec.output.topic}-value")
    message = spec.output.record_name
    output_fds = protobuf.descriptor_set(avro_run.writer(output_id), "test output")
    # coalesce(right.region, 'UNKNOWN') is never null: region has no presence, the others are optional
    assert protobuf.message_fields(output_fds, message) == [("region", "string"), ("clicks", "int64"),
                                                            ("page", "string")]  # fmt: skip
    assert [f.has_presence for f in protobuf._pool(output_fds).FindMessageTypeByName(message).fields] == [
        False, True, True]  # fmt: skip
    for record in consume_all(avro_run.bootstrap, spec.output.topic, timeout=30):
        assert record.value[:6] == wire_header(output_id) + b"\x00"
        value = protobuf.decode_wire(record.value, avro_run.writer, None, "test output")
        ts = int(dict(record.headers)["ts"]) - avro_run.base
        got.append((spec.output.topic, record.key.hex().upper(), value, ts))
    for record in consume_all(avro_run.bootstrap, spec.aggregate.output.topic, timeout=30):
        value = decode(record.value, Format.LONG)
        got.append((spec.aggregate.output.topic, record.key.decode(), value,
                    int(dict(record.headers)["ts"]) - avro_run.base))  # fmt: skip
    outputs = [g for g in got if g[0] == spec.output.topic]
    assert len(outputs) == 30 and {v["page"] for _, _, v, _ in outputs} >= {"", "home", "p15"}
    assert _per_key(got) == _per_key(expected)


@pytest.mark.spark
@pytest.mark.kafka
def test_a_protobuf_outputs_next_version_keeps_its_field_numbers_and_the_registry_takes_it(
    protobuf_run: ProtobufRun,
) -> None:
    """A select reordered, with a field added: the next version's fields keep their numbers, which the registry's
    BACKWARD check accepts; numbered afresh, it refuses it. (A dropped field is reserved: test_avro_spec; the
    local Apicurio's check fails on it with HTTP 500: the next test.)"""
    from pyspark.sql import types as T

    from streamjoin.core.errors import SchemaRegistrationError
    from streamjoin.kafka import protobuf
    from streamjoin.kafka.schema_registry import register_output
    from streamjoin.spark.serde import registered_output

    sink = protobuf_run.spec.output.model_copy(update={"topic": f"{protobuf_run.spec.output.topic}-evolving"})
    v1 = T.StructType([T.StructField("region", T.StringType(), False), T.StructField("clicks", T.LongType()),
                       T.StructField("page", T.StringType())])  # fmt: skip
    v2 = T.StructType([T.StructField("page", T.StringType()), T.StructField("referrer", T.StringType()),
                       T.StructField("clicks", T.LongType()),
                       T.StructField("region", T.StringType(), False)])  # fmt: skip
    first, second = registered_output(sink, v1), registered_output(sink, v2)
    assert first.schema_id != second.schema_id
    fds = protobuf.descriptor_set(second.schema, sink.subject)
    numbers = {f.name: f.number for f in protobuf._pool(fds).FindMessageTypeByName(sink.record_name).fields}
    assert numbers == {"page": 3, "referrer": 4, "clicks": 2, "region": 1}
    with pytest.raises(SchemaRegistrationError, match=sink.subject):
        register_output(sink, protobuf.proto_schema(v2, sink.record_name), "PROTOBUF")


@pytest.mark.spark
@pytest.mark.kafka
def test_a_protobuf_output_version_the_registrys_check_fails_on_is_terminal(protobuf_run: ProtobufRun) -> None:
    """A select that drops a field: Apicurio 2.1.5's compatibility check answers HTTP 500 to it (a
    NullPointerException in its Protobuf checker) every time, so a restart would fail the same way. The job's
    registration is a terminal SchemaRegistrationError naming the subject, its latest version, the registry's
    reason and the field, and the subject keeps its one version."""
    from pyspark.sql import types as T

    from streamjoin.core.errors import SchemaRegistrationError
    from streamjoin.kafka.schema_registry import registry_config, subject_versions
    from streamjoin.spark.serde import registered_output

    sink = protobuf_run.spec.output.model_copy(update={"topic": f"{protobuf_run.spec.output.topic}-dropping"})
    v1 = T.StructType([T.StructField("region", T.StringType(), False), T.StructField("clicks", T.LongType()),
                       T.StructField("page", T.StringType())])  # fmt: skip
    registered_output(sink, v1)
    with pytest.raises(SchemaRegistrationError) as caught:
        registered_output(sink, T.StructType(v1.fields[:2]))
    error = caught.value
    assert (error.subject, error.version, error.transient) == (sink.subject, 1, False)
    assert "fails checking the derived Protobuf schema against it, twice the same way (HTTP 500: " in error.message
    assert "field 'page' removed" in error.message and "a person must act" in error.message
    assert len(subject_versions(registry_config(sink.registry_conn_id), sink.subject)) == 1


@pytest.mark.spark
@pytest.mark.kafka
def test_protobuf_unknown_schema_id_and_undecodable_payload_are_dead_letters(
    avro_run: Run, protobuf_run: ProtobufRun
) -> None:
    run, spec = protobuf_run, protobuf_run.spec
    dead = consume_all(avro_run.bootstrap, spec.dead_letter_topic, timeout=30)
    reasons = {r.value: dict(r.headers)["reason"].decode() for r in dead}
    unknown, truncated = run.produced[-2][2], run.produced[-1][2]
    assert run.bad_key is not None
    bad_key, bad_key_value = run.bad_key
    subject = f"{spec.left.topic}-value"
    assert reasons == {
        unknown: f"undecodable-value: schema id {UNKNOWN_ID} is not a version of subject {subject!r} (its ids: "
        f"{[run.ids['v1'], run.ids['v2']]})",
        truncated: f"undecodable-value: the bytes do not decode as Protobuf message 'demo.Click' with schema id "
        f"{run.ids['v2']} of subject {subject!r}",
        # a Protobuf key's wire header is checked, as an Avro key's (the key is not decoded: joined by its bytes)
        bad_key_value: "undecodable-key: not the Confluent wire format (magic byte 0, 4-byte schema id): starts "
        f"with 0x{bad_key.hex().upper()}",
    }
    assert sorted(r.key for r in dead) == sorted([run.produced[-1][1], run.produced[-1][1], bad_key])


@pytest.mark.spark
@pytest.mark.kafka
def test_replay_encodes_protobuf_values_with_the_subjects_latest_message(
    spark, avro_run: Run, protobuf_run: ProtobufRun
) -> None:
    """``streamjoin replay`` on the Protobuf spec: the file's JSON values (each as its writer version decodes it:
    v1's without referrer) go in the wire format of the latest id's Click, its JSON keys in the key subject's
    UserKey (the producer's bytes), and the output per key is the reference engine's over the topic's records,
    keys printed as JSON; a value Click cannot hold is a dead letter naming the field, its key printed as JSON."""
    from streamjoin.kafka import protobuf
    from streamjoin.spark.replay import raw_rows, replay

    run, spec = protobuf_run, protobuf_run.spec
    latest = protobuf.descriptor_set(CLICK_PROTO_V2, "test")
    records, reference = [], []
    for offset, (topic, key, data, ts) in enumerate(run.produced[:-2]):
        if topic == spec.left.topic and data is not None:
            writer = CLICK_PROTO_V1 if int.from_bytes(data[1:5], "big") == run.ids["v1"] else CLICK_PROTO_V2
            value = protobuf.decode_message(protobuf.descriptor_set(writer, "test"), "demo.Click", data[6:])
            full = protobuf.decode_message(latest, "demo.Click", data[6:])
        else:  # a region, or cid's region's tombstone
            value = full = decode_wire(data, avro_run.writer)
        records.append(
            {"topic": topic, "key": run.key_json(key, avro_run.writer), "value": value, "ts": ts - avro_run.base}
        )
        reference.append(Record(topic, key.hex().upper(), full, ts - avro_run.base, 0, offset))
    last = records[-1]
    assert last["topic"] == spec.left.topic and "referrer" not in records[-3]["value"]
    # what Confluent's ProtobufSerializer writes: magic byte, the latest id, Click's indexes [0], the payload
    (row,) = raw_rows(spec, [last], True)
    assert row[1] == wire_header(run.ids["v2"]) + b"\x00" + (
        protobuf._message_class(latest, "demo.Click")(**last["value"]).SerializeToString()
    )
    assert last["key"] == {"user": "eve"} and row[0] == run.produced[-3][1]  # the key: the producer's bytes
    bad = [{**last, "value": {"clicks": "many"}, "ts": last["ts"] + 10},
           {**last, "value": {"clicks": 1, "referer": "r"}, "ts": last["ts"] + 20}]  # fmt: skip
    emitted = replay(spark, spec, [*records, *bad], batch=True)
    subject = f"{spec.left.topic}-value"
    fit = f"the value does not fit Protobuf message 'demo.Click' of schema id {run.ids['v2']} of subject {subject!r}"
    letters = [r for r in emitted if r["topic"] == spec.dead_letter_topic]
    assert [(r["key"], r["value"], r["ts"], r["headers"]["source_topic"]) for r in letters] == [
        (last["key"], b["value"], b["ts"], spec.left.topic) for b in bad
    ]
    reasons = [r["headers"]["reason"] for r in letters]
    assert reasons[0].startswith(f"undecodable-value: line {len(records) + 1}: {fit}: Failed to parse clicks field")
    assert reasons[1].startswith(f"undecodable-value: line {len(records) + 2}: {fit}: Message type \"demo.Click\" "
                                 'has no field named "referer"')  # fmt: skip
    got = [
        (r["topic"], json.dumps(r["key"]), r["value"], r["ts"]) for r in emitted if r["topic"] != spec.dead_letter_topic
    ]
    expected = []
    for e in ReferenceEngine(spec, _reference_functions()).replay_batch(reference):
        key = run.key_json(bytes.fromhex(e.key), avro_run.writer) if e.topic == spec.output.topic else e.key
        expected.append((e.topic, json.dumps(key), e.value, e.ts))
    assert len([g for g in got if g[0] == spec.output.topic]) == 30 and _per_key(got) == _per_key(expected)


@pytest.mark.spark
@pytest.mark.kafka
def test_validate_checks_a_protobuf_inputs_subject_and_message(
    avro_run: Run, protobuf_run: ProtobufRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``streamjoin validate --registry``: the Protobuf clicks' subject is fine as the job reads it (v2's first
    message); a record_name no version holds names both versions. The Protobuf keys: regions' keys under a
    subject of another schema (so id) are warned about, under one without versions an error."""
    import yaml
    from confluent_kafka.schema_registry import Schema

    from streamjoin.cli import main
    from streamjoin.kafka import schema_registry

    client = schema_registry.client(schema_registry.registry_config("schema_registry_default"))
    # (not avro_run's demo.OtherKey: that subject holds Avro)
    other_id = client.register_schema("demo.PbKey", Schema(KEY_PROTO.replace("UserKey", "PbKey"), "PROTOBUF"))
    data = protobuf_run.spec.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)
    paths = []
    for name, record_name in (("ok", None), ("message", "demo.Nope"), ("keys", "demo.PbKey"), ("no key", "d.No")):
        spec = json.loads(json.dumps(data))
        if name == "message":
            spec["inputs"]["clicks"]["value"]["record_name"] = record_name
        elif record_name:
            spec["inputs"]["regions"]["key"].update(subject_name_strategy="record_name", record_name=record_name)
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(spec))
        paths.append(str(path))
    assert main(["validate", "--registry", *paths]) == 1
    subject = f"{protobuf_run.spec.left.topic}-value"
    key_subject = f"{protobuf_run.spec.left.topic}-key"
    assert _verdicts(capsys.readouterr().out) == [
        f"ok: {paths[0]}",
        *(f"error: {paths[1]}: inputs.clicks.value: version {v} of subject {subject!r}: it has no message "
          "'demo.Nope': its records would be dead letters; set record_name" for v in (1, 2)),
        f"warning: {paths[2]}: inputs.regions.key: version 1 of subject 'demo.PbKey': its schema id {other_id} "
        f"differs from {key_subject!r}'s (version 1, id {protobuf_run.ids['key']}): Protobuf keys join by their "
        "serialized bytes, which hold the id, so equal keys never match; write both topics' keys with one schema",
        f"ok: {paths[2]}",
        f"warning: {paths[3]}: inputs.regions.key: subject 'd.No': no versions: cannot check that both sides' keys "
        "are written with one schema id (Protobuf keys join by their serialized bytes)",
        f"error: {paths[3]}: inputs.regions.key: subject 'd.No': no versions at {avro_run.registry.url}: register "
        "the topic's schema, or check subject_name_strategy and record_name",
        "4 specs, 2 invalid",
    ]  # fmt: skip
    # the job's lineage: each input's fields from its subject's latest schema (Protobuf: the message's), the
    # output's from the schema the job registered
    assert _lineage_fields(paths[0]) == {
        protobuf_run.spec.left.topic: [("value.clicks", "int64"), ("value.page", "string"),
                                       ("value.referrer", "string")],
        protobuf_run.spec.right.topic: [("value.region", "string")],
        protobuf_run.spec.output.topic: [("value.region", "string"), ("value.clicks", "int64"),
                                         ("value.page", "string")],
    }  # fmt: skip


def _lineage_fields(spec_path: str) -> dict[str, list[tuple[str, str]]]:
    """The schema facet's fields of each dataset the job's owner reports to OpenLineage (those with one)."""
    from streamjoin.airflow.operators.supervise import SuperviseStreamJoinOperator

    lineage = SuperviseStreamJoinOperator(task_id="own_job", spec_path=spec_path).get_openlineage_facets_on_start()
    datasets = [*lineage.inputs, *lineage.outputs]
    return {d.name: [(f.name, f.type) for f in d.facets["schema"].fields] for d in datasets if "schema" in d.facets}


#: the JSON Schema clicks: v1, then v2 (a property added) registered mid-stream; the job reads with v2's fields.
#: Closed content models: the registry's BACKWARD check refuses a property added to an open one
CLICK_JSON_V1 = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Click", "type": "object",
                 "required": ["clicks"], "additionalProperties": False,
                 "properties": {"clicks": {"type": "integer"}, "page": {"type": "string"}}}  # fmt: skip
CLICK_JSON_V2 = {**CLICK_JSON_V1, "properties": {**CLICK_JSON_V1["properties"], "referrer": {"type": "string"}}}


@pytest.fixture(scope="module")
def json_schema_run(spark, avro_run: Run, tmp_path_factory: pytest.TempPathFactory) -> ProtobufRun:
    """JSON Schema clicks in Confluent's wire format (magic byte, id, the JSON text, as Confluent's
    JSONSerializer writes them) at avro_run's clicks' times, joined with avro_run's Avro regions (on a topic of
    their own) into a JSON Schema output; the keys on both topics are JSON Schema (one key schema, so one id: the
    header, then the compact JSON text) of avro_run's users. One record of an unknown id, one whose text is not
    JSON."""
    from confluent_kafka.schema_registry import Schema

    from streamjoin.kafka import schema_registry
    from streamjoin.spark.job import JobSettings, run_stream

    suffix = "-" + uuid.uuid4().hex[:8]
    data = avro_run.spec.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)
    clicks, regions = f"js-clicks{suffix}", f"js-regions{suffix}"
    data["inputs"]["clicks"] = {**data["inputs"]["clicks"], "topic": clicks, "value": {"format": "json_schema"},
                                "key": {"format": "json_schema"}}  # fmt: skip
    data["inputs"]["regions"] = {**data["inputs"]["regions"], "topic": regions, "key": {"format": "json_schema"}}
    data["output"].update(topic=f"js-enriched{suffix}", value_format="json_schema")
    data["aggregate"]["output"]["topic"] = f"js-per-region{suffix}"
    data["dead_letter_topic"] = f"js-dlq{suffix}"
    spec = parse_spec(data, "json_schema test")
    ensure_topics({"bootstrap.servers": avro_run.bootstrap}, plan_topics(spec))
    client = schema_registry.client(schema_registry.registry_config("schema_registry_default"))
    ids = {"v1": client.register_schema(f"{clicks}-value", Schema(json.dumps(CLICK_JSON_V1), "JSON"))}
    ids["key"] = client.register_schema(f"{clicks}-key", Schema(json.dumps(JSON_KEY), "JSON"))
    assert client.register_schema(f"{regions}-key", Schema(json.dumps(JSON_KEY), "JSON")) == ids["key"]
    assert client.register_schema(f"{regions}-value", Schema(json.dumps(REGION), "AVRO")) == avro_run.ids["region"]

    def click(version: str, **fields: Any) -> bytes:
        return wire_header(ids[version]) + json.dumps(fields).encode()

    produced: list[tuple[str, bytes, bytes | None, int]] = []
    for topic, key, value, ts in avro_run.produced[:-2]:  # the Avro clicks that decode, and the regions
        user = decode_wire(key, avro_run.writer)["user"]
        key = wire_header(ids["key"]) + json.dumps({"user": user}, separators=(",", ":")).encode()
        if topic == avro_run.spec.left.topic:
            clicks_n = decode_wire(value, avro_run.writer)["clicks"]
            if clicks_n == 15:  # mid-stream, the producer moves to v2
                ids["v2"] = client.register_schema(f"{clicks}-value", Schema(json.dumps(CLICK_JSON_V2), "JSON"))
            if clicks_n > 14 and clicks_n % 2:
                value = click("v2", clicks=clicks_n, page=f"p{clicks_n}", referrer="r")
            else:  # v1: page sometimes absent (not required: null)
                value = click("v1", clicks=clicks_n, **({"page": "home"} if clicks_n % 3 else {}))
            topic = clicks
        else:
            topic = regions
        produced.append((topic, key, value, ts))
    last_key, ts = produced[-1][1], produced[-1][3]
    unknown = wire_header(UNKNOWN_ID) + produced[-1][2][5:]  # type: ignore[index]
    not_json = wire_header(ids["v2"]) + b'{"clicks": 3, "page"'
    for value in (unknown, not_json):
        ts += 10
        produced.append((clicks, last_key, value, ts))
    sent = produced
    produce_records(avro_run.bootstrap, [(t, k, v, stamp, []) for t, k, v, stamp in sent])
    settings = JobSettings(bootstrap=avro_run.bootstrap, checkpoint_dir=str(tmp_path_factory.mktemp("js-ck")),
                           available_now=True, home=str(tmp_path_factory.mktemp("js-home")))  # fmt: skip
    run_stream(spark, spec, settings)
    return ProtobufRun(spec, produced, ids)


@pytest.mark.spark
@pytest.mark.kafka
def test_json_schema_clicks_joined_with_an_avro_table_match_the_reference_per_key(
    avro_run: Run, json_schema_run: ProtobufRun
) -> None:
    """Both JSON Schema versions' clicks decode into the latest's fields (absent ones null), joined with the
    regions by their JSON Schema keys' bytes; per key the JSON Schema output (its schema derived from the select,
    registered under the output's subject: the header's id) and the totals are the reference engine's over the
    decoded records."""
    from streamjoin.kafka.schema_registry import registry_config, subject_ids

    run, spec = json_schema_run, json_schema_run.spec
    assert spec.output.topic is not None and spec.aggregate is not None and spec.aggregate.output.topic is not None
    records = []
    for offset, (topic, key, data, ts) in enumerate(run.produced[:-2]):
        if topic == spec.left.topic:
            value = {"clicks": None, "page": None, "referrer": None, **json.loads((data or b"")[5:])}
        else:
            value = decode_wire(data, avro_run.writer)
        records.append(Record(topic, key.hex().upper(), value, ts - avro_run.base, 0, offset))
    expected = [
        (e.topic, e.key, e.value, e.ts)
        for e in ReferenceEngine(spec, _reference_functions()).replay_batch(records)
        if e.topic != spec.dead_letter_topic
    ]
    got: list[tuple[str, Any, Any, int]] = []
    (output_id,) = subject_ids(registry_config("schema_registry_default"), f"{spec.output.topic}-value")
    nullable = {"type": ["string", "null"]}
    assert json.loads(avro_run.writer(output_id)) == {
        "$schema": "http://json-schema.org/draft-07/schema#", "title": spec.output.record_name, "type": "object",
        "properties": {"region": {"type": "string"},  # coalesce(right.region, 'UNKNOWN') is never null
                       "clicks": {"type": ["integer", "null"]}, "page": nullable},
        "additionalProperties": False,
    }  # fmt: skip
    for record in consume_all(avro_run.bootstrap, spec.output.topic, timeout=30):
        ts = int(dict(record.headers)["ts"]) - avro_run.base
        assert record.value[:5] == wire_header(output_id)
        assert record.key[:5] == wire_header(run.ids["key"])  # the JSON Schema key's bytes, written back
        got.append((spec.output.topic, record.key.hex().upper(), json.loads(record.value[5:]), ts))
    for record in consume_all(avro_run.bootstrap, spec.aggregate.output.topic, timeout=30):
        got.append((spec.aggregate.output.topic, record.key.decode(), decode(record.value, Format.LONG),
                    int(dict(record.headers)["ts"]) - avro_run.base))  # fmt: skip
    outputs = [g for g in got if g[0] == spec.output.topic]
    assert len(outputs) == 30 and {v["page"] for _, _, v, _ in outputs} >= {None, "home", "p15"}
    assert _per_key(got) == _per_key(expected)


@pytest.mark.spark
@pytest.mark.kafka
def test_json_schema_unknown_schema_id_and_unparsable_text_are_dead_letters(
    avro_run: Run, json_schema_run: ProtobufRun
) -> None:
    run, spec = json_schema_run, json_schema_run.spec
    dead = consume_all(avro_run.bootstrap, spec.dead_letter_topic, timeout=30)
    reasons = {r.value: dict(r.headers)["reason"].decode() for r in dead}
    unknown, not_json = run.produced[-2][2], run.produced[-1][2]
    subject = f"{spec.left.topic}-value"
    assert reasons == {
        unknown: f"undecodable-value: schema id {UNKNOWN_ID} is not a version of subject {subject!r} (its ids: "
        f"{[run.ids['v1'], run.ids['v2']]})",
        not_json: f"undecodable-value: the JSON text of schema id {run.ids['v2']} of subject {subject!r} is not "
        'JSON matching its fields: {"clicks": 3, "page"',
    }


@pytest.mark.spark
@pytest.mark.kafka
def test_replay_encodes_json_schema_values_with_the_subjects_latest_id(
    spark, avro_run: Run, json_schema_run: ProtobufRun
) -> None:
    """``streamjoin replay`` on the JSON Schema spec, its keys under one record subject (the broker run's are
    under their topics' subjects): the file's JSON keys and values are written after the latest id's header
    (compact, as Confluent's serializers write them); the output per key is the reference engine's, keys printed
    back as JSON."""
    from confluent_kafka.schema_registry import Schema

    from streamjoin.kafka import schema_registry
    from streamjoin.spark.replay import raw_rows, replay

    run = json_schema_run
    client = schema_registry.client(schema_registry.registry_config("schema_registry_default"))
    key_schema = {"type": "object", "properties": {"user": {"type": "string"}}}
    key_id = client.register_schema("demo.JsKey", Schema(json.dumps(key_schema), "JSON"))
    data = run.spec.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)
    for name in ("clicks", "regions"):
        data["inputs"][name]["key"] = {"format": "json_schema", "subject_name_strategy": "record_name",
                                       "record_name": "demo.JsKey"}  # fmt: skip
    spec = parse_spec(data, "json_schema keys")
    records, reference = [], []
    for offset, (topic, key, data, ts) in enumerate(run.produced[:-2]):
        value = json.loads((data or b"")[5:]) if topic == spec.left.topic else decode_wire(data, avro_run.writer)
        records.append(
            {"topic": topic, "key": run.key_json(key, avro_run.writer), "value": value, "ts": ts - avro_run.base}
        )
        full = {"clicks": None, "page": None, "referrer": None, **value} if topic == spec.left.topic else value
        reference.append(Record(topic, key.hex().upper(), full, ts - avro_run.base, 0, offset))
    (row,) = raw_rows(spec, records[-1:], True)
    assert row[0] == wire_header(key_id) + b'{"user":"eve"}'
    emitted = replay(spark, spec, records, batch=True)
    assert [r for r in emitted if r["topic"] == spec.dead_letter_topic] == []  # every value in the wire format
    got = [
        (r["topic"], json.dumps(r["key"]), r["value"], r["ts"]) for r in emitted if r["topic"] != spec.dead_letter_topic
    ]
    expected = []
    for e in ReferenceEngine(spec, _reference_functions()).replay_batch(reference):
        key = run.key_json(bytes.fromhex(e.key), avro_run.writer) if e.topic == spec.output.topic else e.key
        expected.append((e.topic, json.dumps(key), e.value, e.ts))
    assert len([g for g in got if g[0] == spec.output.topic]) == 30 and _per_key(got) == _per_key(expected)


@pytest.mark.spark
@pytest.mark.kafka
def test_validate_checks_a_json_schema_inputs_subject(
    json_schema_run: ProtobufRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``streamjoin validate --registry``: the JSON Schema clicks' subject is fine as the job reads it; a
    record_name subject that does not exist is named."""
    import yaml

    from streamjoin.cli import main

    data = json_schema_run.spec.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)
    paths = []
    for name, record_name in (("ok", None), ("subject", "demo.Nope")):
        spec = json.loads(json.dumps(data))
        if record_name:
            spec["inputs"]["clicks"]["value"].update(subject_name_strategy="record_name", record_name=record_name)
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(spec))
        paths.append(str(path))
    assert main(["validate", "--registry", *paths]) == 1
    out = _verdicts(capsys.readouterr().out)
    assert out[0] == f"ok: {paths[0]}" and out[-1] == "2 specs, 1 invalid"
    assert out[1].startswith(f"error: {paths[1]}: inputs.clicks.value: subject 'demo.Nope': no versions at ")
    assert _lineage_fields(paths[0]) == {
        json_schema_run.spec.left.topic: [("value.clicks", "integer"), ("value.page", "string"),
                                          ("value.referrer", "string")],
        json_schema_run.spec.right.topic: [("value.region", "string")],
        json_schema_run.spec.output.topic: [("value.region", "string"), ("value.clicks", "integer|null"),
                                            ("value.page", "string|null")],
    }  # fmt: skip


@pytest.mark.spark
def test_the_value_types_validate_derives_output_schemas_from_are_each_outputs_in_a_chain(spark) -> None:
    """``output_value_types`` (what ``validate --registry`` derives output schemas from) of a chain whose first
    stage writes Avro, whose last writes JSON Schema and whose aggregate writes Protobuf: each output's path and the
    value type of the job's batch program for it (json inputs: no registry asked)."""
    from pyspark.sql import types as T

    from streamjoin.spark.replay import output_value_types
    from streamjoin.spark.serde import output_schema

    json_value = {"format": "json", "schema": {"amount": "long"}}
    spec = parse_spec({
        "name": "chain_outputs", "dead_letter_topic": "dlq",
        "inputs": {"clicks": {"topic": "clicks", "role": "stream", "value": json_value},
                   "regions": {"topic": "regions", "role": "table",
                               "value": {"format": "json", "schema": {"region": "string"}}},
                   "products": {"topic": "products", "role": "table",
                                "value": {"format": "json", "schema": {"category": "string"}}}},
        "joins": [
            {"shape": "stream-table", "kind": "left", "left": "clicks", "right": "regions",
             "joiner": {"select": {"amount": "left.amount", "region": "right.region"}},
             "output": {"topic": "with-region", "value_format": "avro"}},
            {"shape": "stream-table", "kind": "left", "right": "products",
             "joiner": {"select": {"amount": "left.amount", "region": "left.region", "category": "right.category"}}},
        ],
        "output": {"topic": "enriched", "value_format": "json_schema"},
        "aggregate": {"group_by": {"expr": "value.region"}, "reduce": "count",
                      "output": {"topic": "per-region", "value_format": "protobuf"}},
    }, "chain outputs")  # fmt: skip
    found = {path: (sink.topic, value_type) for path, sink, value_type in output_value_types(spark, spec)}
    assert {path: topic for path, (topic, _) in found.items()} == {
        "joins[0].output": "with-region", "output": "enriched", "aggregate.output": "per-region"}  # fmt: skip
    names = {path: [f.name for f in t.fields] for path, (_, t) in found.items() if isinstance(t, T.StructType)}
    assert names == {"joins[0].output": ["amount", "region"], "output": ["amount", "region", "category"]}
    assert found["aggregate.output"][1] == T.LongType()
    stage_sink = spec.earlier_joins[0].output
    assert stage_sink is not None
    record = json.loads(output_schema(stage_sink, found["joins[0].output"][1]).schema)
    assert (record["name"], [f["name"] for f in record["fields"]]) == ("with_region", ["amount", "region"])
