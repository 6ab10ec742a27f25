"""Joiners and selectors from the spec, as Spark columns.

``select``/``expr`` projections are Spark SQL and stay in the JVM (fast). ``function`` projections call a
Python function per row through a UDF; a function joiner's results travel as JSON text (the column carries
:data:`JSON_TEXT` in its metadata) unless the output is ``string`` or ``long``, where they are that scalar,
so everything downstream of a function joiner must be a function too.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamjoin.core.codec import output_value
from streamjoin.core.spec import Format, Joiner, Projection, import_function

#: Column metadata key: the string column holds JSON documents (a function joiner's results)
JSON_TEXT = "streamjoin.json_text"


def _plain(value: Any) -> Any:
    if isinstance(value, Row):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _from_json(value: Any) -> Any:
    return None if value is None else json.loads(value)


def joined_value(joiner: Joiner, fmt: Format = Format.JSON, *, left_json: bool = False) -> Column:
    """The joined value over columns ``key``, ``left``, ``right``, named ``value``; ``fmt`` is the output's
    ``value_format`` (a function's scalar result is converted as :func:`output_value` says).

    :param left_json: ``left`` holds JSON documents (a chained stage after a function joiner's): a function
        gets them decoded
    """
    if joiner.function is not None:
        fn = import_function(joiner.function, where="join.joiner.function")
        what = f"joiner {joiner.function}"
        plain_left = _from_json if left_json else _plain
        if fmt is Format.JSON:

            def call(key: Any, left: Any, right: Any) -> str | None:
                result = fn(key, plain_left(left), _plain(right))
                return None if result is None else json.dumps(result, sort_keys=True)

            udf = F.udf(call, T.StringType())
            return udf(F.col("key"), F.col("left"), F.col("right")).alias("value", metadata={JSON_TEXT: True})

        def scalar(key: Any, left: Any, right: Any) -> str | int | None:
            return output_value(fn(key, plain_left(left), _plain(right)), fmt, what)

        udf = F.udf(scalar, T.LongType() if fmt is Format.LONG else T.StringType())
        return udf(F.col("key"), F.col("left"), F.col("right")).alias("value")
    if isinstance(joiner.select, str):
        return F.expr(joiner.select).alias("value")
    if joiner.select is not None:
        return F.struct(*[F.expr(expr).alias(name) for name, expr in joiner.select.items()]).alias("value")
    return F.struct(F.col("left").alias("left"), F.col("right").alias("right")).alias("value")


def is_json_text(frame: DataFrame, column: str = "value") -> bool:
    """Whether ``frame``'s column holds JSON documents (a function joiner's results under a json output)."""
    return bool(frame.schema[column].metadata.get(JSON_TEXT))


def selector(projection: Projection, return_type: T.DataType, *, json_value: bool = False) -> Column:
    """A group/value selector over columns ``key`` and ``value`` (``json_value``: JSON documents, a function
    joiner's results, which a function gets decoded: a string result as the string, not its JSON text)."""
    if projection.expr is not None:
        return F.expr(projection.expr).cast(return_type)
    assert projection.function is not None
    fn = import_function(projection.function)
    plain = _from_json if json_value else _plain

    def call(key: Any, value: Any) -> Any:
        return fn(key, plain(value))

    return F.udf(call, return_type)(F.col("key"), F.col("value"))


def key_selector(projection: Projection, value: str = "lval", *, json_value: bool = False) -> Column:
    """A lookup key as text over the record's ``key`` and its value (column ``value``): a global-table join's
    key selector (the stream record's ``lval``), a foreign-key join's foreign key (the left record's value).

    :param json_value: the value is a JSON document (a chained stage's, after a function joiner): a function gets
        it decoded
    """
    if projection.expr is not None:
        return F.expr(projection.expr).cast("string")
    assert projection.function is not None
    fn = import_function(projection.function)
    plain = _from_json if json_value else _plain

    def call(key: Any, value: Any) -> Any:
        if value is None:  # Spark may call a UDF on rows a surrounding `when` excludes: no value, no lookup
            return None
        result = fn(key, plain(value))
        return None if result is None else str(result)

    return F.udf(call, T.StringType())(F.col("key"), F.col(value))
