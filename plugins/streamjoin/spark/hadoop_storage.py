""":class:`~streamjoin.core.storage.Storage` on any Hadoop-compatible filesystem, through the driver's JVM
(Spark's own Hadoop client and configuration: ``spark.hadoop.*`` settings, HDFS HA, S3A credentials).

Atomicity as the job needs it: ``write_text`` writes a hidden temporary file and renames it over the
target with ``FileContext.rename(OVERWRITE)`` (one NameNode operation on HDFS, as Spark's own checkpoint
files); ``create_new`` is ``create(overwrite=false)``, which the NameNode refuses for an existing path. Object
stores (S3A) have no atomic create-if-absent: there two drivers starting within the same second are not
kept apart by the lease.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from pyspark.sql import SparkSession

from streamjoin.core.storage import FileFacts, LocalStorage, Storage, is_local, join

#: files without a filesystem checksum up to this size get a digest of their bytes; larger ones only their size
CONTENT_DIGEST_LIMIT = 64 << 20


def storage_for(spark: SparkSession, location: str) -> Storage:
    """The storage of ``location``: local paths and ``file:`` URIs on this machine, others through Hadoop."""
    return LocalStorage() if is_local(location) else HadoopStorage(spark, location)


def _java_class(error: Exception) -> str:
    java = getattr(error, "java_exception", None)
    return str(java.getClass().getName()) if java is not None else ""


class HadoopStorage:
    def __init__(self, spark: SparkSession, location: str) -> None:
        jvm: Any = spark._jvm
        self._jvm = jvm
        self._gateway: Any = spark.sparkContext._gateway
        self._conf = spark._jsc.hadoopConfiguration()
        self._fs = jvm.org.apache.hadoop.fs.Path(location).getFileSystem(self._conf)

    def _path(self, path: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(path)

    def _write(self, path: str, text: str, *, overwrite: bool) -> None:
        out = self._fs.create(self._path(path), overwrite)
        try:
            out.write(bytearray(text.encode()))
        finally:
            out.close()

    def read_text(self, path: str) -> str | None:
        from py4j.protocol import Py4JJavaError

        try:
            stream = self._fs.open(self._path(path))
        except Py4JJavaError as exc:
            if _java_class(exc) == "java.io.FileNotFoundException":
                return None
            raise
        try:
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)).decode()
        finally:
            stream.close()

    def write_text(self, path: str, text: str) -> None:
        target = self._path(path)
        partial = join(str(target.getParent()), f".{target.getName()}.{os.getpid()}.{threading.get_ident()}.tmp")
        self._write(partial, text, overwrite=True)
        context = self._jvm.org.apache.hadoop.fs.FileContext.getFileContext(target.toUri(), self._conf)
        options = self._gateway.new_array(self._jvm.org.apache.hadoop.fs.Options.Rename, 1)
        options[0] = self._jvm.org.apache.hadoop.fs.Options.Rename.OVERWRITE
        context.rename(self._path(partial), target, options)

    def create_new(self, path: str, text: str) -> bool:
        from py4j.protocol import Py4JJavaError

        try:
            self._write(path, text, overwrite=False)
        except Py4JJavaError as exc:
            if _java_class(exc).endswith("FileAlreadyExistsException"):
                return False
            raise
        return True

    def children(self, path: str) -> list[str]:
        if not self.exists(path):
            return []
        return sorted(str(status.getPath().getName()) for status in self._fs.listStatus(self._path(path)))

    def exists(self, path: str) -> bool:
        return bool(self._fs.exists(self._path(path)))

    def delete(self, path: str) -> None:
        self._fs.delete(self._path(path), True)

    def rename(self, source: str, target: str) -> None:
        if self.exists(target) or not self._fs.rename(self._path(source), self._path(target)):
            raise OSError(f"cannot rename {source} to {target}")

    def mkdirs(self, path: str) -> None:
        self._fs.mkdirs(self._path(path))

    def _facts(self, status: Any) -> FileFacts:
        size = int(status.getLen())
        checksum = self._fs.getFileChecksum(status.getPath())
        if checksum is not None:
            return size, str(checksum.toString())
        if size > CONTENT_DIGEST_LIMIT:
            return size, None
        # a file written without checksums (Spark's state store files: its checkpoint file manager turns them
        # off), or a store that keeps none (S3A by default): a digest of its bytes, read once
        stream = self._fs.open(status.getPath())
        try:
            return size, f"MD5:{self._jvm.org.apache.hadoop.io.MD5Hash.digest(stream).toString()}"
        finally:
            stream.close()

    def facts(self, path: str) -> FileFacts | None:
        if not self.exists(path):
            return None
        status = self._fs.getFileStatus(self._path(path))
        return self._facts(status) if status.isFile() else None

    def files(self, path: str) -> dict[str, FileFacts]:
        root = str(self._fs.makeQualified(self._path(path)).toUri().getPath()).rstrip("/") + "/"
        found: dict[str, FileFacts] = {}
        if not self.exists(path):
            return found
        listing = self._fs.listFiles(self._path(path), True)
        while listing.hasNext():
            status = listing.next()
            relative = str(status.getPath().toUri().getPath())[len(root) :]
            found[relative] = self._facts(status)
        return dict(sorted(found.items()))
