"""Join state carried between micro-batches, versioned by batch id next to the query's checkpoint.

Batch ``n`` reads the newest committed version older than ``n`` and writes version ``n``. A batch that
Spark replays after a crash (same id) therefore starts from the same state and overwrites its own
version: the state is exactly-once even though the Kafka sink is at-least-once.

Each state of a version is one Parquet dataset, ``v=<n>/<name>``. A state the batch did not change (the
very frame :meth:`StateStore.load` returned) is not written again: ``v=<n>/<name>.ref`` names the dataset
that holds it, so a table that no record of the batch touched costs nothing to carry. The ``small``
states (a few rows per partition, such as clocks) are collected and kept as ``v=<n>/<name>.json``: a
Parquet write costs a Spark job, a tenth of a second or more.

A ``layered`` state (a :class:`~streamjoin.spark.layers.KeyedLayers` table) is a list of datasets,
``v=<n>/<name>.layers``: a version writes only the layer its batch added, and merges all layers into one
when there are more than ``MAX_LAYERS`` or the newer layers outweigh the oldest. The layers' frames stay
cached across batches (their datasets never change once committed).

The root is a local folder or any Hadoop-compatible filesystem (:mod:`streamjoin.core.storage`).
``v=<n>/_COMMITTED`` is written last and lists every file of the version with its size and checksum
(CRC-32 locally, the filesystem's own checksum on HDFS):
:meth:`StateStore.verify` checks them before a job starts from the version, so a
truncated, corrupt or missing file stops the job with a message naming it instead of a batch failing
later, or a job starting over from an empty state. A failed write (a full disk) leaves no ``_COMMITTED``:
the version does not exist, the batch fails, and the previous version and the offset log are unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from streamjoin.core.errors import CorruptCheckpointError, StateLayoutError
from streamjoin.core.storage import FileFacts, LocalStorage, Storage, join
from streamjoin.spark.layers import KeyedLayers
from streamjoin.spark.local_frames import local_frame

_COMMITTED = "_COMMITTED"
#: where the kernel's stores live under a state root (Spark's layout below it)
KERNEL_DIR = "kernel"
_REF = ".ref"
_LAYERS = ".layers"
#: a layered state with more layers than this is merged into one
MAX_LAYERS = 8


@dataclass(frozen=True)
class KernelCheckpoint:
    """A state the engine kernel keeps in Spark's state store (``streamjoin.spark.kernel``): its tasks read
    ``version`` under ``root`` and commit ``version + 1`` themselves, so :meth:`StateStore.save` writes
    nothing for it. Version ``v + 1`` is what the batch saved as version ``v`` committed; ``root`` None: a
    fresh state in a temporary folder (a batch run without a store)."""

    root: str | None
    version: int = 0


@dataclass(frozen=True)
class KernelCommit:
    """What a batch's kernel tasks committed in Spark's state store: the files of the new store version,
    relative to the state root. :meth:`StateStore.save` lists them in the batch's manifest, so a damaged or
    missing one stops the next start (:meth:`StateStore.verify`) as a damaged state file does."""

    files: tuple[str, ...]


def empty_states(
    spark: SparkSession, schemas: dict[str, str], layered: Iterable[str], kernel: Iterable[str] = ()
) -> dict[str, Any]:
    """Every state before a pipeline's first batch: an empty frame each, no layers for a layered one."""
    return {
        name: KernelCheckpoint(None) if name in kernel
        else KeyedLayers(schema) if name in layered
        else local_frame(spark, [], schema)
        for name, schema in schemas.items()
    }  # fmt: skip


