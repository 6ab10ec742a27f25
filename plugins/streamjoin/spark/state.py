"""Join state carried between micro-batches, versioned by batch id next to the query's checkpoint.

Batch ``n`` reads the newest committed version older than ``n`` and writes version ``n``. A batch that
Spark replays after a crash (same id) therefore starts from the same state and overwrites its own
version: the state is exactly-once even though the Kafka sink is at-least-once.

Each state of a version is one Parquet dataset, ``v=<n>/<name>``. A state the batch did not change (the
very frame :meth:`StateStore.load` returned) is not written again: ``v=<n>/<name>.ref`` names the dataset
that holds it, so a table that no record of the batch touched costs nothing to carry. The ``small``
states (a few rows per partition, such as clocks) are collected and kept as ``v=<n>/<name>.json``: a
Parquet write costs a Spark job, a tenth of a second or more.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from streamjoin.spark.local_frames import local_frame

_COMMITTED = "_COMMITTED"
_REF = ".ref"


class StateStore:
    def __init__(self, root: str | Path, keep: int = 3, small: Iterable[str] = ()) -> None:
        self.root = Path(root)
        self.keep = keep
        self.small = frozenset(small)
        #: name -> (frame handed out by the last load, dataset it was read from, relative to ``root``)
        self._loaded: dict[str, tuple[DataFrame, str]] = {}

    def _versions(self) -> list[int]:
        if not self.root.exists():
            return []
        return sorted(int(p.name.split("=", 1)[1]) for p in self.root.glob("v=*") if (p / _COMMITTED).exists())

    def _dataset(self, version: int, name: str) -> str:
        """Where state ``name`` of ``version`` is stored, relative to the root (following a reference)."""
        ref = self.root / f"v={version}" / f"{name}{_REF}"
        return ref.read_text().strip() if ref.exists() else f"v={version}/{name}"

    def load(self, spark: SparkSession, batch_id: int, schemas: dict[str, str]) -> dict[str, DataFrame]:
        """State as of the end of the newest committed batch before ``batch_id`` (empty if none)."""
        self._loaded = {}
        older = [v for v in self._versions() if v < batch_id]
        if not older:
            return {name: local_frame(spark, [], schema) for name, schema in schemas.items()}
        frames = {}
        for name, schema in schemas.items():
            if name in self.small:
                rows = json.loads((self.root / f"v={older[-1]}" / f"{name}.json").read_text())
                frames[name] = local_frame(spark, rows, schema)
                continue
            dataset = self._dataset(older[-1], name)
            frames[name] = spark.read.schema(schema).parquet(str(self.root / dataset))
            self._loaded[name] = (frames[name], dataset)
        return frames

    def latest_small(self, name: str) -> list[dict[str, Any]]:
        """The rows of small state ``name`` in the newest committed version (none yet: no rows)."""
        versions = self._versions()
        path = self.root / f"v={versions[-1]}" / f"{name}.json" if versions else None
        return json.loads(path.read_text()) if path is not None and path.exists() else []

    def save(self, batch_id: int, states: dict[str, DataFrame]) -> None:
        target = self.root / f"v={batch_id}"
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        for name, frame in states.items():
            loaded = self._loaded.get(name)
            if name in self.small:
                (target / f"{name}.json").write_text(json.dumps([row.asDict() for row in frame.collect()]))
            elif loaded is not None and loaded[0] is frame:
                (target / f"{name}{_REF}").write_text(loaded[1])
            else:
                # no coalesce(1): it would run the whole computation of the state in one task
                frame.write.mode("overwrite").parquet(str(target / name))
        (target / _COMMITTED).write_text(str(batch_id))
        self._prune()

    def _prune(self) -> None:
        """Keep the newest ``keep`` versions, and the older datasets they refer to."""
        kept = self._versions()[-self.keep :]
        referenced = {ref.read_text().strip() for v in kept for ref in (self.root / f"v={v}").glob(f"*{_REF}")}
        for directory in self.root.glob("v=*"):
            if int(directory.name.split("=", 1)[1]) >= kept[0]:
                continue
            (directory / _COMMITTED).unlink(missing_ok=True)  # first: a half-pruned version is never loaded
            for entry in directory.iterdir():
                if f"{directory.name}/{entry.name}" not in referenced:
                    shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
            if not any(directory.iterdir()):
                directory.rmdir()
