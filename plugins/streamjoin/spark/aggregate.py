"""Re-key join results and reduce them into a changelog table (seed 000's clicks per region).

After a stream-producing join every result adds to its group (no subtraction: a later region change
does not move earlier clicks). Each result emits the group's new total; its timestamp is the largest
seen in the group so far.

A result whose group (or, for ``sum``, amount) is null adds nothing and emits nothing: it is dead-lettered
(``null-group``/``null-amount``) carrying the join result's key and value.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamjoin.core.spec import Aggregate, Reduce
from streamjoin.spark.events import ORDER
from streamjoin.spark.projection import is_json_text, selector


def staged_results(results: DataFrame, agg: Aggregate) -> DataFrame:
    """The join results an aggregate reads: ``group`` (null for a rejected result), ``amount``, ``ts``, ``__sub``,
    ``ORDER`` and ``__letter`` (a rejected result's key, value and reason; null for an accepted one). A
    tombstone adds nothing."""
    json_value = is_json_text(results)
    amount = (F.lit(1).cast("long") if agg.reduce is Reduce.COUNT
              else selector(agg.value, T.LongType(), json_value=json_value))  # type: ignore[arg-type]  # fmt: skip
    projected = results.filter(~F.col("tomb_out")).select(
        "key",
        "value",
        selector(agg.group_by, T.StringType(), json_value=json_value).alias("group"),
        amount.alias("amount"),
        "ts",
        "__sub",
        *ORDER,
    )
    reason = F.when(F.col("group").isNull(), F.lit("null-group")).when(F.col("amount").isNull(), F.lit("null-amount"))
    # a rejected result joins no group (its ``group`` is null, so sums never see its null amount) and carries
    # the join result for its dead letter; accepted rows carry nothing more than before
    letter = F.struct(F.col("key").alias("key"), F.col("value").alias("value"), reason.alias("reason"))
    return projected.select(
        F.when(reason.isNull(), F.col("group")).alias("group"),
        "amount",
        "ts",
        "__sub",
        *ORDER,
        F.when(reason.isNotNull(), letter).alias("__letter"),
    )


def rejected_results(staged: DataFrame) -> DataFrame:
    """The dead-lettered rows of :func:`staged_results` (``__letter`` set): ``key, value, ts, reason,
    __partition, __offset``."""
    return staged.filter(F.col("group").isNull()).select(
        F.col("__letter.key").alias("key"),
        F.col("__letter.value").alias("value"),
        "ts",
        F.col("__letter.reason").alias("reason"),
        "__partition",
        "__offset",
    )
