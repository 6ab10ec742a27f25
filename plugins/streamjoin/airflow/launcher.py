"""The one launcher of streamjoin's Spark jobs: the stream job (attached or detached) and reprocessing.

The master, deploy mode, queue and namespace come from the Spark provider's connection (``conn_type``
``spark``, read as the provider reads it); the command from the job's plan and the cluster manager's
strategy (:mod:`streamjoin.core.launch`). A detached driver runs in its own session (process group), its
pid and log recorded in ``driver.json`` (:class:`~streamjoin.core.job_files.PipelineFiles`).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from streamjoin.core.errors import SparkSubmitError
from streamjoin.core.job_files import PipelineFiles
from streamjoin.core.launch import ClusterManager, SparkTarget, cluster_manager
from streamjoin.core.plans import SubmitPlan

log = logging.getLogger(__name__)


def spark_target(conn_id: str) -> SparkTarget:
    """The Spark connection as a :class:`SparkTarget`: ``host`` is the master URL (``local[2]``,
    ``spark://h:7077``, ``yarn``, ``k8s://https://h:443``; none: ``local[*]``) or the connection type is its
    scheme; a port is appended (the Spark provider's rule); ``extra``
    may give ``deploy-mode``, ``queue``, ``namespace`` and ``spark-binary``."""
    from airflow.sdk import BaseHook

    conn = BaseHook.get_connection(conn_id)
    host = conn.host or ("local[*]" if conn.conn_type == "spark" else "")
    master = host if conn.conn_type == "spark" and ("://" in host or not conn.port) else f"{conn.conn_type}://{host}"
    if conn.port:
        master = f"{master}:{conn.port}"
    extra = conn.extra_dejson
    return SparkTarget(
        master=master, deploy_mode=extra.get("deploy-mode") or "client", queue=extra.get("queue"),
        namespace=extra.get("namespace"), binary=extra.get("spark-binary") or "spark-submit",
    )  # fmt: skip


class SparkJobLauncher:
    """Runs one :class:`SubmitPlan` on one :class:`SparkTarget`."""

    def __init__(self, plan: SubmitPlan, target: SparkTarget) -> None:
        self.plan = plan
        self.manager: ClusterManager = cluster_manager(target)
        self._process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        return self.manager.command(self.plan)

    def _env(self) -> dict[str, str]:
        return {**os.environ, **self.manager.env(self.plan)}

    def _discard_secrets(self) -> None:
        """The job deletes its Kafka settings file once read; one that could not start does not."""
        if self.plan.secrets_file:
            Path(self.plan.secrets_file).unlink(missing_ok=True)

    def run(self, logger: Any = log, tail: int = 40) -> None:
        """Run attached until spark-submit exits; its ``streamjoin`` progress lines go to ``logger``.

        :raises SparkSubmitError: a non-zero exit, with the last ``tail`` lines it printed
        """
        logger.info("spark-submit %s (%s): %s", self.plan.name, type(self.manager).__name__, " ".join(self.command()))
        last: collections.deque[str] = collections.deque(maxlen=tail)
        try:
            self._process = subprocess.Popen(
                self.command(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=self._env(), start_new_session=True,
            )  # fmt: skip
            assert self._process.stdout is not None
            for raw in self._process.stdout:
                line = raw.decode(errors="replace").rstrip()
                last.append(line)
                if line.startswith("streamjoin ") or "Exception" in line or "Error" in line:
                    logger.info("job: %s", line[:1000])
            code = self._process.wait()
        finally:
            self._discard_secrets()
        if code != 0:
            raise SparkSubmitError(self.plan.name, code, "\n".join(last))

    def start_detached(self, files: PipelineFiles, logger: Any = log) -> dict[str, Any]:
        """Start the driver in its own session, output to ``<checkpoint>/driver.log``; returns the driver record.

        :raises ValueError: the deploy mode puts the driver on the cluster (this host could not watch it)
        """
        if not self.manager.driver_is_local:
            raise ValueError(
                f"{self.plan.name}: a supervised stream job runs its driver on this host (deploy mode client); "
                f"the Spark connection says {self.manager.target.deploy_mode}"
            )
        files.checkpoint.mkdir(parents=True, exist_ok=True)
        log_path = files.checkpoint / "driver.log"
        logger.info("spark-submit %s detached: %s", self.plan.name, " ".join(self.command()))
        try:
            with open(log_path, "ab") as out:
                process = subprocess.Popen(
                    self.command(), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    env=self._env(), start_new_session=True,
                )  # fmt: skip
        except OSError as exc:
            self._discard_secrets()
            raise SparkSubmitError(self.plan.name, None, str(exc)) from exc
        record = files.record_driver(process.pid, process.pid, str(log_path), self.plan.name)
        logger.info("launched %s: pid %s, log %s", self.plan.name, process.pid, log_path)
        return record

    def kill(self) -> None:
        """Stop an attached run (``on_kill``): SIGTERM to its process group, SIGKILL after 10 s."""
        if self._process is not None and self._process.poll() is None:
            _signal_group(self._process.pid, signal.SIGTERM)
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                _signal_group(self._process.pid, signal.SIGKILL)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def stop_driver(files: PipelineFiles, logger: Any = log, timeout: float = 60.0) -> bool:
    """Stop the detached driver: the stop marker (it stops after its current batch), then SIGTERM, then
    SIGKILL to its process group. True when a driver was running. Blocking: triggers run it in a thread."""
    driver = files.driver()
    if not driver or not files.driver_alive():
        return False
    files.request_stop()
    deadline = time.monotonic() + timeout
    while files.driver_alive() and time.monotonic() < deadline:
        time.sleep(0.5)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not files.driver_alive():
            break
        logger.warning("%s did not stop in %.0f s: sending %s", driver.get("name"), timeout, sig.name)
        _signal_group(int(driver["pgid"]), sig)
        grace = time.monotonic() + 10
        while files.driver_alive() and time.monotonic() < grace:
            time.sleep(0.5)
    files.clear_stop()
    return True
