"""A pipeline's state between micro-batches: the engine kernel's stores in Spark's state store under
``<root>/kernel``, and one manifest per batch beside them, ``<root>/v=<n>/_COMMITTED``.

Batch ``n`` starts from the newest committed version older than ``n`` (:meth:`StateStore.load`): the
kernel's tasks read store version ``v + 1`` of batch ``v`` and commit version ``n + 1`` themselves. A
batch that runs again after a crash (same id) starts from the same version and overwrites its own: the
state is exactly once even when the Kafka sink is at least once.

The manifest is written last and lists the store files the batch committed with their size and checksum
(CRC-32 locally, the filesystem's own on HDFS), and each input partition's time (the largest timestamp
processed, the job's watermarks). :meth:`StateStore.verify` checks the files before a job starts from the
version, so a truncated, corrupt or missing file stops the job with a message naming it instead of a batch
failing later, or a job starting over from an empty state. A failed batch writes no manifest: the version
does not exist, and the previous version and the offset log are unchanged.

The root is a local folder or any Hadoop-compatible filesystem (:mod:`streamjoin.core.storage`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from streamjoin.core.errors import CorruptCheckpointError, StateLayoutError
from streamjoin.core.storage import FileFacts, LocalStorage, Storage, join

_COMMITTED = "_COMMITTED"
#: where the kernel's stores live under a state root (Spark's layout below it)
KERNEL_DIR = "kernel"
#: (topic, partition) -> the largest timestamp processed
PartitionTime = dict[tuple[str, int], int]


@dataclass(frozen=True)
class KernelCheckpoint:
    """Where a batch's kernel tasks find their stores: they read ``version`` under ``root`` and commit
    ``version + 1``. ``root`` None: a fresh state in a temporary folder (a batch run without a store)."""

    root: str | None
    version: int = 0


@dataclass(frozen=True)
class KernelCommit:
    """What a batch's kernel tasks committed in Spark's state store: the files of the new store version,
    relative to the state root, which :meth:`StateStore.save` lists in the batch's manifest."""

    files: tuple[str, ...]
    #: every input partition's time after the batch
    partition_time: PartitionTime = field(default_factory=dict)


