"""Batch programs built once and run on every batch (the kernel's ``Templates``): a DataFrame program built
from Python costs hundreds of Py4J calls and an analysis per step, every batch; built once over an empty
frame of the batch's schema, it runs on a batch's rows in one call.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame

#: (session, program name, input schema) -> (placeholder, program): a few programs per pipeline; an entry holds
#: its session (the placeholder's), so no other session can take the id of one in here
_PROGRAMS: OrderedDict[tuple[Any, ...], tuple[DataFrame, DataFrame]] = OrderedDict()
_MAX_PROGRAMS = 32


def templated(rows: DataFrame, name: str, build: Callable[[DataFrame], DataFrame]) -> DataFrame:
    """``build(rows)``, with ``build`` run once per ``name`` (which must say everything ``build`` depends on
    besides ``rows``' schema) and session; without the kernel's jar, ``build(rows)`` as it is."""
    spark = rows.sparkSession
    templates = _templates(spark)
    if templates is None:
        return build(rows)
    key = (id(spark), name, rows.schema.json())
    entry = _PROGRAMS.get(key)
    if entry is None:
        placeholder = spark.createDataFrame([], rows.schema)
        entry = _PROGRAMS[key] = (placeholder, build(placeholder))
        while len(_PROGRAMS) > _MAX_PROGRAMS:
            _PROGRAMS.popitem(last=False)
    _PROGRAMS.move_to_end(key)
    placeholder, program = entry
    out = DataFrame(templates.substitute(spark._jsparkSession, program._jdf, placeholder._jdf, rows._jdf), spark)
    # the program's schema (pyspark caches it on the frame): a program over this one keys on it without a call
    out.__dict__["schema"] = program.schema
    return out


def _templates(spark: Any) -> Any:
    from streamjoin.spark.kernel import java_class

    return java_class(spark, "dev.streamjoin.kernel.Templates")
