"""Avro in the spec (formats, registry, subject naming, reader schema) and the Avro schema an output's Spark type
gets: errors name the field and the value; no registry, no JVM."""

from __future__ import annotations

import io
import json
import re
from typing import Any

import fastavro
import pytest
from pyspark.sql import types as T

from streamjoin.core.avro import decode_wire, encode_wire, split_wire
from streamjoin.core.errors import SpecError
from streamjoin.core.spec import SubjectNameStrategy, parse_spec, spec_problems
from streamjoin.spark.json_schema import json_schema_spark_type
from streamjoin.spark.serde import avro_schema, avro_spark_type, spark_type

CLICK = {"type": "record", "name": "Click", "namespace": "demo", "fields": [{"name": "clicks", "type": "long"}]}


def _spec(clicks_value: dict[str, Any], output: dict[str, Any] | None = None, **join: Any) -> dict[str, Any]:
    return {
        "name": "p",
        "inputs": {
            "clicks": {"topic": "clicks", "role": "stream", "value": clicks_value},
            "regions": {"topic": "regions", "role": "table", "value": {"format": "avro"}},
        },
        "join": {"shape": "stream-table", "kind": "left", "left": "clicks", "right": "regions", **join},
        "output": output or {"topic": "enriched", "value_format": "avro"},
        "dead_letter_topic": "p-dlq",
    }


def test_avro_values_default_to_topic_subjects_and_the_default_registry() -> None:
    spec = parse_spec(_spec({"format": "avro"}))
    assert spec.left.value.subject("clicks") == "clicks-value"
    assert spec.left.value.registry_conn_id == "schema_registry_default"
    assert spec.output.subject == "enriched-value" and spec.output.record_name == "streamjoin.enriched"
    assert spec.output.compatibility.value == "BACKWARD"


def test_record_strategies_name_the_subject_after_the_record() -> None:
    by_reader = {"format": "avro", "subject_name_strategy": "topic_record_name", "reader_schema": CLICK}
    spec = parse_spec(_spec(by_reader))
    assert spec.left.value.subject("clicks") == "clicks-demo.Click"
    named = {"format": "avro", "subject_name_strategy": "record_name", "record_name": "demo.Click"}
    assert parse_spec(_spec(named)).left.value.subject("clicks") == "demo.Click"
    output = {"topic": "2-enriched.v1", "value_format": "avro", "subject_name_strategy": "record_name"}
    sink = parse_spec(_spec({"format": "avro"}, output)).output
    assert sink.record_name == "streamjoin._2_enriched_v1" and sink.subject == "streamjoin._2_enriched_v1"
    assert SubjectNameStrategy("topic_name").value == "topic_name"


