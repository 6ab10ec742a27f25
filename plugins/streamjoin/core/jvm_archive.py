"""The class-data sharing archive of a Spark driver's JVM: the classes a driver loads while it starts and runs its
first batch (Spark's, Scala's, catalyst's, the kernel's), mapped from one file instead of read from jars, parsed and
verified by every fresh JVM. Built once per machine by ``make setup``
(:mod:`streamjoin.localdev.jvm_archive`), one per Java runtime and Spark installation (:func:`archive_path`).

A JVM started with :func:`java_options` uses it when its class path is the archive's (``spark-submit`` and
pyspark's gateway alike); any other JVM ignores it, silently, and loads its classes as before.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
from pathlib import Path

#: where the archives are, relative to the project home
ARCHIVE_DIR = Path(".local") / "jvm-archive"
#: a JVM that cannot use the archive (another class path, a changed jar) says so on stdout: it runs on unchanged
QUIET = "-Xlog:cds=off,cds+dynamic=off"


def java_binary() -> Path | None:
    """The ``java`` spark-submit's launcher runs (``$JAVA_HOME/bin/java``, else the one on ``PATH``)."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def spark_jars() -> Path | None:
    """The folder of Spark's own jars: the class path of every driver JVM (``$SPARK_HOME/jars``, else pyspark's)."""
    home = os.environ.get("SPARK_HOME")
    if home:
        return Path(home) / "jars"
    found = importlib.util.find_spec("pyspark")  # where it is, not imported (a DAG file parses without it)
    return None if found is None or found.origin is None else Path(found.origin).parent / "jars"


def archive_key() -> str | None:
    """What an archive is valid for: the Java runtime (its binary and ``libjvm``) and Spark's jars (names, sizes,
    times); None without either."""
    java, jars = java_binary(), spark_jars()
    if java is None or jars is None or not jars.is_dir():
        return None
    parts = [str(java)]
    for path in sorted([java, *java.parent.parent.glob("lib/server/libjvm.so"), *jars.glob("*.jar")]):
        stat = path.stat()
        parts.append(f"{path.name} {stat.st_size} {stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def archive_path(home: Path) -> Path | None:
    """The archive of the project at ``home`` for this machine's Java and Spark (whether built or not); None when
    there is no Java or Spark."""
    key = archive_key()
    return None if key is None else home / ARCHIVE_DIR / f"spark-driver-{key}.jsa"


def java_options(home: Path) -> str | None:
    """The driver's JVM options that map the archive (``spark.driver.extraJavaOptions``); None when it is not
    built."""
    path = archive_path(home)
    return f"-XX:SharedArchiveFile={path} {QUIET}" if path is not None and path.is_file() else None
