"""Joiners and selectors from the spec, as Spark columns.

``select``/``expr`` projections are Spark SQL and stay in the JVM (fast). ``function`` projections call a
Python function per row through a UDF; their results travel as JSON text, so everything downstream of a
function joiner must be a function too.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from typing import Any

from pyspark.sql import Column, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamjoin.core.spec import Joiner, Projection


def load_function(path: str) -> Callable[..., Any]:
    """Import ``package.module:name`` (or ``package.module.name``)."""
    module_name, _, attr = path.partition(":") if ":" in path else path.rpartition(".")
    function: Callable[..., Any] = getattr(importlib.import_module(module_name), attr)
    return function


def _plain(value: Any) -> Any:
    if isinstance(value, Row):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def joined_value(joiner: Joiner) -> Column:
    """The joined value over columns ``key``, ``left``, ``right``."""
    if joiner.function is not None:
        fn = load_function(joiner.function)

        def call(key: Any, left: Any, right: Any) -> str | None:
            result = fn(key, _plain(left), _plain(right))
            return None if result is None else json.dumps(result, sort_keys=True)

        return F.udf(call, T.StringType())(F.col("key"), F.col("left"), F.col("right"))
    if joiner.select is not None:
        return F.struct(*[F.expr(expr).alias(name) for name, expr in joiner.select.items()])
    return F.struct(F.col("left").alias("left"), F.col("right").alias("right"))


def selector(projection: Projection, return_type: T.DataType) -> Column:
    """A group/value selector over columns ``key`` and ``value``."""
    if projection.expr is not None:
        return F.expr(projection.expr).cast(return_type)
    assert projection.function is not None
    fn = load_function(projection.function)

    def call(key: Any, value: Any) -> Any:
        return fn(key, _plain(value))

    return F.udf(call, return_type)(F.col("key"), F.col("value"))


def key_selector(projection: Projection) -> Column:
    """Global-table lookup key over the stream record's ``key`` and value (column ``lval``)."""
    if projection.expr is not None:
        return F.expr(projection.expr).cast("string")
    assert projection.function is not None
    fn = load_function(projection.function)

    def call(key: Any, value: Any) -> Any:
        if value is None:  # Spark may call a UDF on rows a surrounding `when` excludes: no value, no lookup
            return None
        result = fn(key, _plain(value))
        return None if result is None else str(result)

    return F.udf(call, T.StringType())(F.col("key"), F.col("lval"))