@pytest.mark.parametrize(
    ("value", "path", "bad", "expected"),
    [
        ({"format": "avro", "subject_name_strategy": "record_name"}, "inputs.clicks.value", None,
         "needs 'record_name'"),
        ({"format": "avro", "reader_schema": {"type": "record", "name": "X", "fields": [{"name": "a", "type": "no"}]}},
         "inputs.clicks.value", None, "reader_schema is not a valid Avro schema: UnknownType: no"),
        ({"format": "avro", "reader_schema": {"type": "record", "name": "X"}}, "inputs.clicks.value", None,
         "reader_schema must be an Avro record with 'fields'"),
        ({"format": "avro", "record_name": "no-dashes"}, "inputs.clicks.value", None, "not an Avro full name"),
        ({"format": "string", "registry": "sr"}, "inputs.clicks.value", None, "'registry' is only for format 'avro'"),
        ({"format": "avro", "subject_name_strategy": "by_magic"}, "inputs.clicks.value.subject_name_strategy",
         "by_magic", "'topic_name', 'record_name' or 'topic_record_name'"),
    ],
)  # fmt: skip
def test_bad_avro_serdes_name_the_field_and_value(value: dict[str, Any], path: str, bad: Any, expected: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(_spec(value), "avro.yaml")
    assert caught.value.path == path
    assert caught.value.value == (bad if bad is not None else value)
    assert expected in str(caught.value)


def test_rules_across_fields_for_avro() -> None:
    scalar = _spec({"format": "avro"}, joiner={"select": "left.clicks"})
    (problem,) = spec_problems(scalar)
    assert (problem.path, problem.value) == ("output.value_format", "avro")
    assert "derived from a joiner that builds a struct" in str(problem)
    keyed = _spec({"format": "avro"})
    keyed["inputs"]["clicks"]["key"] = {"format": "avro"}
    keyed["inputs"]["regions"]["key"] = {"format": "avro", "reader_schema": CLICK}
    (problem,) = spec_problems(keyed)  # Avro keys are joined by their bytes: no reader schema
    assert (problem.path, problem.value) == ("inputs.regions.key.reader_schema", CLICK)
    keyed["inputs"]["regions"]["key"] = {"format": "string"}
    (problem,) = spec_problems(keyed)
    assert (problem.path, problem.value) == ("inputs.regions.key.format", "string")
    no_topic = _spec({"format": "avro"}, {"value_format": "avro", "files": {"path": "out"}})
    (problem,) = spec_problems(no_topic)
    assert problem.path == "output" and "needs a 'topic'" in str(problem)


@pytest.mark.parametrize("fmt", ["protobuf", "json_schema"])
def test_protobuf_and_json_schema_keys_are_joined_by_their_bytes_as_avro_keys(fmt: str) -> None:
    """Both sides' keys in the format: accepted, under their key subjects (record_name: which Protobuf message a
    replay encodes, or a record strategy's subject); a key against another format's, or a key's 'schema', not."""
    keyed = _spec({"format": "avro"})
    keyed["inputs"]["clicks"]["key"] = {"format": fmt}
    keyed["inputs"]["regions"]["key"] = {"format": fmt, "subject_name_strategy": "record_name", "record_name": "d.K"}
    assert spec_problems(keyed) == []
    spec = parse_spec(keyed)
    assert (spec.left.key.subject("clicks", is_key=True), spec.right.key.subject("regions", is_key=True)) == (
        "clicks-key", "d.K")  # fmt: skip
    keyed["inputs"]["regions"]["key"] = {"format": "avro"}
    (problem,) = spec_problems(keyed)  # Kafka Streams compares serialized keys: another format's never match
    assert (problem.path, problem.value) == ("inputs.regions.key.format", "avro")
    if fmt == "json_schema":  # its fields are never read
        keyed["inputs"]["regions"]["key"] = {"format": fmt, "schema": {"user": "string"}}
        (problem,) = spec_problems(keyed)
        assert (problem.path, problem.value) == ("inputs.regions.key.schema", {"user": "string"})
        assert "a JSON Schema key is joined by its serialized bytes" in str(problem)


def test_an_outputs_spark_type_becomes_a_record_named_after_the_topic() -> None:
    value = T.StructType([
        T.StructField("region", T.StringType(), False),
        T.StructField("clicks", T.LongType()),
        T.StructField("right", T.StructType([T.StructField("region", T.StringType())])),
        T.StructField("tags", T.ArrayType(T.StringType(), False)),
        T.StructField("day", T.DateType()),
    ])  # fmt: skip
    schema = avro_schema(value, "streamjoin.enriched")
    assert schema["name"] == "enriched" and schema["namespace"] == "streamjoin"
    fields = {f["name"]: f for f in schema["fields"]}
    assert fields["region"] == {"name": "region", "type": "string"}
    assert fields["clicks"] == {"name": "clicks", "type": ["null", "long"], "default": None}
    assert fields["right"]["type"][1]["name"] == "enriched_right"
    assert fields["tags"]["type"][1] == {"type": "array", "items": "string"}
    assert fields["day"]["type"][1] == {"type": "int", "logicalType": "date"}
    parsed = fastavro.parse_schema(schema)  # a valid Avro schema
    record = {"region": "eu", "clicks": None, "right": {"region": None}, "tags": ["a"], "day": None}
    data = encode_wire(record, 7, json.dumps(schema))
    assert data is not None and split_wire(data)[0] == 7
    assert decode_wire(data, lambda _: json.dumps(schema)) == record
    # and back: the Spark type from_avro decodes it to (every field nullable)
    assert avro_spark_type(schema)["right"].dataType == T.StructType([T.StructField("region", T.StringType())])
    assert parsed["name"] == "streamjoin.enriched"


def test_bytes_that_are_not_the_wire_format_are_refused_naming_them() -> None:
    with pytest.raises(ValueError, match=r"magic byte 0.*: 7b22"):
        split_wire(b'{"clicks": 1}')


def test_a_registry_connection_gives_url_basic_auth_and_tls(monkeypatch: pytest.MonkeyPatch) -> None:
    from streamjoin.core.errors import SchemaRegistryConfigError
    from streamjoin.kafka.schema_registry import RegistryConfig

    conn = {"conn_type": "http", "host": "sr.example", "port": 8081, "schema": "/apis/ccompat/v6", "login": "svc",
            "password": "s3cret", "extra": {"ssl.ca.location": "/etc/ca.pem"}}  # fmt: skip
    monkeypatch.setenv("AIRFLOW_CONN_SR_TLS", json.dumps(conn))
    config = RegistryConfig.from_connection("sr_tls")
    assert config.url == "https://sr.example:8081/apis/ccompat/v6"
    assert config.client_conf() == {"url": config.url, "basic.auth.user.info": "svc:s3cret",
                                    "ssl.ca.location": "/etc/ca.pem"}  # fmt: skip
    assert "s3cret" not in repr(config)
    monkeypatch.setenv("AIRFLOW_CONN_SR_URL", json.dumps({"conn_type": "http", "extra": {"url": "http://h:1/x/"}}))
    assert RegistryConfig.from_connection("sr_url").client_conf() == {"url": "http://h:1/x"}
    monkeypatch.setenv("AIRFLOW_CONN_SR_NONE", json.dumps({"conn_type": "http"}))
    with pytest.raises(SchemaRegistryConfigError, match=r"'sr_none': it has neither extra\.url nor a host"):
        RegistryConfig.from_connection("sr_none")


def test_a_reader_schema_spark_cannot_map_is_a_terminal_error_naming_the_subject() -> None:
    from streamjoin.kafka.schema_registry import AvroSchemas
    from streamjoin.spark.serde import reader_type

    union = {"type": "record", "name": "U", "fields": [{"name": "x", "type": ["null", "long", "string"]}]}
    with pytest.raises(SpecError) as caught:
        reader_type(AvroSchemas("clicks-value", json.dumps(union), ()))
    assert caught.value.path == "reader schema of subject 'clicks-value'" and not caught.value.transient
    assert "an Avro union of one type and null is supported, not ['null', 'long', 'string']" in str(caught.value)


def test_an_output_value_avro_cannot_hold_is_a_spec_error_naming_the_field() -> None:
    from streamjoin.spark.serde import registered_output

    sink = parse_spec(_spec({"format": "avro"})).output
    value = T.StructType([T.StructField("by_day", T.MapType(T.DateType(), T.LongType()))])
    with pytest.raises(SpecError) as caught:
        registered_output(sink, value)  # refused before the registry is asked
    assert caught.value.path == "join.joiner.select" and "field 'enriched_by_day'" in str(caught.value)


def test_protobuf_values_are_input_values_only() -> None:
    spec = parse_spec(_spec({"format": "protobuf", "subject_name_strategy": "record_name", "record_name": "demo.C"}))
    assert spec.left.value.subject("clicks") == "demo.C"
    with pytest.raises(SpecError, match="'reader_schema' is only for format 'avro'"):
        parse_spec(_spec({"format": "protobuf", "reader_schema": CLICK}))
    assert spec_problems(_spec({"format": "protobuf"}, {"topic": "enriched", "value_format": "protobuf"})) == []
    scalar = _spec({"format": "protobuf"}, {"topic": "enriched", "value_format": "protobuf"},
                   joiner={"select": "left.clicks"})  # fmt: skip
    (problem,) = spec_problems(scalar)
    assert "Protobuf output's message is derived from a joiner that builds a struct" in str(problem)


def test_an_outputs_spark_type_becomes_a_proto3_message_named_after_the_topic() -> None:
    from streamjoin.kafka import protobuf

    value = T.StructType([
        T.StructField("region", T.StringType(), False),
        T.StructField("clicks", T.LongType()),
        T.StructField("where", T.StructType([T.StructField("lat", T.DoubleType())])),
        T.StructField("tags", T.ArrayType(T.StringType())),
        T.StructField("counts", T.MapType(T.StringType(), T.IntegerType())),
    ])  # fmt: skip
    proto = protobuf.proto_schema(value, "streamjoin.enriched")
    fds = protobuf.descriptor_set(proto, "enriched-value")  # protoc compiles it
    assert protobuf.message_fields(fds, "streamjoin.enriched") == [
        ("region", "string"), ("clicks", "int64"), ("where", "streamjoin.enriched.WhereMessage"),
        ("tags", "repeated string"), ("counts", "map<string,int32>"),
    ]  # fmt: skip
    assert "  optional int64 clicks = 2;" in proto.splitlines()  # null stays null, not 0
    # the next version keeps each field's number (nested ones too), numbers a new one after the highest and
    # reserves a dropped one's
    where = T.StructType([T.StructField("lon", T.DoubleType()), T.StructField("lat", T.DoubleType())])
    later = T.StructType([
        T.StructField("page", T.StringType()), T.StructField("where", where), T.StructField("clicks", T.LongType()),
    ])  # fmt: skip
    evolved = protobuf.proto_schema(later, "streamjoin.enriched", proto)
    fds = protobuf.descriptor_set(evolved, "enriched-value")
    message = protobuf._pool(fds).FindMessageTypeByName("streamjoin.enriched")
    assert {f.name: f.number for f in message.fields} == {"page": 6, "where": 3, "clicks": 2}
    assert {f.name: f.number for f in message.fields_by_name["where"].message_type.fields} == {"lon": 2, "lat": 1}
    assert "  reserved 1, 4, 5;" in evolved.splitlines()
    again = protobuf.proto_schema(T.StructType([T.StructField("tags", T.LongType())]), "streamjoin.enriched", evolved)
    assert "  optional int64 tags = 7;" in again.splitlines()  # a reserved number is never taken again
    for bad, named in [(T.DecimalType(10, 2), "decimal(10,2)"), (T.ArrayType(T.ArrayType(T.LongType())), "array")]:
        with pytest.raises(ValueError, match=f"field 'x'.*{re.escape(named)}"):
            protobuf.proto_schema(T.StructType([T.StructField("x", bad)]), "streamjoin.o")


PROTO = """syntax = "proto3";
package demo;
message Click {
  int64 clicks = 1;
  repeated string tags = 2;
  map<string, int32> counts = 3;
  Kind kind = 4;
  Inner inner = 5;
  optional string note = 6;
  message Inner { bytes raw = 1; }
}
enum Kind { PLAIN = 0; PROMOTED = 1; }
message Other { string x = 1; }
"""


def test_protobuf_schemas_compile_to_the_message_indexes_and_values_confluent_writes() -> None:
    """protoc's descriptor of a registry schema: the message indexes equal Confluent's serializer's (its own
    encoder and index walk), the Spark type and the decoded values follow the message's fields."""
    from confluent_kafka.schema_registry._sync.protobuf import ProtobufSerializer
    from confluent_kafka.schema_registry.common.protobuf import _create_index_array

    from streamjoin.kafka import protobuf

    fds = protobuf.descriptor_set(PROTO, "clicks-value")
    assert protobuf.main_message(fds) == "demo.Click"
    for name in ("demo.Click", "demo.Other", "demo.Click.Inner"):
        confluent = io.BytesIO()
        descriptor = protobuf._pool(fds).FindMessageTypeByName(name)
        ProtobufSerializer._encode_varints(confluent, _create_index_array(descriptor))
        assert protobuf.message_indexes(fds, name) == confluent.getvalue()
    assert protobuf.message_indexes(fds, "demo.Missing") is None
    assert protobuf.spark_type(fds, "demo.Click", "s").simpleString() == (
        "struct<clicks:bigint,tags:array<string>,counts:map<string,int>,kind:string,inner:struct<raw:binary>,"
        "note:string>"
    )
    message = protobuf._message_class(fds, "demo.Click")(clicks=3, tags=["a"], kind=1)
    message.counts["x"] = 2
    assert protobuf.decode_message(fds, "demo.Click", message.SerializeToString()) == {
        "clicks": 3, "tags": ["a"], "counts": {"x": 2}, "kind": "PROMOTED", "inner": None, "note": None
    }  # fmt: skip
    assert protobuf.decode_message(fds, "demo.Click", b"\x08\xff") is None  # a varint cut short
    # a schema registered as Confluent's Python serializer registers it: its file, base64
    from confluent_kafka.schema_registry.common.protobuf import _schema_to_str

    serialized = protobuf.descriptor_set(_schema_to_str(protobuf._pool(fds).FindFileByName("schema.proto")), "s")
    assert protobuf.spark_type(serialized, "demo.Click", "s") == protobuf.spark_type(fds, "demo.Click", "s")
    assert protobuf.decode_message(serialized, "demo.Click", message.SerializeToString())["kind"] == "PROMOTED"
    with pytest.raises(SpecError, match=r"subject 'bad-value'.*\"Y\" is not defined"):
        protobuf.descriptor_set('syntax = "proto3"; message X { Y y = 1; }', "bad-value")


def test_json_schema_values_are_input_values_with_registry_settings() -> None:
    spec = parse_spec(_spec({"format": "json_schema", "subject_name_strategy": "record_name", "record_name": "demo.C"}))
    assert spec.left.value.subject("clicks") == "demo.C"
    assert spec.left.value.registry_conn_id == "schema_registry_default"
    flat = parse_spec(_spec({"format": "json_schema", "schema": {"clicks": "long"}})).left.value
    assert spark_type(flat) == T.StructType([T.StructField("clicks", T.LongType())])
    with pytest.raises(SpecError, match="'reader_schema' is only for format 'avro'"):
        parse_spec(_spec({"format": "json_schema", "reader_schema": CLICK}))
    with pytest.raises(SpecError, match="'registry' is only for format 'avro', 'protobuf' or 'json_schema'"):
        parse_spec(_spec({"format": "json", "schema": {"clicks": "long"}, "registry": "r"}))
    data = _spec({"format": "json_schema"}, {"topic": "enriched", "value_format": "json_schema"})
    data["aggregate"] = {"group_by": {"expr": "value.region"}, "reduce": "count",
                         "output": {"topic": "per-region", "value_format": "json_schema"}}  # fmt: skip
    # the aggregate's output may be a registry format too: its value is a scalar (a primitive schema)
    for fmt in ("avro", "json_schema", "protobuf"):
        data["aggregate"]["output"]["value_format"] = fmt
        assert spec_problems(data) == []
    from streamjoin.core.spec import Sink
    from streamjoin.spark.serde import output_schema

    sink = Sink(topic="per-region", value_format="avro")
    assert json.loads(output_schema(sink, T.LongType()).schema) == "long"
    assert json.loads(output_schema(sink, T.DoubleType()).schema) == "double"
    derived = output_schema(Sink(topic="per-region", value_format="json_schema"), T.DoubleType())
    assert (json.loads(derived.schema)["type"], derived.kind, derived.scalar) == ("number", "JSON", True)
    scalar = _spec({"format": "json_schema"}, {"topic": "enriched", "value_format": "json_schema"},
                   joiner={"select": "left.clicks"})  # fmt: skip
    (problem,) = spec_problems(scalar)
    assert (problem.path, problem.value) == ("output.value_format", "json_schema")
    assert "JSON Schema output's schema is derived from a joiner that builds a struct" in str(problem)
    with pytest.raises(SpecError, match="value_format 'json_schema' needs a 'topic'"):
        parse_spec(_spec({"format": "json_schema"}, {"value_format": "json_schema", "files": {"path": "out"}}))


def test_a_json_schema_maps_to_spark_types_and_names_what_it_cannot_map() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#", "title": "Click", "type": "object",
        "required": ["clicks"],
        "properties": {
            "clicks": {"type": "integer"}, "score": {"type": "number"}, "page": {"type": ["string", "null"]},
            "ok": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string"}},
            "where": {"type": "object", "properties": {"lat": {"type": "number"}}, "additionalProperties": False},
        },
    }  # fmt: skip
    assert json_schema_spark_type(schema, "clicks-value") == T.StructType([
        T.StructField("clicks", T.LongType()), T.StructField("score", T.DoubleType()),  # required: still nullable
        T.StructField("page", T.StringType()), T.StructField("ok", T.BooleanType()),
        T.StructField("tags", T.ArrayType(T.StringType())),
        T.StructField("where", T.StructType([T.StructField("lat", T.DoubleType())])),
    ])  # fmt: skip
    for prop, construct in (
        ({"$ref": "#/definitions/X"}, "keyword '$ref'"),
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, "keyword 'oneOf'"),
        ({"type": ["string", "integer"]}, "type ['string', 'integer']"),
        ({"type": "object", "additionalProperties": {"type": "string"}}, "'additionalProperties' with a schema"),
        ({"type": "array", "items": {"type": "null"}}, "type 'null'"),
    ):
        bad = {"type": "object", "properties": {"where": {"type": "object", "properties": {"x": prop}}}}
        with pytest.raises(SpecError) as caught:
            json_schema_spark_type(bad, "clicks-value")
        assert "subject 'clicks-value', property 'where.x" in caught.value.path and construct in str(caught.value)


