"""Batch programs built once and run on every batch (the kernel's ``Templates``): a DataFrame program built
from Python costs hundreds of Py4J calls and an analysis per step, every batch; built once over an empty
frame of the batch's schema, it runs on a batch's rows in one call.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame

#: (session, program name, input schemas) -> (placeholders, program): a few programs per pipeline stage; an entry
#: holds its session (the placeholders'), so no other session can take the id of one in here
_PROGRAMS: OrderedDict[tuple[Any, ...], tuple[tuple[DataFrame, ...], DataFrame]] = OrderedDict()
_MAX_PROGRAMS = 64


def templated(rows: DataFrame, name: str, build: Callable[[DataFrame], DataFrame]) -> DataFrame:
    """``build(rows)``, with ``build`` run once per ``name`` (which must say everything ``build`` depends on
    besides ``rows``' schema) and session; without the kernel's jar, ``build(rows)`` as it is."""
    return templated_over((rows,), name, build)


def templated_over(frames: tuple[DataFrame, ...], name: str, build: Callable[..., DataFrame]) -> DataFrame:
    """``build(*frames)``, built once per ``name`` and the frames' schemas (as :func:`templated`), each frame in
    its placeholder's place."""
    spark = frames[0].sparkSession
    templates = _templates(spark)
    schemas = tuple(frame.schema.json() for frame in frames)
    if templates is None or len(set(schemas)) < len(schemas):  # a placeholder is found by its schema
        return build(*frames)
    key = (id(spark), name, *schemas)
    entry = _PROGRAMS.get(key)
    if entry is None:
        placeholders = tuple(spark.createDataFrame([], frame.schema) for frame in frames)
        entry = _PROGRAMS[key] = (placeholders, build(*placeholders))
        while len(_PROGRAMS) > _MAX_PROGRAMS:
            _PROGRAMS.popitem(last=False)
    _PROGRAMS.move_to_end(key)
    placeholders, program = entry
    plan = program._jdf
    for placeholder, frame in zip(placeholders, frames, strict=True):
        plan = templates.substitute(spark._jsparkSession, plan, placeholder._jdf, frame._jdf)
    out = DataFrame(plan, spark)
    # the program's schema (pyspark caches it on the frame): a program over this one keys on it without a call
    out.__dict__["schema"] = program.schema
    return out


def _templates(spark: Any) -> Any:
    from streamjoin.spark.kernel import java_class

    return java_class(spark, "dev.streamjoin.kernel.Templates")
