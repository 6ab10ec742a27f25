"""A Spark standalone cluster (one master, one or more workers) on loopback, run from the pyspark distribution.

For tests and for trying cluster mode on one machine: the same ``spark://`` master URL a real cluster
gives, so jobs are submitted exactly as they would be to the compose stack's ``spark-master``. The master
and the workers are plain JVMs started from ``<pyspark>/jars/*``; :meth:`SparkStandaloneCluster.start`
waits until the master's web UI JSON (``/json/``) lists every worker ALIVE.

CLI::

    python -m streamjoin.localdev.spark_cluster start|stop|status [--port 17077] [--webui-port 18080] \
        [--rest-port 16066] [--cores 1] [--workers 1]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from streamjoin.core.errors import StreamJoinError
from streamjoin.core.plans import PROJECT_HOME

DEFAULT_HOME = PROJECT_HOME / ".local" / "spark-cluster"
HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


class SparkClusterError(StreamJoinError):
    """The local Spark standalone cluster did not start or stop; the message ends with its log tail."""

    def __init__(self, problem: str, home: object, log_tail: str = "") -> None:
        self.problem, self.home = problem, str(home)
        super().__init__(f"local Spark cluster in {self.home}: {problem}" + (f"\n{log_tail}" if log_tail else ""))


def pyspark_home() -> Path:
    """The installed pyspark package: its ``jars/`` hold Spark's master and worker classes."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _scala_version() -> str:
    """``2.13`` from ``<pyspark>/jars/scala-library-2.13.x.jar``."""
    for jar in (pyspark_home() / "jars").glob("scala-library-*.jar"):
        return ".".join(jar.stem.removeprefix("scala-library-").split(".")[:2])
    return "2.13"


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((HOST, port)) != 0


def free_port() -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, lines: int = 25) -> str:
    if not path.exists():
        return f"<{path} does not exist>"
    text = path.read_text(errors="replace").splitlines()
    return "\n".join(text[-lines:]) or f"<{path} is empty>"


