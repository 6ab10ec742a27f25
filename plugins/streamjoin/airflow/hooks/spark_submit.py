"""The Spark provider's ``SparkSubmitHook`` running streamjoin's submit plans.

The provider's hook is the one reader of the Spark connection (``conn_type`` ``spark``: master, deploy mode,
YARN queue, Kubernetes namespace, spark-submit binary, the standalone master's REST endpoint). The command
line is the cluster manager strategy's (:mod:`streamjoin.core.launch`: the Pythons, the standalone cluster
mode wrapper); the hook runs it and does what it already does: parse the standalone driver id, the YARN
application id or the Kubernetes driver pod from spark-submit's output, ask the master for a driver's state
and kill it (``spark-submit --status/--kill`` or the master's REST API).
"""

from __future__ import annotations

import subprocess
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.common.compat.sdk import AirflowNotFoundException

from streamjoin.core.errors import StreamJoinError
from streamjoin.core.launch import ClusterManager, SparkTarget, cluster_manager
from streamjoin.core.plans import SubmitPlan


class SparkConnectionMissing(StreamJoinError, LookupError):
    """The Spark connection is not defined. Terminal: define it (the provider's hook would submit to ``yarn``)."""

    def __init__(self, conn_id: str) -> None:
        self.conn_id = conn_id
        super().__init__(f"Spark connection {conn_id!r} is not defined: set AIRFLOW_CONN_{conn_id.upper()} or add "
                         "it under Admin -> Connections (conn_type spark, host = the master URL)")  # fmt: skip


class StreamJoinSparkSubmitHook(SparkSubmitHook):
    """:class:`SparkSubmitHook` for a :class:`SubmitPlan`, and for a driver another task submitted.

    :param conn_id: the Spark connection
    :param plan: what to submit (none: only track or kill a driver by its id, :meth:`track`)
    """

    def __init__(self, conn_id: str = "spark_default", *, plan: SubmitPlan | None = None, **kwargs: Any) -> None:
        super().__init__(conn_id=conn_id, name=plan.name if plan else "streamjoin", **kwargs)
        self.plan = plan

    @classmethod
    def get_connection(cls, conn_id: str) -> Any:
        """The connection; a missing one is an error here (the provider's hook would fall back to ``yarn``).

        :raises SparkConnectionMissing: no such connection
        """
        try:
            return super().get_connection(conn_id)
        except AirflowNotFoundException as exc:
            raise SparkConnectionMissing(conn_id) from exc

    @property
    def target(self) -> SparkTarget:
        """The connection as the provider read it. A ``spark`` connection without a host means ``local[*]``."""
        conn = self._connection
        master = "local[*]" if conn["master"] in ("spark://", "") else conn["master"]
        return SparkTarget(
            master=master, deploy_mode=conn["deploy_mode"] or "client", queue=conn["queue"],
            namespace=conn["namespace"], binary=conn["spark_binary"],
        )  # fmt: skip

    @property
    def manager(self) -> ClusterManager:
        return cluster_manager(self.target)

    @property
    def driver_id(self) -> str | None:
        """The standalone driver's id (``driver-20261126...``), the YARN application id or the Kubernetes
        driver pod, whichever spark-submit printed (or :meth:`track` set)."""
        return self._driver_id or self._yarn_application_id or self._kubernetes_driver_pod

    def command(self) -> list[str]:
        """The spark-submit command of the plan (the strategy's)."""
        if self.plan is None:
            raise ValueError("no plan to submit: this hook only tracks a driver")
        return self.manager.command(self.plan)

    def _build_spark_submit_command(self, application: str) -> list[str]:
        command = self.command()
        self.log.info("Spark-Submit cmd: %s", self._mask_cmd(command))
        return command

    def submit_plan(self, **popen: Any) -> str | None:
        """Run spark-submit for the plan until it returns (in cluster mode once the driver is submitted);
        the driver's id on the cluster, None in client mode.

        :raises AirflowException: spark-submit failed, or no driver id in its output in standalone cluster mode
        """
        assert self.plan is not None
        self._env = self.manager.env(self.plan) or None
        return self.submit(self.plan.application, **popen)

    def track(self, driver_id: str) -> None:
        """Track (status, kill) a driver another task submitted, by its id on the cluster: a standalone
        driver id, a YARN application id or a Kubernetes driver pod."""
        if self._is_yarn:
            self._yarn_application_id = driver_id
        elif self._is_kubernetes:
            self._kubernetes_driver_pod = driver_id
        else:
            self._driver_id = driver_id

    def driver_state(self) -> str | None:
        """One poll of the standalone driver's state on the master (``RUNNING``, ``FINISHED``, ``KILLED``...,
        ``UNKNOWN`` when the master does not know the id) with the provider's command and parser; None when
        the master did not answer."""
        self._driver_status = None
        command = self._build_track_driver_status_command()
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        if done.returncode != 0:
            self.log.warning("driver %s: status request failed (%s)", self._driver_id, done.returncode)
            return None
        self._process_spark_status_log(iter(done.stdout.splitlines()))
        return self._driver_status

    def kill_driver(self) -> None:
        """Ask the master to kill the driver (the provider's ``on_kill``: REST or ``spark-submit --kill``)."""
        self.on_kill()