class StateStore:
    """The state versions of one pipeline under ``root`` (a local path or a Hadoop filesystem URI)."""

    def __init__(self, root: Any, storage: Storage | None = None, keep: int = 3, pipeline: str = "") -> None:
        self.root = str(root)
        self.storage: Storage = storage or LocalStorage()
        self.keep = keep
        #: named in the error that refuses a state of an earlier release
        self.pipeline = pipeline

    def _at(self, *parts: str) -> str:
        return join(self.root, *parts)

    def _versions(self) -> list[int]:
        return sorted(
            int(name.split("=", 1)[1])
            for name in self.storage.children(self.root)
            if name.startswith("v=") and self.storage.exists(self._at(name, _COMMITTED))
        )

    def load(self, batch_id: int) -> KernelCheckpoint:
        """The stores as of the end of the newest committed batch before ``batch_id`` (none: version 0).

        :raises StateLayoutError: the version was written by the DataFrame engine of an earlier release
        """
        older = [v for v in self._versions() if v < batch_id]
        if not older:
            return KernelCheckpoint(self._at(KERNEL_DIR), 0)
        self._check_layout(older[-1])
        return KernelCheckpoint(self._at(KERNEL_DIR), older[-1] + 1)

    def _manifest(self, version: int) -> dict[str, Any]:
        marker = self._at(f"v={version}", _COMMITTED)
        try:
            manifest = json.loads(self.storage.read_text(marker) or "")
        except (OSError, ValueError) as exc:
            raise CorruptCheckpointError(marker, f"unreadable state manifest ({exc})") from exc
        return manifest if isinstance(manifest, dict) else {}

    def _check_layout(self, version: int) -> None:
        """Refuse a version whose states are files of the DataFrame engine (releases before the kernel held
        every shape): the kernel would start from an empty state, the tables lost without a word."""
        manifest = self._manifest(version)
        listed = manifest.get("states")
        if listed is None:  # written before manifests listed their states: its entries name them
            entries = self.storage.children(self._at(f"v={version}"))
            listed = sorted({_state_name(e) for e in entries if not e.startswith((".", "_"))})
        if listed:
            raise StateLayoutError(self.root, version, self.pipeline, listed)

    def verify(self, at_least: int | None = None) -> int | None:
        """Check the newest version (the one the next batch starts from) file by file against its manifest;
        returns it (None: no state yet).

        :param at_least: the newest batch the offset log says is committed: its state must be there
        :raises CorruptCheckpointError: naming the missing, truncated or corrupt file
        :raises StateLayoutError: the version was written by the DataFrame engine of an earlier release
        """
        versions = self._versions()
        newest = versions[-1] if versions else None
        if at_least is not None and (newest is None or newest < at_least):
            raise CorruptCheckpointError(
                self._at(f"v={at_least}"),
                f"batch {at_least} is committed but its state version is missing (newest: {newest}); the job "
                "will not start from an older or empty state: restore the checkpoint or move it aside",
            )
        if newest is None:
            return None
        self._check_layout(newest)
        for relative, (size, checksum) in self._files_of(newest).items():
            path = self._at(relative)
            facts = self.storage.facts(path)
            if facts is None:
                raise CorruptCheckpointError(path, f"state file missing (version {newest})")
            if facts[0] != size:
                raise CorruptCheckpointError(
                    path, f"state file truncated or changed: {facts[0]} bytes, expected {size}"
                )
            if checksum is not None and facts[1] != checksum:
                raise CorruptCheckpointError(path, "state file corrupt: its checksum differs from the one written")
        return newest

    def _files_of(self, version: int) -> dict[str, FileFacts]:
        files = self._manifest(version).get("files", {})
        return {path: (int(size), checksum) for path, (size, checksum) in files.items()}

    def partition_time(self) -> PartitionTime:
        """Every input partition's time as the newest committed version has it (none yet: empty)."""
        versions = self._versions()
        if not versions:
            return {}
        rows = self._manifest(versions[-1]).get("partition_time", [])
        return {(topic, int(partition)): int(ts) for topic, partition, ts in rows}

    def save(self, batch_id: int, commit: KernelCommit) -> int:
        """Write version ``batch_id``'s manifest; returns the size in bytes of the store files it lists."""
        target = self._at(f"v={batch_id}")
        self.storage.delete(target)  # a batch run again rewrites its version
        self.storage.mkdirs(target)
        files = {path: facts for path in commit.files if (facts := self.storage.facts(self._at(path))) is not None}
        times = sorted([topic, partition, ts] for (topic, partition), ts in commit.partition_time.items())
        manifest = {"batch": batch_id, "states": [], "files": files, "partition_time": times}
        self.storage.write_text(join(target, _COMMITTED), json.dumps(manifest))
        self._prune()
        return sum(size for size, _ in files.values())

    def _prune(self) -> None:
        """Keep the newest ``keep`` versions (Spark's state store keeps its own files)."""
        kept = self._versions()[-self.keep :]
        for directory in self.storage.children(self.root):
            if directory.startswith("v=") and int(directory.split("=", 1)[1]) < kept[0]:
                self.storage.delete(self._at(directory, _COMMITTED))  # first: a half-pruned version is never loaded
                self.storage.delete(self._at(directory))


def _state_name(entry: str) -> str:
    """The DataFrame engine's state an entry of a version folder held (``order.json``, ``table.layers``,
    ``table-0``, ``agg.ref``: order, table, table, agg)."""
    base = entry.split(".", 1)[0]
    name, _, index = base.rpartition("-")
    return name if name and index.isdigit() else base