def test_an_outputs_spark_type_becomes_a_closed_json_schema_a_json_schema_input_reads_back() -> None:
    from streamjoin.spark.serde import json_schema

    value = T.StructType([
        T.StructField("region", T.StringType(), False),
        T.StructField("clicks", T.LongType()),
        T.StructField("where", T.StructType([T.StructField("lat", T.DoubleType())])),
        T.StructField("tags", T.ArrayType(T.StringType(), False)),
    ])  # fmt: skip
    schema = json_schema(value, "streamjoin.enriched")
    assert schema == {
        "$schema": "http://json-schema.org/draft-07/schema#", "title": "streamjoin.enriched", "type": "object",
        "properties": {
            "region": {"type": "string"}, "clicks": {"type": ["integer", "null"]},
            "where": {"type": ["object", "null"], "properties": {"lat": {"type": ["number", "null"]}},
                      "additionalProperties": False},
            "tags": {"type": ["array", "null"], "items": {"type": "string"}},
        },
        "additionalProperties": False,
    }  # fmt: skip
    # a pipeline reading the output topic as json_schema gets the same fields (every one nullable there)
    read = [*value.fields[:3], T.StructField("tags", T.ArrayType(T.StringType()))]
    assert json_schema_spark_type(schema, "enriched-value") == T.StructType([T.StructField(f.name, f.dataType)
                                                                             for f in read])  # fmt: skip
    binary = {"type": ["string", "null"], "contentEncoding": "base64"}
    assert json_schema(T.MapType(T.StringType(), T.BinaryType())) == {"type": "object", "additionalProperties": binary}
    with pytest.raises(ValueError, match="Spark type map<bigint,string> has no JSON Schema"):
        json_schema(T.MapType(T.LongType(), T.StringType()))
