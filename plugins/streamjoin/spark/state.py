"""Join state carried between micro-batches, versioned by batch id next to the query's checkpoint.

Batch ``n`` reads the newest committed version older than ``n`` and writes version ``n``. A batch that
Spark replays after a crash (same id) therefore starts from the same state and overwrites its own
version: the state is exactly-once even though the Kafka sink is at-least-once. All states of a version
are written as one Parquet dataset of ``(kind, row JSON)`` rows: one Spark job per batch, whatever the
shape carries.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

_COMMITTED = "_COMMITTED"


class StateStore:
    def __init__(self, root: str | Path, keep: int = 3) -> None:
        self.root = Path(root)
        self.keep = keep

    def _versions(self) -> list[int]:
        if not self.root.exists():
            return []
        return sorted(int(p.name.split("=", 1)[1]) for p in self.root.glob("v=*") if (p / _COMMITTED).exists())

    def load(self, spark: SparkSession, batch_id: int, schemas: dict[str, str]) -> dict[str, DataFrame]:
        """State as of the end of the newest committed batch before ``batch_id`` (empty if none)."""
        older = [v for v in self._versions() if v < batch_id]
        if not older:
            return {name: spark.createDataFrame([], schema) for name, schema in schemas.items()}
        rows = spark.read.schema("kind string, row string").parquet(str(self.root / f"v={older[-1]}" / "state"))
        return {
            name: rows.filter(F.col("kind") == name).select(F.from_json("row", schema).alias("r")).select("r.*")
            for name, schema in schemas.items()
        }

    def save(self, batch_id: int, states: dict[str, DataFrame]) -> None:
        target = self.root / f"v={batch_id}"
        if target.exists():
            shutil.rmtree(target)
        frames = [
            frame.select(F.lit(name).alias("kind"), F.to_json(F.struct(*frame.columns)).alias("row"))
            for name, frame in states.items()
        ]
        rows = frames[0]
        for frame in frames[1:]:
            rows = rows.unionByName(frame)
        rows.coalesce(1).write.mode("overwrite").parquet(str(target / "state"))
        (target / _COMMITTED).write_text(str(batch_id))
        for old in self._versions()[: -self.keep]:
            shutil.rmtree(self.root / f"v={old}", ignore_errors=True)
