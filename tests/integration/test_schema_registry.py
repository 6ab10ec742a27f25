"""The local schema registry (Apicurio, in memory) through its Confluent-compatible REST API: an Avro schema
registered under a subject and read back by id, and BACKWARD compatibility of evolved schemas as Kafka's
Avro rules have it. One registry JVM for the module, on its own port and home."""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streamjoin.localdev.schema_registry import SchemaRegistry, SchemaRegistryError, registry_answers

#: beside the test brokers' ports (port + 0..1, + 10..11, + 20..22): two test sessions on one machine, each with
#: its own STREAMJOIN_TEST_KAFKA_PORT, do not start registries on each other's ports
PORT = int(os.environ.get("STREAMJOIN_TEST_KAFKA_PORT", "19092")) + 30
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
SUBJECT = "clicks-value"


def _avro(*fields: dict[str, Any]) -> str:
    return json.dumps({"type": "record", "name": "Click", "namespace": "streamjoin.test", "fields": list(fields)})


V1 = _avro({"name": "user", "type": "string"}, {"name": "page", "type": "string"})


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchemaRegistry]:
    registry = SchemaRegistry(tmp_path_factory.mktemp("registry"), PORT)
    registry.start(timeout=90)
    try:
        yield registry
    finally:
        registry.stop()


def _call(registry: SchemaRegistry, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        registry.url + path, data=data, method=method, headers={"Content-Type": CONTENT_TYPE}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def test_register_read_back_by_id_and_backward_compatibility(registry: SchemaRegistry) -> None:
    status, body = _call(registry, "POST", f"/subjects/{SUBJECT}/versions", {"schema": V1})
    assert status == 200, body
    schema_id = body["id"]
    status, body = _call(registry, "GET", f"/schemas/ids/{schema_id}")
    assert status == 200 and json.loads(body["schema"]) == json.loads(V1), body
    status, body = _call(registry, "GET", f"/subjects/{SUBJECT}/versions/latest")
    assert status == 200 and (body["subject"], body["version"], body["id"]) == (SUBJECT, 1, schema_id), body

    status, body = _call(registry, "PUT", f"/config/{SUBJECT}", {"compatibility": "BACKWARD"})
    assert status == 200 and body["compatibility"] == "BACKWARD", body
    user, page = {"name": "user", "type": "string"}, {"name": "page", "type": "string"}
    evolved = {
        # BACKWARD: the new schema must read what the old one wrote (Avro schema resolution)
        "field added with a default": (_avro(user, page, {"name": "n", "type": "int", "default": 0}), True),
        "field removed (the reader skips it)": (_avro(user), True),
        "field added without a default": (_avro(user, page, {"name": "n", "type": "int"}), False),
        "field's type changed string -> int": (_avro({"name": "user", "type": "int"}, page), False),
    }
    verdicts = {}
    for change, (schema, _) in evolved.items():
        status, body = _call(registry, "POST", f"/compatibility/subjects/{SUBJECT}/versions/latest", {"schema": schema})
        assert status == 200, (change, body)
        verdicts[change] = body["is_compatible"]
    assert verdicts == {change: expected for change, (_, expected) in evolved.items()}

    # the registry enforces it on registration too (against the latest version): the compatible one becomes
    # version 2, the type change is refused
    versions = f"/subjects/{SUBJECT}/versions"
    status, body = _call(registry, "POST", versions, {"schema": evolved["field added with a default"][0]})
    assert status == 200 and body["id"] != schema_id, body
    status, body = _call(registry, "POST", versions, {"schema": evolved["field's type changed string -> int"][0]})
    assert status == 409, body
    status, body = _call(registry, "GET", versions)
    assert status == 200 and body == [1, 2], body

    # a subject without a config of its own gets the global BACKWARD (Apicurio 2.1.5's GET /config still answers
    # NONE: it reports only a global level set through the API)
    other = "regions-value"
    assert _call(registry, "POST", f"/subjects/{other}/versions", {"schema": V1})[0] == 200
    status, body = _call(
        registry, "POST", f"/subjects/{other}/versions", {"schema": evolved["field's type changed string -> int"][0]}
    )
    assert status == 409, body


def test_port_taken_and_missing_build_are_errors_with_what_to_do(registry: SchemaRegistry, tmp_path: Path) -> None:
    with pytest.raises(SchemaRegistryError, match=f"port {PORT} is already in use"):
        SchemaRegistry(tmp_path / "other", PORT).start(timeout=5)
    with pytest.raises(SchemaRegistryError, match=re.escape("scripts/build-schema-registry.sh")):
        SchemaRegistry(tmp_path / "other", PORT + 1, dist=tmp_path / "no-build").start(timeout=5)
    assert registry_answers(registry.url)  # the running one was left alone
