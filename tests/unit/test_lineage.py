"""Lineage facts from a spec (no Airflow run): what the join job and a reprocessed day read and write."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

from streamjoin.core.lineage import DatasetRef, kafka_namespace, spec_lineage
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.spec import load_spec

SPEC = load_spec(PROJECT_HOME / "include/pipelines/orders_products.yaml")


def test_kafka_namespace_is_the_first_bootstrap_server() -> None:
    assert kafka_namespace("b1:9092,b2:9092") == "kafka://b1:9092"
    assert kafka_namespace("PLAINTEXT://b1:9092") == "kafka://b1:9092"


def test_the_join_job_reads_the_input_topics_and_writes_topics_files_and_dead_letters(tmp_path: Path) -> None:
    lineage = spec_lineage(SPEC, "k:9092", home=tmp_path)
    kafka = "kafka://k:9092"
    assert set(lineage.inputs) == {
        DatasetRef(kafka, "orders", (("key", "string"), ("value.product", "string"), ("value.qty", "long"))),
        DatasetRef(kafka, "products", (("key", "string"), ("value", "string"))),
    }
    assert set(lineage.outputs) == {
        DatasetRef(kafka, "orders-with-products"),
        DatasetRef("file", str(tmp_path / "var/output/orders_with_products")),
        DatasetRef(kafka, "orders-products-dlq"),
    }
    assert lineage.join["shape"] == "table-table-fk" and lineage.join["foreign_key"] == {"expr": "value.product"}


def test_a_reprocessed_day_writes_its_day_partition_only(tmp_path: Path) -> None:
    lineage = spec_lineage(SPEC, "k:9092", day=date(2026, 11, 23), home=tmp_path)
    assert lineage.outputs == (
        DatasetRef("file", str(tmp_path / "var/output/orders_with_products/daily/date=2026-11-23")),
    )
    assert {d.name for d in lineage.inputs} == {"orders", "products"}


def test_the_jobs_owner_reports_the_streaming_jobs_lineage() -> None:
    """The long-running job is launched by its owner: the provider asks that operator (the Kafka connection
    comes from scripts/env.sh's AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT)."""
    from streamjoin.airflow.operators.supervise import SuperviseStreamJoinOperator

    owner = SuperviseStreamJoinOperator(task_id="own_job", spec_path="include/pipelines/orders_products.yaml")
    lineage = owner.get_openlineage_facets_on_start()
    assert {d.name: [(f.name, f.type) for f in d.facets["schema"].fields] for d in lineage.inputs} == {
        "orders": [("key", "string"), ("value.product", "string"), ("value.qty", "long")],
        "products": [("key", "string"), ("value", "string")],
    }
    assert {d.name for d in lineage.outputs} >= {"orders-with-products", "orders-products-dlq"}
    assert lineage.job_facets["streamjoin_join"].shape == "table-table-fk"


def test_a_chained_pipeline_lists_every_input_and_every_stage(tmp_path: Path) -> None:
    from streamjoin.core.spec import parse_spec

    inputs = {name: {"topic": name, "role": role} for name, role in
              [("clicks", "stream"), ("regions", "table"), ("products", "table")]}  # fmt: skip
    chain = parse_spec({
        "name": "chain", "inputs": inputs, "output": {"topic": "out"}, "dead_letter_topic": "dlq",
        "joins": [{"shape": "stream-table", "kind": "left", "left": "clicks", "right": "regions",
                   "output": {"topic": "with-region"}},
                  {"shape": "stream-table", "kind": "inner", "right": "products"}],
    }, "chain.yaml")  # fmt: skip
    lineage = spec_lineage(chain, "k:9092", home=tmp_path)
    assert {d.name for d in lineage.inputs} == {"clicks", "regions", "products"}
    assert {d.name for d in lineage.outputs} == {"with-region", "out", "dlq"}  # a stage's own output too
    assert [(s["left"], s["right"]["input"], s["kind"]) for s in lineage.join["stages"]] == [
        ({"input": "clicks", "topic": "clicks", "role": "stream"}, "regions", "left"),
        ({"stage": "stage1"}, "products", "inner"),
    ]
    assert (lineage.join["kind"], lineage.join["left"], lineage.join["right"]["topic"]) == (
        "inner", {"stage": "stage1"}, "products")  # fmt: skip


def test_an_avro_input_s_fields_come_from_its_reader_schema() -> None:
    from streamjoin.core.lineage import record_fields
    from streamjoin.core.spec import Serde

    reader = {"type": "record", "name": "Click", "fields": [
        {"name": "clicks", "type": "long"}, {"name": "page", "type": ["null", "string"], "default": None}]}  # fmt: skip
    avro = Serde.model_validate({"format": "avro", "reader_schema": reader})
    assert record_fields(Serde(), avro) == (("key", "string"), ("value.clicks", "long"), ("value.page", "null|string"))
    # without a reader schema in the spec: the registry's latest, which the operator looked up
    latest = Serde.model_validate({"format": "avro"})
    assert record_fields(Serde(), latest, json.dumps(reader))[1:] == (
        ("value.clicks", "long"),
        ("value.page", "null|string"),
    )
    assert record_fields(Serde(), latest) == (("key", "string"),)


def test_json_schema_and_protobuf_inputs_fields_come_from_the_spec_or_the_registry() -> None:
    from streamjoin.core.lineage import record_fields
    from streamjoin.core.spec import Serde
    from streamjoin.kafka import protobuf

    inline = Serde.model_validate({"format": "json_schema", "schema": {"clicks": "long", "page": "string"}})
    assert record_fields(Serde(), inline) == (("key", "string"), ("value.clicks", "long"), ("value.page", "string"))
    latest = {"type": "object", "properties": {"clicks": {"type": "integer"}, "tags": {"type": "array", "items": {
        "type": "string"}}, "page": {"type": ["string", "null"]}, "ref": {"$ref": "#/definitions/R"}}}  # fmt: skip
    registered = Serde.model_validate({"format": "json_schema"})
    assert record_fields(Serde(), registered, json.dumps(latest))[1:] == (
        ("value.clicks", "integer"), ("value.tags", "array<string>"), ("value.page", "string|null"),
        ("value.ref", "any"),
    )  # fmt: skip
    proto = (
        'syntax = "proto3";\npackage demo;\nmessage Click {\n  int64 clicks = 1;\n  repeated string tags = 2;\n'
        "  map<string, int64> counts = 3;\n  Page page = 4;\n}\nmessage Page {\n  string path = 1;\n}\n"
    )
    fds = protobuf.descriptor_set(proto, "lineage test")
    click = tuple(protobuf.message_fields(fds, "demo.Click"))
    assert click == (("clicks", "int64"), ("tags", "repeated string"), ("counts", "map<string,int64>"),
                     ("page", "demo.Page"))  # fmt: skip
    pb = Serde.model_validate({"format": "protobuf"})
    assert record_fields(Serde(), pb, None, click)[1:] == tuple((f"value.{n}", t) for n, t in click)
    assert record_fields(Serde(), pb) == (("key", "string"),) == record_fields(Serde(), registered)


def test_a_scalar_registered_schema_is_the_value_field() -> None:
    """An aggregate's registry output registers a scalar schema: its dataset's one field is the value."""
    from streamjoin.core.lineage import schema_fields
    from streamjoin.core.spec import Format

    assert schema_fields(Format.AVRO, '"long"') == (("value", "long"),)
    assert schema_fields(Format.JSON_SCHEMA, '{"type": "integer", "title": "streamjoin.t"}') == (("value", "integer"),)
    assert schema_fields(Format.JSON_SCHEMA, '{"type": "object", "properties": {"n": {"type": "integer"}}}') == (
        ("value.n", "integer"),
    )