class SparkStandaloneCluster:
    """One master and ``workers`` workers, all on 127.0.0.1.

    :param home: folder for logs, pid files and the workers' work dirs
    :param port: the master's RPC port (``spark://127.0.0.1:<port>``)
    :param webui_port: the master's web UI port (``http://127.0.0.1:<webui_port>/json/``)
    :param cores: cores each worker offers
    :param memory: memory each worker offers (``2g``)
    :param rest_port: the master's REST submission server (``spark.master.rest.port``), off when None: what
        ``spark-submit --status/--kill`` and the Spark provider's hook use for a cluster-mode driver
    :param workers: how many workers (each its own JVM, work dir ``work`` / ``work-2`` ..., log and pid file)
    """

    def __init__(
        self,
        home: Path = DEFAULT_HOME,
        port: int = 17077,
        webui_port: int = 18080,
        *,
        cores: int = 1,
        memory: str = "2g",
        rest_port: int | None = None,
        workers: int = 1,
    ) -> None:
        if workers < 1:
            raise ValueError(f"a cluster needs at least one worker, not {workers}")
        self.home, self.port, self.webui_port = Path(home), port, webui_port
        self.cores, self.memory, self.rest_port = cores, memory, rest_port
        #: the workers' roles: ``worker`` (the first, as before) then ``worker-2`` ...
        self.workers = ["worker", *(f"worker-{n}" for n in range(2, workers + 1))]

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    @property
    def webui_url(self) -> str:
        return f"http://{HOST}:{self.webui_port}"

    def _pid_file(self, role: str) -> Path:
        return self.home / f"{role}.pid"

    def _log(self, role: str) -> Path:
        return self.home / f"{role}.log"

    def _command(self, role: str) -> list[str]:
        java = shutil.which("java") or (Path(os.environ.get("JAVA_HOME", "")) / "bin" / "java").as_posix()
        classpath = f"{pyspark_home() / 'jars'}/*"
        base = [java, "-Xmx512m", "-cp", classpath]
        if role == "master":
            if self.rest_port is not None:
                base += ["-Dspark.master.rest.enabled=true", f"-Dspark.master.rest.port={self.rest_port}"]
            return [*base, MASTER_CLASS, "--host", HOST, "--port", str(self.port), "--webui-port", str(self.webui_port)]
        worker_ui = free_port()
        return [
            *base, WORKER_CLASS, self.master_url, "--host", HOST, "--cores", str(self.cores),
            "--memory", self.memory, "--webui-port", str(worker_ui), "--work-dir", str(self.work_dir(role)),
        ]  # fmt: skip

    def work_dir(self, worker: str) -> Path:
        """Where ``worker`` runs its executors (``<app>/<executor>/stderr`` inside)."""
        return self.home / worker.replace("worker", "work")

    def _spawn(self, role: str) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "SPARK_HOME": str(pyspark_home()),
            "SPARK_LOCAL_IP": HOST,
            "SPARK_NO_DAEMONIZE": "1",
            # the worker's launcher builds the executor command from SPARK_HOME; without bin/load-spark-env.sh
            # (pyspark ships none) it needs the Scala version, or fails with "Cannot find any build directories"
            "SPARK_SCALA_VERSION": _scala_version(),
        }
        with self._log(role).open("ab") as log:
            process = subprocess.Popen(
                self._command(role), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, cwd=self.home, start_new_session=True,
            )  # fmt: skip
        self._pid_file(role).write_text(str(process.pid))
        return process

    def state(self, timeout: float = 2.0) -> dict[str, Any] | None:
        """The master's ``/json/`` document, or None when it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=timeout) as response:
                return dict(json.load(response))
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def alive_workers(self) -> int:
        state = self.state() or {}
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def is_healthy(self) -> bool:
        state = self.state() or {}
        return state.get("status") == "ALIVE" and self.alive_workers() >= len(self.workers)

    def start(self, timeout: float = 90.0) -> None:
        """Start the master, then the workers; wait (bounded) until the master lists them all ALIVE.

        :raises SparkClusterError: a port is taken, a JVM exited, or not every worker ALIVE within ``timeout``
        """
        self.home.mkdir(parents=True, exist_ok=True)
        for port in (self.port, self.webui_port, self.rest_port):
            if port is not None and not _port_free(port):
                raise SparkClusterError(f"port {port} on {HOST} is already in use", self.home)
        deadline = time.monotonic() + timeout
        master = self._spawn("master")
        while self.state() is None:
            self._check_alive(master, "master", deadline, "the master's web UI to answer")
            time.sleep(0.5)
        workers = {role: self._spawn(role) for role in self.workers}
        waiting = f"{len(workers)} ALIVE worker(s)"
        while not self.is_healthy():
            self._check_alive(master, "master", deadline, waiting)
            for role, worker in workers.items():
                self._check_alive(worker, role, deadline, waiting)
            time.sleep(0.5)

    def _check_alive(self, process: subprocess.Popen[bytes], role: str, deadline: float, waiting: str) -> None:
        if process.poll() is not None:
            self.stop()
            raise SparkClusterError(f"the {role} exited with {process.returncode}", self.home, _tail(self._log(role)))
        if time.monotonic() > deadline:
            self.stop()
            raise SparkClusterError(
                f"waited for {waiting} at {self.webui_url}/json/ in vain", self.home, _tail(self._log(role))
            )

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the workers then the master (SIGTERM, then SIGKILL after ``timeout``); no-op when not running."""
        for role in (*self.workers, "master"):
            self._signal(role, signal.SIGTERM, timeout)

    def kill_worker(self, worker: str) -> None:
        """SIGKILL ``worker`` and its executors (its process group), as a machine that dies: nothing shuts
        down cleanly, the master and the drivers find out by the lost connections."""
        if worker not in self.workers:
            raise ValueError(f"no worker {worker!r} in {self.home}: {self.workers}")
        self._signal(worker, signal.SIGKILL, 10.0)

    def _signal(self, role: str, sig: signal.Signals, timeout: float) -> None:
        """``sig`` to ``role``'s process group; SIGKILL if it still runs after ``timeout``."""
        pid_file = self._pid_file(role)
        if not pid_file.exists():
            return
        pid = int(pid_file.read_text().strip() or 0)
        if pid and _pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, sig)
            deadline = time.monotonic() + timeout
            while _pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if _pid_alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
        pid_file.unlink(missing_ok=True)

    def status(self) -> str:
        state = self.state()
        if state is None:
            return f"no master answers at {self.webui_url}"
        return f"master {state.get('status')} at {self.master_url}, {self.alive_workers()} ALIVE worker(s)"


def _pid_alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)  # reap our own child so it does not linger as a zombie
        if done == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _started_workers(home: Path) -> int:
    """How many workers a cluster in ``home`` was started with (their pid files), so that ``stop`` stops them all."""
    return 1 + sum(1 for _ in home.glob("worker-*.pid"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="spark_cluster", description=__doc__)
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME)
    parser.add_argument("--port", type=int, default=17077)
    parser.add_argument("--webui-port", type=int, default=18080)
    parser.add_argument("--rest-port", type=int, default=None, help="REST submission server (cluster deploy mode)")
    parser.add_argument("--cores", type=int, default=1, help="each worker's cores (a cluster-mode driver takes one)")
    parser.add_argument("--workers", type=int, default=1, help="workers (stop and status find them by pid file)")
    args = parser.parse_args(argv)
    workers = max(args.workers, _started_workers(args.home))
    cluster = SparkStandaloneCluster(args.home, args.port, args.webui_port, cores=args.cores, rest_port=args.rest_port,
                                     workers=workers)  # fmt: skip
    if args.action == "start":
        cluster.start()
    elif args.action == "stop":
        cluster.stop()
    print(cluster.status())
    return 0


if __name__ == "__main__":
    sys.exit(main())
