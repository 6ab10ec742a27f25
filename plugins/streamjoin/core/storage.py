"""Where the job keeps what must outlive its driver (offset log, lease, state versions and manifests): a
local folder, or any Hadoop-compatible filesystem (``hdfs://``, ``s3a://``, ...) through Spark's JVM
(:class:`streamjoin.spark.hadoop_storage.HadoopStorage`).

:class:`Storage` is the handful of operations the job needs, each with the atomicity it relies on:
``write_text`` replaces a file whole (a reader sees the old or the new text), ``create_new`` creates a
file only if none exists (of two drivers, one wins). Paths are strings: local paths or URIs.
"""

from __future__ import annotations

import os
import shutil
import threading
import zlib
from pathlib import Path
from typing import Protocol
from urllib.parse import urlparse

#: (size in bytes, checksum: CRC-32 here, the filesystem's own checksum elsewhere, None if it has none)
FileFacts = tuple[int, "int | str | None"]


def join(base: str, *parts: str) -> str:
    """``base/part/...`` for local paths and URIs alike."""
    return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts)])


def is_local(location: str) -> bool:
    """A plain path or a ``file:`` URI (not ``hdfs://``, ``s3a://``, ...)."""
    return urlparse(location).scheme in ("", "file")


def local_path(location: str) -> Path:
    """The local path of a plain path or ``file:`` URI."""
    parsed = urlparse(location)
    return Path(parsed.path) if parsed.scheme == "file" else Path(location)


class Storage(Protocol):
    def read_text(self, path: str) -> str | None:
        """The file's text; None if it does not exist."""

    def write_text(self, path: str, text: str) -> None:
        """Replace the file whole (parents created): a reader sees the old text or the new, never a part."""

    def create_new(self, path: str, text: str) -> bool:
        """Create the file with ``text`` unless it exists (atomic); False if it existed."""

    def children(self, path: str) -> list[str]:
        """Names in the folder (none if it does not exist)."""

    def exists(self, path: str) -> bool: ...

    def delete(self, path: str) -> None:
        """Remove a file or a folder with its content; nothing if it does not exist."""

    def rename(self, source: str, target: str) -> None:
        """Move ``source`` to ``target``, which must not exist."""

    def mkdirs(self, path: str) -> None: ...

    def facts(self, path: str) -> FileFacts | None:
        """Size and checksum of a file; None if it does not exist."""

    def files(self, path: str) -> dict[str, FileFacts]:
        """Every file under the folder, by path relative to it."""


def _crc(path: Path) -> int:
    crc = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


def write_text_atomic(path: Path, text: str) -> None:
    """Write a temporary file beside ``path`` and rename it over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    partial.write_text(text)
    partial.replace(path)


class LocalStorage:
    """:class:`Storage` on this machine's filesystem (``file:`` URIs or plain paths)."""

    def read_text(self, path: str) -> str | None:
        try:
            return local_path(path).read_text()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def write_text(self, path: str, text: str) -> None:
        write_text_atomic(local_path(path), text)

    def create_new(self, path: str, text: str) -> bool:
        target = local_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        staged = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.new")
        staged.write_text(text)
        try:
            os.link(staged, target)  # a hard link of a complete file: fails if the target exists
        except FileExistsError:
            return False
        finally:
            staged.unlink(missing_ok=True)
        return True

    def children(self, path: str) -> list[str]:
        folder = local_path(path)
        return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []

    def exists(self, path: str) -> bool:
        return local_path(path).exists()

    def delete(self, path: str) -> None:
        target = local_path(path)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target, ignore_errors=True)
        else:
            target.unlink(missing_ok=True)

    def rename(self, source: str, target: str) -> None:
        local_path(source).rename(local_path(target))

    def mkdirs(self, path: str) -> None:
        local_path(path).mkdir(parents=True, exist_ok=True)

    def facts(self, path: str) -> FileFacts | None:
        target = local_path(path)
        return (target.stat().st_size, _crc(target)) if target.is_file() else None

    def files(self, path: str) -> dict[str, FileFacts]:
        root = local_path(path)
        return {
            f.relative_to(root).as_posix(): (f.stat().st_size, _crc(f)) for f in sorted(root.rglob("*")) if f.is_file()
        }
