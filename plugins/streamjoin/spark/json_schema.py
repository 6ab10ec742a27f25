"""A JSON Schema (a ``json_schema`` input's, from the registry) as the Spark type its values decode into. Its own
module: decoding (:mod:`streamjoin.spark.serde`) and ``streamjoin validate`` (:mod:`streamjoin.kafka.schema_registry`)
both use it."""

from __future__ import annotations

from typing import Any

from pyspark.sql import types as T

from streamjoin.core.errors import SpecError

_JSON_SCHEMA_TYPES: dict[str, T.DataType] = {
    "string": T.StringType(), "integer": T.LongType(), "number": T.DoubleType(), "boolean": T.BooleanType(),
}  # fmt: skip
#: keywords that only annotate or validate: they do not change the Spark type
_JSON_SCHEMA_ANNOTATIONS = frozenset({
    "$schema", "$id", "$comment", "title", "description", "default", "examples", "required", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "pattern",
    "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties", "readOnly", "writeOnly", "deprecated",
    "connect.index", "connect.type",
})  # fmt: skip


def json_schema_spark_type(schema: Any, subject: str) -> T.StructType:
    """The Spark type of a JSON Schema object's values: its ``properties`` (string, integer as long, number as
    double, boolean, objects as structs, arrays of those), every field nullable (``required`` is not enforced).

    :raises SpecError: a construct this mapping does not support (terminal: names subject, property, construct)
    """
    result = _json_schema_type(schema, subject, "")
    if not isinstance(result, T.StructType):
        _json_schema_unsupported(subject, "", f"a top-level {schema.get('type')!r}: the value must be an object")
    assert isinstance(result, T.StructType)
    return result


def _json_schema_type(schema: Any, subject: str, path: str) -> T.DataType:
    if not isinstance(schema, dict):
        _json_schema_unsupported(subject, path, f"schema {schema!r} (a boolean schema or not an object)")
    for keyword in schema:
        if keyword not in _JSON_SCHEMA_ANNOTATIONS | {"type", "properties", "items", "additionalProperties"}:
            _json_schema_unsupported(subject, path, f"keyword {keyword!r}")
    kind = schema.get("type")
    if isinstance(kind, list):  # ["string", "null"]: every field is nullable anyway
        kinds = [k for k in kind if k != "null"]
        if len(kinds) != 1:
            _json_schema_unsupported(subject, path, f"type {kind!r} (one type, or one type and 'null')")
        kind = kinds[0]
    if kind == "object":
        if isinstance(schema.get("additionalProperties"), dict):
            _json_schema_unsupported(subject, path, "keyword 'additionalProperties' with a schema (a map)")
        properties = schema.get("properties") or {}
        return T.StructType([
            T.StructField(name, _json_schema_type(prop, subject, f"{path}.{name}" if path else name))
            for name, prop in properties.items()
        ])  # fmt: skip
    if kind == "array":
        if "items" not in schema:
            _json_schema_unsupported(subject, path, "an array without 'items'")
        return T.ArrayType(_json_schema_type(schema["items"], subject, f"{path}[]"))
    if isinstance(kind, str) and kind in _JSON_SCHEMA_TYPES:
        return _JSON_SCHEMA_TYPES[kind]
    return _json_schema_unsupported(subject, path, f"type {kind!r}")


def _json_schema_unsupported(subject: str, path: str, construct: str) -> T.DataType:
    raise SpecError(
        "<schema registry>", f"JSON Schema of subject {subject!r}, property {path or '<the value>'!r}", construct,
        "properties of type string, integer, number, boolean, object or array of those; or give the input a "
        "'schema' (field -> type) as json inputs have",
    )  # fmt: skip
