"""A keyed table kept as layers of datasets, so that a batch reads and writes what it touches, not the table.

Each layer holds rows ``key, <values>, tomb``: the newest layer that holds a key says its value, and a
``tomb`` row says it is deleted. A batch looks up only the keys it needs (:meth:`KeyedLayers.lookup`: a
semi-join with the batch's keys broadcast, no shuffle and no sort of the table) and adds one layer with
the latest row of each key it changed (:meth:`KeyedLayers.with_layer`). The state store writes only the
new layer and merges the layers into one (:meth:`KeyedLayers.merged`, tombstones dropped) when there are
too many of them or their rows outweigh the oldest layer's: a log-structured merge, so the table is
rewritten O(log n) times while it grows to n keys instead of once per batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamjoin.spark.local_frames import local_frame

_LAYER = "__layer"


@dataclass(frozen=True)
class KeyedLayers:
    """The layers, oldest first, and the DDL schema of their rows (``key string, ..., tomb boolean``)."""

    schema: str
    layers: tuple[DataFrame, ...] = ()

    def with_layer(self, changes: DataFrame) -> KeyedLayers:
        """The table after ``changes`` (one row per changed key, ``tomb`` for a deletion)."""
        return KeyedLayers(self.schema, (*self.layers, changes))

    def lookup(self, keys: DataFrame) -> DataFrame:
        """The live row (without ``tomb``) of each key of ``keys`` (a frame of distinct ``key``) that has one."""
        if not self.layers:
            return local_frame(keys.sparkSession, [], self.schema).drop("tomb")
        hits = [
            layer.join(F.broadcast(keys), "key", "left_semi").withColumn(_LAYER, F.lit(index))
            for index, layer in enumerate(self.layers)
        ]
        return _live(_newest(hits, self.columns()), self.columns())

    def merged(self) -> DataFrame:
        """Every live row, one per key: what a compaction writes as the only layer."""
        layers = [layer.withColumn(_LAYER, F.lit(index)) for index, layer in enumerate(self.layers)]
        return _live(_newest(layers, self.columns()), self.columns()).withColumn("tomb", F.lit(False))

    def columns(self) -> list[str]:
        """The row's columns, ``key`` first and ``tomb`` last."""
        return [field.split()[0] for field in self.schema.split(",")]


def _newest(layers: list[DataFrame], columns: list[str]) -> DataFrame:
    """Each key's row from the newest of ``layers`` (tagged with their index) that holds it."""
    if len(layers) == 1:
        return layers[0]
    union = layers[0]
    for layer in layers[1:]:
        union = union.unionByName(layer)
    values = [c for c in columns if c != "key"] + [_LAYER]
    newest = F.max_by(F.struct(*values), F.col(_LAYER)).alias("__row")
    return union.groupBy("key").agg(newest).select("key", *[F.col(f"__row.{c}").alias(c) for c in values])


def _live(rows: DataFrame, columns: list[str]) -> DataFrame:
    return rows.filter(~F.coalesce(F.col("tomb"), F.lit(False))).select(*[c for c in columns if c != "tomb"])
