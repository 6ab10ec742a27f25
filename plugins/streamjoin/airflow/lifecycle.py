"""A supervised driver's lifecycle per cluster manager: submit, status, alive, stop, adopt. The one module that
starts and stops supervised drivers (:func:`submit`, :func:`stop_driver`, :func:`driver_alive`); the
spark-submit process itself is :mod:`streamjoin.airflow.launcher`'s.

* client mode (``local[N]``, or any master with deploy mode ``client``): the driver is a process of this host
  (:class:`LocalDriver`, today's handling: pid and process group in ``driver.json``);
* standalone cluster mode (``spark://`` + ``cluster``): the driver runs on a worker (:class:`StandaloneDriver`);
  the Spark provider's hook submits it, parses its driver id, polls and kills it through the master;
* YARN and Kubernetes cluster mode (:class:`YarnDriver`, :class:`KubernetesDriver`): the same interface on the
  provider's application id / driver pod.

Each driver's record (``driver.json``) names the Spark connection and the cluster's id of the driver, so a
task other than the one that submitted it (a retry, the stop DAG, the owner after the worker that launched the
job died) adopts it with :func:`adopt`. Stopping asks first (the stop marker: the job stops after its current
batch), then kills (signals, or the cluster manager's kill). The job's checkpoint folder is where the stop
marker and the job's files live: a cluster-mode driver needs it on storage both sides see.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import time
from abc import ABC, abstractmethod
from dataclasses import replace
from typing import Any, ClassVar

from airflow.providers.common.compat.sdk import AirflowException

from streamjoin.airflow.hooks.spark_submit import StreamJoinSparkSubmitHook
from streamjoin.airflow.launcher import SparkJobLauncher, signal_group
from streamjoin.core.errors import SparkSubmitError
from streamjoin.core.job_files import DriverRecord, PipelineFiles
from streamjoin.core.launch import Kubernetes, Standalone, Yarn
from streamjoin.core.plans import SubmitPlan

log = logging.getLogger(__name__)


class DriverLifecycle(ABC):
    """One supervised driver on one cluster manager.

    :param files: the pipeline's job files (``driver.json``, the stop marker)
    :param hook: the Spark provider's hook, holding the connection it read (None: a local driver adopted
        without its connection)
    """

    #: the cluster manager's states of a driver that runs or is about to (``status``)
    ACTIVE: ClassVar[frozenset[str]] = frozenset({"RUNNING"})

    def __init__(self, files: PipelineFiles, hook: StreamJoinSparkSubmitHook | None = None) -> None:
        self.files, self.hook = files, hook

    @abstractmethod
    def submit(self, plan: SubmitPlan, logger: Any = log) -> None:
        """Start the driver detached and record it in ``driver.json``.

        :raises SparkSubmitError: spark-submit failed (its secrets file is deleted)
        """

    @abstractmethod
    def status(self) -> str | None:
        """The driver's state in the cluster manager's words (``RUNNING``, ``FINISHED``, ``KILLED``...);
        None when it could not be asked (the master did not answer)."""

    def alive(self) -> bool:
        """The driver runs, or its state is unknown right now (a master that does not answer is no proof of
        death: the owner must not start a second driver on the checkpoint then)."""
        state = self.status()
        return state is None or state in self.ACTIVE

    @abstractmethod
    def kill(self, logger: Any = log) -> None:
        """End the driver now (no batch boundary)."""

    def stop(self, logger: Any = log, timeout: float = 60.0) -> bool:
        """Stop the driver: the stop marker (it stops after its current batch), then :meth:`kill` after
        ``timeout``. True when a driver was running. Blocking: triggers run it in a thread."""
        if self.files.driver() is None or not self.alive():
            return False
        self.files.request_stop()
        try:
            if not self._wait_gone(timeout):
                logger.warning("%s did not stop in %.0f s: killing it", self.describe(), timeout)
                self.kill(logger)
                self._wait_gone(30.0)
        finally:
            self.files.clear_stop()
        return True

    def _wait_gone(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.alive():
            if time.monotonic() >= deadline:
                return False
            time.sleep(1.0)
        return True

    def describe(self) -> str:
        record = self.files.driver() or DriverRecord()
        return f"driver {record.driver_id or record.pid} of {record.name}"

    def _discard_secrets(self, plan: SubmitPlan) -> None:
        if plan.secrets_file:
            with contextlib.suppress(OSError):
                os.unlink(plan.secrets_file)


class LocalDriver(DriverLifecycle):
    """Client mode: the driver is a process of this host, in its own session; alive while its pid is (and its
    command line carries the job's name), stopped by SIGTERM then SIGKILL to its process group."""

    def submit(self, plan: SubmitPlan, logger: Any = log) -> None:
        assert self.hook is not None
        SparkJobLauncher(plan, self.hook.target).start_detached(self.files, logger)

    def status(self) -> str:
        return "RUNNING" if self.files.driver_alive() else "GONE"

    def kill(self, logger: Any = log) -> None:
        pgid = (self.files.driver() or DriverRecord()).pgid
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if pgid is None or not self.files.driver_alive():
                return
            logger.warning("%s: sending %s", self.describe(), sig.name)
            signal_group(int(pgid), sig)
            grace = time.monotonic() + 10
            while self.files.driver_alive() and time.monotonic() < grace:
                time.sleep(0.5)


class ClusterDriver(DriverLifecycle):
    """A driver the cluster manager runs: submitted through the provider's hook, its id recorded."""

    hook: StreamJoinSparkSubmitHook

    def __init__(self, files: PipelineFiles, hook: StreamJoinSparkSubmitHook) -> None:
        super().__init__(files, hook)

    def detached(self, plan: SubmitPlan) -> SubmitPlan:
        """The plan with what makes spark-submit return once the driver is submitted."""
        return plan

    def submit(self, plan: SubmitPlan, logger: Any = log) -> None:
        plan = self.detached(plan)
        self.hook.plan = plan
        self.files.checkpoint.mkdir(parents=True, exist_ok=True)
        try:
            self.hook.submit_plan()
        except AirflowException as exc:
            self._discard_secrets(plan)
            raise SparkSubmitError(plan.name, None, str(exc)) from exc
        driver_id = self.hook.driver_id
        if not driver_id:
            self._discard_secrets(plan)
            raise SparkSubmitError(plan.name, None, "spark-submit printed no driver id to supervise the driver by")
        self.files.record_driver(
            None, None, None, plan.name, driver_id=driver_id, master=self.hook.target.master,
            conn_id=self.hook._conn_id,
        )  # fmt: skip
        logger.info("submitted %s to %s: driver %s", plan.name, self.hook.target.master, driver_id)

    @property
    def driver_id(self) -> str:
        driver_id = self.hook.driver_id or (self.files.driver() or DriverRecord()).driver_id
        if not driver_id:
            raise ValueError(f"{self.files.checkpoint}: no cluster driver recorded")
        return str(driver_id)


class StandaloneDriver(ClusterDriver):
    """Standalone cluster mode: the provider's hook parses the driver id from spark-submit's output, asks the
    master for its state and kills it (the master's REST server, ``spark.master.rest.enabled``, on the
    connection's ``rest-port``; or ``spark-submit --status/--kill``)."""

    ACTIVE = frozenset({"SUBMITTED", "RUNNING", "RELAUNCHING"})

    def status(self) -> str | None:
        return self.hook.driver_state()

    def kill(self, logger: Any = log) -> None:
        self.hook.kill_driver()


class YarnDriver(ClusterDriver):
    """YARN cluster mode: spark-submit returns once the application is accepted
    (``spark.yarn.submit.waitAppCompletion=false``), the provider's hook parses the application id; status from
    the ResourceManager's REST API (the connection's ``yarn_resourcemanager_webapp_address``, read by the
    hook), kill with ``yarn application -kill`` (the provider's command).

    Not run here: no YARN cluster in the tests; the plans and commands are (tests/unit/test_lifecycle.py).
    """

    ACTIVE = frozenset({"NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING"})

    def detached(self, plan: SubmitPlan) -> SubmitPlan:
        return replace(plan, conf={**plan.conf, "spark.yarn.submit.waitAppCompletion": "false"})

    def submit(self, plan: SubmitPlan, logger: Any = log) -> None:
        """:raises ValueError: the connection gives no ResourceManager address (status could never be known)"""
        self.hook._get_yarn_rm_base_url()  # before anything runs on the cluster
        super().submit(plan, logger)

    def status(self) -> str | None:
        try:
            return self.hook.query_yarn_application_status(self.driver_id)
        except RuntimeError as exc:  # the ResourceManager did not answer
            log.warning("application %s: %s", self.driver_id, exc)
            return None

    def kill_command(self) -> list[str]:
        return ["yarn", "application", "-kill", self.driver_id]

    def kill(self, logger: Any = log) -> None:
        done = subprocess.run(self.kill_command(), capture_output=True, text=True, timeout=120)
        logger.info("yarn application -kill %s: exit %s", self.driver_id, done.returncode)


class KubernetesDriver(ClusterDriver):
    """Kubernetes cluster mode: spark-submit returns once the driver pod exists
    (``spark.kubernetes.submission.waitAppCompletion=false``), the provider's hook parses the pod's name;
    status and kill with Spark's own ``spark-submit --status/--kill spark:<namespace>:<pod>``.

    Not run here: no Kubernetes cluster in the tests (and the provider's hook needs the cncf.kubernetes
    provider for a ``k8s://`` master); the plans and commands are (tests/unit/test_lifecycle.py).
    """

    ACTIVE = frozenset({"Pending", "Running"})

    def detached(self, plan: SubmitPlan) -> SubmitPlan:
        return replace(plan, conf={**plan.conf, "spark.kubernetes.submission.waitAppCompletion": "false"})

    def _submission(self) -> list[str]:
        target = self.hook.target
        return [target.binary, "--master", target.master]

    def _pod(self) -> str:
        return f"spark:{self.hook.target.namespace or 'default'}:{self.driver_id}"

    def status_command(self) -> list[str]:
        return [*self._submission(), "--status", self._pod()]

    def kill_command(self) -> list[str]:
        return [*self._submission(), "--kill", self._pod()]

    def status(self) -> str | None:
        done = subprocess.run(self.status_command(), capture_output=True, text=True, timeout=120)
        phase = re.search(r"phase: (\w+)", done.stdout + done.stderr)
        return phase.group(1) if phase else ("Unknown" if done.returncode == 0 else None)

    def kill(self, logger: Any = log) -> None:
        done = subprocess.run(self.kill_command(), capture_output=True, text=True, timeout=120)
        logger.info("kill %s: exit %s", self._pod(), done.returncode)


_CLUSTER_DRIVERS: dict[type, type[ClusterDriver]] = {
    Standalone: StandaloneDriver, Yarn: YarnDriver, Kubernetes: KubernetesDriver,
}  # fmt: skip


def lifecycle(files: PipelineFiles, hook: StreamJoinSparkSubmitHook) -> DriverLifecycle:
    """The lifecycle of a driver submitted on ``hook``'s connection (its master and deploy mode)."""
    manager = hook.manager
    if manager.driver_is_local:
        return LocalDriver(files, hook)
    return _CLUSTER_DRIVERS[type(manager)](files, hook)


def submit(files: PipelineFiles, plan: SubmitPlan, spark_conn_id: str, logger: Any = log) -> DriverLifecycle:
    """Submit ``plan`` detached on the Spark connection (read once, by the provider's hook); its lifecycle."""
    hook = StreamJoinSparkSubmitHook(spark_conn_id, plan=plan)
    driver = lifecycle(files, hook)
    driver.submit(plan, logger)
    return driver


def adopt(files: PipelineFiles) -> DriverLifecycle:
    """The lifecycle of the driver ``driver.json`` records, whoever submitted it: a cluster driver through the
    connection it was submitted on (read by the provider's hook), a local one by its pid.

    :raises ValueError: the connection now names another master than the one the driver runs on
    """
    record = files.driver() or DriverRecord()
    driver_id, conn_id = record.driver_id, record.conn_id
    if not driver_id:
        return LocalDriver(files)
    hook = StreamJoinSparkSubmitHook(conn_id or "spark_default")
    if (master := record.master) and master != hook.target.master:
        raise ValueError(f"{files.checkpoint}: driver {driver_id} runs on {master}, but connection {conn_id!r} "
                         f"now names {hook.target.master}: stop it there, or restore the connection")  # fmt: skip
    driver = lifecycle(files, hook)
    if not isinstance(driver, ClusterDriver):
        raise ValueError(f"{files.checkpoint}: driver {driver_id} runs on the cluster, but connection "
                         f"{conn_id!r} now says deploy mode client")  # fmt: skip
    hook.track(str(driver_id))
    return driver


def driver_alive(files: PipelineFiles) -> bool:
    """The recorded driver runs (a local process, or a driver its cluster manager reports running)."""
    return files.driver() is not None and adopt(files).alive()


def stop_driver(files: PipelineFiles, logger: Any = log, timeout: float = 60.0) -> bool:
    """Stop the driver ``driver.json`` records, wherever it runs (:func:`adopt`): the stop marker (it stops after
    its current batch), then a kill after ``timeout``. True when a driver was running. Blocking: triggers run it
    in a thread."""
    return adopt(files).stop(logger, timeout)
