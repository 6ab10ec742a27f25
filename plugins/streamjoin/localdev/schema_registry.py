"""A local schema registry for development and tests: Apicurio Registry with in-memory storage on loopback.

``scripts/build-schema-registry.sh`` (run by ``make setup``) builds it into ``.local/schema-registry``;
:class:`SchemaRegistry` starts that JVM detached (it outlives the Python process that started it), records its
pid and waits until the Confluent-compatible API answers. Its schemas live in memory: a restart empties it.
The global compatibility is BACKWARD, as a Confluent registry's default.
Apicurio 2.1.5 serves the Confluent API v6 (``/apis/ccompat/v6``; see java/schema-registry/pom.xml for why not
3.x): :attr:`SchemaRegistry.url` is what Confluent clients take as ``url``.

CLI::

    python -m streamjoin.localdev.schema_registry start|stop|status [--port 18081] [--home .local/registry]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from streamjoin.core.errors import StreamJoinError
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.localdev.processes import live_pid, port_in_use, run_command, stop_pid, tail

DEFAULT_HOME = PROJECT_HOME / ".local" / "registry"
DEFAULT_DIST = PROJECT_HOME / ".local" / "schema-registry"
DEFAULT_PORT = 18081
API_PATH = "/apis/ccompat/v6"


class SchemaRegistryError(StreamJoinError):
    """The local schema registry could not be started or did not answer: port taken, build or Java missing,
    or the JVM exited. The message ends with the end of the registry's log."""

    transient = True

    def __init__(self, problem: str, home: object, log: Path | None = None) -> None:
        self.problem, self.home = problem, str(home)
        end = f"\nlast lines of {log}:\n{tail(log)}" if log is not None else ""
        super().__init__(f"local schema registry in {self.home}: {problem}{end}")


def registry_answers(url: str, timeout: float = 3.0) -> bool:
    """Whether a Confluent-compatible registry at ``url`` answers ``GET <url>/subjects`` with 200."""
    try:
        with urllib.request.urlopen(f"{url}/subjects", timeout=timeout) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


