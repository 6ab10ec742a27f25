"""Join state carried between micro-batches, versioned by batch id next to the query's checkpoint.

Batch ``n`` reads the newest committed version older than ``n`` and writes version ``n``. A batch that
Spark replays after a crash (same id) therefore starts from the same state and overwrites its own
version: the state is exactly-once even though the Kafka sink is at-least-once.

Each state of a version is one Parquet dataset, ``v=<n>/<name>``. A state the batch did not change (the
very frame :meth:`StateStore.load` returned) is not written again: ``v=<n>/<name>.ref`` names the dataset
that holds it, so a table that no record of the batch touched costs nothing to carry. The ``small``
states (a few rows per partition, such as clocks) are collected and kept as ``v=<n>/<name>.json``: a
Parquet write costs a Spark job, a tenth of a second or more.

``v=<n>/_COMMITTED`` is written last and lists every file of the version with its size and CRC-32:
:meth:`StateStore.verify` checks them before a job starts from the version, so a
truncated, corrupt or missing file stops the job with a message naming it instead of a batch failing
later, or a job starting over from an empty state. A failed write (a full disk) leaves no ``_COMMITTED``:
the version does not exist, the batch fails, and the previous version and the offset log are unchanged.
"""

from __future__ import annotations

import json
import shutil
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from streamjoin.core.errors import CorruptCheckpointError
from streamjoin.spark.local_frames import local_frame

_COMMITTED = "_COMMITTED"
_REF = ".ref"


def _crc(path: Path) -> int:
    crc = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


def _manifest(root: Path, directory: Path) -> dict[str, list[int]]:
    """Every file under ``directory`` (Spark's hidden ``.crc`` files aside): path relative to ``root`` ->
    [size, CRC-32]."""
    return {
        f.relative_to(root).as_posix(): [f.stat().st_size, _crc(f)]
        for f in sorted(directory.rglob("*"))
        if f.is_file() and not f.name.startswith(".") and f.name != _COMMITTED
    }


class StateStore:
    def __init__(self, root: str | Path, keep: int = 3, small: Iterable[str] = ()) -> None:
        self.root = Path(root)
        self.keep = keep
        self.small = frozenset(small)
        #: name -> (frame handed out by the last load, dataset it was read from, relative to ``root``)
        self._loaded: dict[str, tuple[DataFrame, str]] = {}
        #: the version the last load read (its manifest lists the datasets a new version refers to)
        self._loaded_version: int | None = None

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
        self._loaded_version = older[-1]
        for name, schema in schemas.items():
            if name in self.small:
                rows = json.loads((self.root / f"v={older[-1]}" / f"{name}.json").read_text())
                frames[name] = local_frame(spark, rows, schema)
                continue
            dataset = self._dataset(older[-1], name)
            frames[name] = spark.read.schema(schema).parquet(str(self.root / dataset))
            self._loaded[name] = (frames[name], dataset)
        return frames

    def verify(self, at_least: int | None = None) -> int | None:
        """Check the newest version (the one the next batch starts from) file by file against its manifest;
        returns it (None: no state yet).

        :param at_least: the newest batch the offset log says is committed: its state must be there
        :raises CorruptCheckpointError: naming the missing, truncated or corrupt file
        """
        versions = self._versions()
        newest = versions[-1] if versions else None
        if at_least is not None and (newest is None or newest < at_least):
            raise CorruptCheckpointError(
                self.root / f"v={at_least}",
                f"batch {at_least} is committed but its state version is missing (newest: {newest}); the job "
                "will not start from an older or empty state: restore the checkpoint or move it aside",
            )
        if newest is None:
            return None
        for relative, (size, crc) in self._files_of(newest).items():
            path = self.root / relative
            if not path.is_file():
                raise CorruptCheckpointError(path, f"state file missing (version {newest})")
            if path.stat().st_size != size:
                raise CorruptCheckpointError(
                    path, f"state file truncated or changed: {path.stat().st_size} bytes, expected {size}"
                )
            if _crc(path) != crc:
                raise CorruptCheckpointError(path, "state file corrupt: its CRC-32 differs from the one written")
        return newest

    def _files_of(self, version: int) -> dict[str, list[int]]:
        """The manifest of ``version`` (empty for a version written before manifests)."""
        marker = self.root / f"v={version}" / _COMMITTED
        try:
            text = marker.read_text()
            manifest = json.loads(text)
        except (OSError, ValueError) as exc:
            raise CorruptCheckpointError(marker, f"unreadable state manifest ({exc})") from exc
        return dict(manifest["files"]) if isinstance(manifest, dict) else {}

    def latest_small(self, name: str) -> list[dict[str, Any]]:
        """The rows of small state ``name`` in the newest committed version (none yet: no rows)."""
        versions = self._versions()
        path = self.root / f"v={versions[-1]}" / f"{name}.json" if versions else None
        return json.loads(path.read_text()) if path is not None and path.exists() else []

    def save(self, batch_id: int, states: dict[str, DataFrame]) -> int:
        """Write version ``batch_id``; returns its size on disk in bytes (the files its manifest lists)."""
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
        files = _manifest(self.root, target)
        refs = [ref.read_text().strip() for ref in target.glob(f"*{_REF}")]
        if refs and self._loaded_version is not None:  # a referenced dataset's files, as the loaded version lists them
            listed = self._files_of(self._loaded_version)
            files |= {path: entry for path, entry in listed.items() if any(path.startswith(f"{d}/") for d in refs)}
        (target / _COMMITTED).write_text(json.dumps({"batch": batch_id, "files": files}))
        self._prune()
        return sum(size for size, _ in files.values())

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
