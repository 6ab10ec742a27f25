"""How streamjoin's Spark jobs are launched: a spark-submit process, attached (a task waits for it: the demo's
stream job, reprocessing) or detached (a supervised stream job's local driver). Drivers that are supervised
are started, watched and stopped by :mod:`streamjoin.airflow.lifecycle`, the one module that owns them; it
launches a local one with :meth:`SparkJobLauncher.start_detached`.

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
from dataclasses import replace
from pathlib import Path
from typing import Any

from streamjoin.core.errors import SparkSubmitError
from streamjoin.core.job_files import DriverRecord, PipelineFiles
from streamjoin.core.launch import ClusterManager, SparkTarget, Standalone, cluster_manager
from streamjoin.core.plans import SubmitPlan

log = logging.getLogger(__name__)


def spark_target(conn_id: str) -> SparkTarget:
    """The Spark connection as a :class:`SparkTarget`, as the Spark provider's hook reads it (its one reading:
    ``host`` is the master URL, ``local[2]``, ``spark://h:7077``, ``yarn``, ``k8s://https://h:443``, or the
    connection type is its scheme; a port is appended; ``extra`` may give ``deploy-mode``, ``queue``,
    ``namespace``, ``spark-binary``, ``rest-port``). A ``spark`` connection without a host: ``local[*]``."""
    from streamjoin.airflow.hooks.spark_submit import StreamJoinSparkSubmitHook

    return StreamJoinSparkSubmitHook(conn_id).target


class SparkJobLauncher:
    """Runs one :class:`SubmitPlan` on one :class:`SparkTarget`."""

    def __init__(self, plan: SubmitPlan, target: SparkTarget) -> None:
        self.plan = plan
        self.manager: ClusterManager = cluster_manager(target)
        self._process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        """The plan's command; an attached run on a standalone cluster in cluster mode waits for the driver to
        end (spark-submit returns once it is submitted otherwise)."""
        plan = self.plan
        if isinstance(self.manager, Standalone) and not self.manager.driver_is_local:
            plan = replace(plan, conf={**plan.conf, "spark.standalone.submit.waitAppCompletion": "true"})
        return self.manager.command(plan)

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

    def start_detached(self, files: PipelineFiles, logger: Any = log) -> DriverRecord:
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
            signal_group(self._process.pid, signal.SIGTERM)
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                signal_group(self._process.pid, signal.SIGKILL)


def signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)

