"""A real HDFS on loopback (Hadoop's MiniDFSCluster: a NameNode and a DataNode in one JVM) for tests and
trying out ``checkpoint_location: hdfs://...``.

``scripts/fetch-jars.sh`` puts the jars into ``.local/jars/hdfs``; ``java/hdfs-minicluster/MiniHdfs.java``
is run as a single-file program (no build step). The cluster's data lives in a fresh folder per start.

CLI (runs until interrupted)::

    python -m streamjoin.localdev.hdfs [--port 19820] [--home .local/hdfs]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from types import TracebackType

from streamjoin.core.errors import StreamJoinError
from streamjoin.core.plans import PROJECT_HOME

DEFAULT_JARS = PROJECT_HOME / ".local" / "jars" / "hdfs"
LAUNCHER = PROJECT_HOME / "java" / "hdfs-minicluster" / "MiniHdfs.java"


class MiniHdfsError(StreamJoinError):
    pass


class MiniHdfs:
    """``with MiniHdfs(home, port) as hdfs: hdfs.uri`` -> ``hdfs://127.0.0.1:<port>``."""

    def __init__(self, home: Path, port: int, jars: Path = DEFAULT_JARS) -> None:
        self.home, self.port, self.jars = Path(home).resolve(), port, jars
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"hdfs://127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.home / "minihdfs.log"

    def start(self, timeout: float = 120.0) -> MiniHdfs:
        if not any(self.jars.glob("hadoop-client-minicluster-*.jar")):
            raise MiniHdfsError(f"no MiniDFSCluster jars in {self.jars}: run scripts/fetch-jars.sh")
        shutil.rmtree(self.home, ignore_errors=True)
        self.home.mkdir(parents=True)
        java = str(Path(os.environ["JAVA_HOME"]) / "bin" / "java") if os.environ.get("JAVA_HOME") else "java"
        command = [java, "-Xmx768m", "-cp", f"{self.jars}/*", str(LAUNCHER), str(self.home), str(self.port)]
        with open(self.log_file, "wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        ready, deadline = self.home / "ready", time.monotonic() + timeout
        while not ready.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                tail = self.log_file.read_text(errors="replace")[-3000:] if self.log_file.exists() else ""
                self.stop()
                raise MiniHdfsError(f"MiniDFSCluster on port {self.port} did not start; its log ends:\n{tail}")
            time.sleep(0.5)
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None

    def __enter__(self) -> MiniHdfs:
        return self.start()

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=19820)
    parser.add_argument("--home", type=Path, default=PROJECT_HOME / ".local" / "hdfs")
    args = parser.parse_args(argv)
    with MiniHdfs(args.home, args.port) as hdfs:
        print(f"HDFS at {hdfs.uri} (log {hdfs.log_file}); Ctrl-C stops it", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