class StateStore:
    """The state versions under ``root`` (a local path or a Hadoop filesystem URI, see ``storage``)."""

    def __init__(
        self,
        root: Any,
        storage: Storage | None = None,
        keep: int = 3,
        small: Iterable[str] = (),
        layered: Iterable[str] = (),
        kernel: Iterable[str] = (),
    ) -> None:
        self.root = str(root)
        self.storage: Storage = storage or LocalStorage()
        self.keep = keep
        self.small = frozenset(small)
        self.layered = frozenset(layered)
        #: states the kernel's tasks commit in Spark's state store under ``<root>/kernel``
        self.kernel = frozenset(kernel)
        #: dataset (relative to ``root``) -> its cached frame, for the layers of the layered states
        self._layer_frames: dict[str, DataFrame] = {}
        #: name -> (frame handed out by the last load, dataset it was read from, relative to ``root``)
        self._loaded: dict[str, tuple[DataFrame, str]] = {}
        #: the version the last load read (its manifest lists the datasets a new version refers to)
        self._loaded_version: int | None = None

    def _at(self, *parts: str) -> str:
        return join(self.root, *parts)

    def _versions(self) -> list[int]:
        return sorted(
            int(name.split("=", 1)[1])
            for name in self.storage.children(self.root)
            if name.startswith("v=") and self.storage.exists(self._at(name, _COMMITTED))
        )

    def _dataset(self, version: int, name: str) -> str:
        """Where state ``name`` of ``version`` is stored, relative to the root (following a reference)."""
        ref = self.storage.read_text(self._at(f"v={version}", f"{name}{_REF}"))
        return ref.strip() if ref is not None else f"v={version}/{name}"

    def _layers(self, version: int, name: str) -> list[str]:
        """The datasets of layered state ``name`` in ``version``, oldest first (relative to the root)."""
        path = self._at(f"v={version}", f"{name}{_LAYERS}")
        text = self.storage.read_text(path)
        if text is not None:
            return list(json.loads(text))
        single = self._dataset(version, name)  # written before the state was layered: one dataset, no tomb column
        if self.storage.exists(self._at(single)):
            return [single]
        raise CorruptCheckpointError(path, f"state file missing (version {version})")

    def _layer(self, spark: SparkSession, dataset: str, schema: str) -> DataFrame:
        if dataset not in self._layer_frames:
            frame = spark.read.schema(schema).parquet(self._at(dataset))
            self._layer_frames[dataset] = frame.persist(StorageLevel.MEMORY_AND_DISK)
        return self._layer_frames[dataset]

    def _small(self, version: int, name: str) -> list[dict[str, Any]]:
        path = self._at(f"v={version}", f"{name}.json")
        text = self.storage.read_text(path)
        if text is None:
            raise CorruptCheckpointError(path, f"state file missing (version {version})")
        return list(json.loads(text))

    def load(self, spark: SparkSession, batch_id: int, schemas: dict[str, str]) -> dict[str, Any]:
        """State as of the end of the newest committed batch before ``batch_id`` (empty if none): a
        DataFrame per state, a :class:`KeyedLayers` per layered state."""
        self._loaded = {}
        older = [v for v in self._versions() if v < batch_id]
        kernel_root = self._at(KERNEL_DIR)
        if not older:
            empty = empty_states(spark, schemas, self.layered, self.kernel)
            return empty | {name: KernelCheckpoint(kernel_root, 0) for name in self.kernel & set(schemas)}
        self._check_layout(older[-1], schemas)
        frames: dict[str, Any] = {}
        self._loaded_version = older[-1]
        for name, schema in schemas.items():
            if name in self.kernel:
                frames[name] = KernelCheckpoint(kernel_root, older[-1] + 1)
                continue
            if name in self.layered:
                datasets = self._layers(older[-1], name)
                frames[name] = KeyedLayers(schema, tuple(self._layer(spark, d, schema) for d in datasets))
                continue
            if name in self.small:
                frames[name] = local_frame(spark, self._small(older[-1], name), schema)
                continue
            dataset = self._dataset(older[-1], name)
            frames[name] = spark.read.schema(schema).parquet(self._at(dataset))
            self._loaded[name] = (frames[name], dataset)
        return frames

    def _check_layout(self, version: int, schemas: dict[str, str]) -> None:
        """Refuse a version that holds other states than ``schemas``: see :class:`StateLayoutError`."""
        marker = self._at(f"v={version}", _COMMITTED)
        try:
            listed = json.loads(self.storage.read_text(marker) or "{}").get("states")
        except (ValueError, AttributeError) as exc:
            raise CorruptCheckpointError(marker, f"unreadable state manifest ({exc})") from exc
        if listed is None:  # written before manifests listed their states: its entries name them
            entries = {e for e in self.storage.children(self._at(f"v={version}")) if not e.startswith((".", "_"))}
            layered = {e.removesuffix(_LAYERS) for e in entries if e.endswith(_LAYERS)}
            found = {_state_name(e, layered) for e in entries}
        else:
            found = set(listed)
        expected = set(schemas) - self.kernel  # the kernel's tasks keep theirs in Spark's state store
        if found != expected:
            from streamjoin.spark.kernel import engine

            raise StateLayoutError(self.root, version, found, expected, engine())

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
                self._at(f"v={at_least}"),
                f"batch {at_least} is committed but its state version is missing (newest: {newest}); the job "
                "will not start from an older or empty state: restore the checkpoint or move it aside",
            )
        if newest is None:
            return None
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
        """The manifest of ``version`` (empty for a version written before manifests)."""
        marker = self._at(f"v={version}", _COMMITTED)
        try:
            manifest = json.loads(self.storage.read_text(marker) or "")
        except (OSError, ValueError) as exc:
            raise CorruptCheckpointError(marker, f"unreadable state manifest ({exc})") from exc
        if not isinstance(manifest, dict):
            return {}
        return {path: (int(size), checksum) for path, (size, checksum) in manifest["files"].items()}

    def latest_small(self, name: str) -> list[dict[str, Any]]:
        """The rows of small state ``name`` in the newest committed version (none yet: no rows)."""
        versions = self._versions()
        text = self.storage.read_text(self._at(f"v={versions[-1]}", f"{name}.json")) if versions else None
        return json.loads(text) if text is not None else []

    def save(self, batch_id: int, states: dict[str, Any]) -> int:
        """Write version ``batch_id``; returns its size in bytes (the files its manifest lists)."""
        version = f"v={batch_id}"
        target = self._at(version)
        self._forget(lambda dataset: dataset.startswith(f"{version}/"))  # a replayed batch rewrites its version
        self.storage.delete(target)
        self.storage.mkdirs(target)
        refs: list[str] = []
        kernel_files: list[str] = []
        for name, frame in states.items():
            if name in self.kernel:  # committed by the kernel's tasks as version batch_id + 1
                kernel_files += frame.files if isinstance(frame, KernelCommit) else ()
                continue
            loaded = self._loaded.get(name)
            if isinstance(frame, KeyedLayers):
                datasets = self._save_layers(version, name, frame)
                self.storage.write_text(join(target, f"{name}{_LAYERS}"), json.dumps(datasets))
                refs += [d for d in datasets if not d.startswith(f"{version}/")]
            elif name in self.small:
                rows = [row.asDict() for row in frame.collect()]
                self.storage.write_text(join(target, f"{name}.json"), json.dumps(rows))
            elif loaded is not None and loaded[0] is frame:
                self.storage.write_text(join(target, f"{name}{_REF}"), loaded[1])
                refs.append(loaded[1])
            else:
                # no coalesce(1): it would run the whole computation of the state in one task
                frame.write.mode("overwrite").parquet(join(target, name))
        files = {
            f"{version}/{relative}": facts
            for relative, facts in self.storage.files(target).items()
            if not relative.rsplit("/", 1)[-1].startswith(".")  # Spark's .crc files and our temporary ones
        }
        files |= {path: facts for path in kernel_files if (facts := self.storage.facts(self._at(path))) is not None}
        if refs and self._loaded_version is not None:  # a referenced dataset's files, as the loaded version lists them
            listed = self._files_of(self._loaded_version)
            files |= {path: entry for path, entry in listed.items() if any(path.startswith(f"{d}/") for d in refs)}
        manifest = {"batch": batch_id, "states": sorted(set(states) - self.kernel), "files": files}
        self.storage.write_text(join(target, _COMMITTED), json.dumps(manifest))
        self._prune()
        return sum(size for size, _ in files.values())

    def _save_layers(self, version: str, name: str, table: KeyedLayers) -> list[str]:
        """Write the layers of ``table`` that no version holds yet; merge all into one when they are too
        many or the newer ones outweigh the oldest. Returns the datasets of the new version."""
        known = {id(frame): dataset for dataset, frame in self._layer_frames.items()}
        datasets = []
        for index, frame in enumerate(table.layers):
            dataset = known.get(id(frame))
            if dataset is None:
                dataset = f"{version}/{name}-{index}"
                frame.write.mode("overwrite").parquet(self._at(dataset))
            datasets.append(dataset)
        listed = self._files_of(self._loaded_version) if self._loaded_version is not None else {}
        sizes = [sum(size for size, _ in self._dataset_files(d, listed).values()) for d in datasets]
        if len(datasets) > MAX_LAYERS or (len(datasets) > 1 and sum(sizes[1:]) > sizes[0]):
            spark = table.layers[0].sparkSession
            stored = KeyedLayers(table.schema, tuple(self._layer(spark, d, table.schema) for d in datasets))
            merged = f"{version}/{name}"
            stored.merged().write.mode("overwrite").parquet(self._at(merged))
            self._forget(lambda dataset: dataset.startswith(f"{version}/{name}-"))
            for dataset in datasets:
                if dataset.startswith(f"{version}/"):
                    self.storage.delete(self._at(dataset))
            datasets = [merged]
        return datasets

    def _dataset_files(self, dataset: str, listed: dict[str, FileFacts]) -> dict[str, FileFacts]:
        """The files of ``dataset`` (relative to the root): as the manifest ``listed`` has them, else as stored."""
        prefix = f"{dataset}/"
        known = {p: f for p, f in listed.items() if p.startswith(prefix)}
        if known:
            return known
        return {
            prefix + relative: facts
            for relative, facts in self.storage.files(self._at(dataset)).items()
            if not relative.rsplit("/", 1)[-1].startswith(".")
        }

    def close(self) -> None:
        """Unpersist every cached layer: a store that is done with must not keep the JVM's memory."""
        self._forget(lambda dataset: True)

    def _forget(self, stale: Callable[[str], bool]) -> None:
        """Unpersist and drop the cached layer frames whose dataset ``stale(dataset)`` says is gone."""
        for dataset in [d for d in self._layer_frames if stale(d)]:
            self._layer_frames.pop(dataset).unpersist()

    def _referenced(self, version: int) -> set[str]:
        """The datasets ``version`` reads through ``.ref`` files and layer lists (its own layers too)."""
        referenced: set[str] = set()
        for entry in self.storage.children(self._at(f"v={version}")):
            if entry.endswith(_REF):
                referenced.add((self.storage.read_text(self._at(f"v={version}", entry)) or "").strip())
            elif entry.endswith(_LAYERS):
                referenced.update(self._layers(version, entry[: -len(_LAYERS)]))
        return referenced

    def _prune(self) -> None:
        """Keep the newest ``keep`` versions, and the older datasets they refer to."""
        kept = self._versions()[-self.keep :]
        reads = {v: self._referenced(v) for v in kept}
        referenced = set().union(*reads.values())
        self._forget(lambda dataset: dataset not in reads[kept[-1]])  # layers the next batch will not read
        for directory in self.storage.children(self.root):
            if not directory.startswith("v=") or int(directory.split("=", 1)[1]) >= kept[0]:
                continue
            self.storage.delete(self._at(directory, _COMMITTED))  # first: a half-pruned version is never loaded
            entries = self.storage.children(self._at(directory))
            for entry in entries:
                if f"{directory}/{entry}" not in referenced:
                    self.storage.delete(self._at(directory, entry))
            if all(f"{directory}/{entry}" not in referenced for entry in entries):
                self.storage.delete(self._at(directory))


def _state_name(entry: str, layered: set[str]) -> str:
    """The state an entry of a version folder belongs to (``agg``, ``order.json``, ``table.layers``,
    ``table-0``, ``agg.ref``)."""
    base, _, index = entry.rpartition("-")
    if base in layered and index.isdigit():
        return base
    return entry.removesuffix(".json").removesuffix(_REF).removesuffix(_LAYERS)