class SchemaRegistry:
    """Apicurio Registry (in-memory storage) listening on 127.0.0.1.

    :param home: folder for ``registry.log`` (the JVM's output) and the pid file
    :param port: the HTTP port
    :param dist: the built registry (``registry-runner.jar`` and ``lib/``, from scripts/build-schema-registry.sh)
    :param heap: the JVM's ``-Xmx``
    """

    def __init__(
        self, home: Path = DEFAULT_HOME, port: int = DEFAULT_PORT, *, dist: Path = DEFAULT_DIST, heap: str = "384m"
    ) -> None:
        self.home = Path(home).resolve()
        self.port = port
        self.dist = Path(dist).resolve()
        self.heap = heap

    @property
    def url(self) -> str:
        """The Confluent-compatible API's base URL: Confluent clients' ``url``."""
        return f"http://127.0.0.1:{self.port}{API_PATH}"

    @property
    def runner(self) -> Path:
        return self.dist / "registry-runner.jar"

    @property
    def log_file(self) -> Path:
        """Everything the registry prints (Quarkus logs to the console)."""
        return self.home / "registry.log"

    @property
    def pid_file(self) -> Path:
        return self.home / "registry.pid"

    def __repr__(self) -> str:
        return f"SchemaRegistry(home={str(self.home)!r}, url={self.url!r})"

    def pid(self) -> int | None:
        """The pid of this home's registry if it is alive (a stale pid file, or a reused pid, counts as not
        running)."""
        return live_pid(self.pid_file, self._marker)

    @property
    def _marker(self) -> bytes:
        return f"-Dstreamjoin.registry.home={self.home}".encode()

    def is_running(self) -> bool:
        """Whether this home's registry process is alive (not whether it answers; see :meth:`is_healthy`)."""
        return self.pid() is not None

    def is_healthy(self, timeout: float = 3.0) -> bool:
        """Whether the registry answers ``GET /subjects`` within ``timeout`` seconds."""
        return registry_answers(self.url, timeout)

    def _java(self) -> str:
        java_home = os.environ.get("JAVA_HOME")
        java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
        if not java or not Path(java).exists():
            raise SchemaRegistryError("no `java` found: install a JDK 17+ or set JAVA_HOME", self.home)
        return java

    def start(self, timeout: float = 60.0) -> bool:
        """Start the registry and wait until it answers; a no-op if this home's registry already runs.

        :param timeout: seconds to wait for the registry to answer
        :return: ``True`` if this call started the registry, ``False`` if it was already running
        :raises SchemaRegistryError: the port is taken, the build is missing, the JVM exited or did not answer
        """
        if self.is_running():
            self.wait_healthy(timeout)
            return False
        if not self.runner.exists():
            raise SchemaRegistryError(
                f"the registry is not built ({self.runner} is missing): run scripts/build-schema-registry.sh "
                "(or `make setup`)",
                self.home,
            )
        if port_in_use(self.port):
            raise SchemaRegistryError(
                f"port {self.port} is already in use by another process (`ss -ltnp 'sport = :{self.port}'` "
                "shows which); stop it or choose another port",
                self.home,
            )
        self.home.mkdir(parents=True, exist_ok=True)
        cmd = [
            self._java(),
            f"-Xmx{self.heap}",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # C1 only: starts sooner; a test registry serves few requests
            "-Djava.awt.headless=true",
            f"-Dstreamjoin.registry.home={self.home}",
            "-Dquarkus.http.host=127.0.0.1",
            f"-Dquarkus.http.port={self.port}",
            # Confluent's registry defaults to BACKWARD; Apicurio to no compatibility rule at all
            "-Dregistry.rules.global.compatibility=BACKWARD",
            "-jar",
            str(self.runner),
        ]
        with self.log_file.open("ab") as out:
            process = subprocess.Popen(  # detached: its own session, survives the caller
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                cwd=self.home,
            )  # fmt: skip
        self.pid_file.write_text(f"{process.pid}\n")
        try:
            self.wait_healthy(timeout, process=process)
        except BaseException:
            self.stop()
            raise
        return True

    def wait_healthy(self, timeout: float = 60.0, *, process: subprocess.Popen[bytes] | None = None) -> None:
        """Wait until ``GET /subjects`` answers 200.

        :param process: the JVM just started, to fail fast if it exits
        :raises SchemaRegistryError: the JVM exited, or no answer within ``timeout``; carries the log's end
        """
        deadline = time.monotonic() + timeout
        while True:
            if process is not None and process.poll() is not None:
                raise SchemaRegistryError(
                    f"the registry JVM exited with code {process.returncode} while starting", self.home, self.log_file
                )
            if registry_answers(self.url, max(0.5, min(2.0, deadline - time.monotonic()))):
                return
            if time.monotonic() >= deadline:
                raise SchemaRegistryError(
                    f"{self.url}/subjects did not answer within {timeout:.0f} s", self.home, self.log_file
                )
            time.sleep(0.2)

    def stop(self, timeout: float = 20.0) -> bool:
        """SIGTERM the registry, SIGKILL it if it is still alive after ``timeout`` seconds.

        :return: ``True`` if a registry was running
        """
        return stop_pid(self.pid_file, self._marker, timeout=timeout)

    def status(self) -> str:
        """One line for humans: running/healthy/stopped, pid, URL and home."""
        pid = self.pid()
        healthy = pid is not None and self.is_healthy()
        state = "stopped" if pid is None else ("running, healthy" if healthy else "running, NOT answering")
        return f"schema registry {state}: {self.url}, pid {pid or '-'}, home {self.home}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamjoin.localdev.schema_registry", description=__doc__)
    parser.add_argument("command", choices=["start", "stop", "status"])
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"HTTP port (default {DEFAULT_PORT})")
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME, help=f"log and pid folder (default {DEFAULT_HOME})")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for start/stop")
    args = parser.parse_args(argv)
    registry = SchemaRegistry(args.home, args.port)
    return run_command(registry, args.command, args.timeout, "schema registry", registry.url, (SchemaRegistryError,))


if __name__ == "__main__":
    sys.exit(main())
