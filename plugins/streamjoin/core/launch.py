"""spark-submit command lines from a :class:`~streamjoin.core.plans.SubmitPlan`, one small strategy per
cluster manager (as the Spark provider's hook differs per master), chosen by the master URL.

What differs between cluster managers is how the driver's and executors' Python and environment reach
them and which extra arguments the manager takes; the rest of the command is the plan's. Pure: no
process is started here (:mod:`streamjoin.airflow.launcher` does that).
"""

from __future__ import annotations

from abc import ABC
from dataclasses import dataclass, replace
from typing import ClassVar

from streamjoin.core.plans import SubmitPlan


@dataclass(frozen=True)
class SparkTarget:
    """Where jobs go: what the Spark connection says (master URL, deploy mode, YARN queue, Kubernetes
    namespace, spark-submit binary)."""

    master: str
    deploy_mode: str = "client"
    queue: str | None = None
    namespace: str | None = None
    binary: str = "spark-submit"


class ClusterManager(ABC):
    """The part of a spark-submit command that depends on the cluster manager."""

    #: the master URL prefix this manager handles
    prefix: ClassVar[str]

    def __init__(self, target: SparkTarget) -> None:
        if target.deploy_mode not in ("client", "cluster"):
            raise ValueError(f"deploy mode {target.deploy_mode!r}: expected client or cluster")
        self.target = target

    @property
    def driver_is_local(self) -> bool:
        """The driver is a process of this host (client mode): it can be supervised by its pid."""
        return self.target.deploy_mode == "client"

    def driver_python(self, plan: SubmitPlan) -> str | None:
        """The driver's Python: ours in client mode, the executors' in cluster mode (it runs there)."""
        return plan.driver_python if self.driver_is_local else plan.executor_python

    def conf(self, plan: SubmitPlan) -> dict[str, str]:
        """Spark properties for the Pythons, beside the plan's own."""
        conf: dict[str, str] = {}
        if plan.executor_python:
            conf["spark.pyspark.python"] = plan.executor_python
        if driver := self.driver_python(plan):
            conf["spark.pyspark.driver.python"] = driver
        return conf | self.driver_jvm(plan)

    def driver_jvm(self, plan: SubmitPlan) -> dict[str, str]:
        """The driver's JVM options where it runs here (the class archive is a file of this host)."""
        options = plan.driver_java_options if self.driver_is_local else None
        return {"spark.driver.extraJavaOptions": options} if options else {}

    def env(self, plan: SubmitPlan) -> dict[str, str]:
        """Environment of the spark-submit process (the driver's too in client mode)."""
        driver = self.driver_python(plan)
        return {"PYSPARK_PYTHON": driver} if driver and self.driver_is_local else {}

    def extra_args(self) -> list[str]:
        return []

    def command(self, plan: SubmitPlan) -> list[str]:
        """The full spark-submit command, a list (values never reach a shell)."""
        cmd = [self.target.binary, "--master", self.target.master, "--deploy-mode", self.target.deploy_mode]
        cmd += ["--name", plan.name, *self.extra_args()]
        for key, value in sorted((plan.conf | self.conf(plan)).items()):
            cmd += ["--conf", f"{key}={value}"]
        if plan.jars:
            cmd += ["--jars", ",".join(plan.jars)]
        if plan.py_files:
            cmd += ["--py-files", ",".join(plan.py_files)]
        return [*cmd, plan.application, *plan.application_args]


class Local(ClusterManager):
    """``local[N]``: driver and executors are one process of this host, so the executors' Python is the
    driver's (an executor Python meant for a cluster's image does not exist here)."""

    prefix = "local"

    def __init__(self, target: SparkTarget) -> None:
        if target.deploy_mode != "client":
            raise ValueError(f"master {target.master}: local mode runs the driver here (deploy mode client)")
        super().__init__(target)

    def conf(self, plan: SubmitPlan) -> dict[str, str]:
        python = plan.driver_python or plan.executor_python
        pythons = {"spark.pyspark.python": python, "spark.pyspark.driver.python": python} if python else {}
        return pythons | self.driver_jvm(plan)


#: the JVM main class spark-submit itself runs a Python application with (client mode)
PYTHON_RUNNER = "org.apache.spark.deploy.PythonRunner"


class Standalone(ClusterManager):
    """``spark://host:port``: Spark's own cluster manager; the Pythons go as Spark properties.

    In cluster deploy mode spark-submit refuses a Python application on a standalone master ("not supported
    for python applications on standalone clusters"), so the driver is submitted as what client mode runs:
    :data:`PYTHON_RUNNER` with the plan's first jar as the application jar and ``<script> <py-files> <args>``
    as its arguments. The jars go on the driver's class path (``spark.driver.extraClassPath``) and the
    py-files through ``spark.submit.pyFiles`` and ``--files``: the paths must exist on the workers (a shared
    or identically provisioned file system; here, loopback).
    """

    prefix = "spark://"

    def _wrapped(self, plan: SubmitPlan) -> bool:
        return not self.driver_is_local and plan.application.endswith(".py")

    def conf(self, plan: SubmitPlan) -> dict[str, str]:
        conf = super().conf(plan)
        if self._wrapped(plan):
            conf["spark.driver.extraClassPath"] = ":".join(plan.jars)
            if plan.py_files:
                conf["spark.submit.pyFiles"] = ",".join(plan.py_files)
        return conf

    def command(self, plan: SubmitPlan) -> list[str]:
        """:raises ValueError: a Python application in cluster mode without a jar to submit it with"""
        if not self._wrapped(plan):
            return super().command(plan)
        if not plan.jars:
            raise ValueError(f"{plan.name}: a Python driver in standalone cluster mode is submitted with a jar; "
                             "the plan has none")  # fmt: skip
        args = [plan.application, ",".join(plan.py_files), *plan.application_args]
        conf = plan.conf | self.conf(plan)  # the script's properties, not the runner plan's
        runner = replace(plan, application=plan.jars[0], application_args=args, py_files=[], conf=conf)
        command = super().command(runner)
        at = command.index("--name") + 2
        files = ["--files", ",".join(plan.py_files)] if plan.py_files else []
        return [*command[:at], "--class", PYTHON_RUNNER, *files, *command[at:]]


class Yarn(ClusterManager):
    """``yarn``: the queue from the connection; in cluster mode the driver's Python goes through the
    application master's environment."""

    prefix = "yarn"

    def extra_args(self) -> list[str]:
        return ["--queue", self.target.queue] if self.target.queue else []

    def conf(self, plan: SubmitPlan) -> dict[str, str]:
        conf = super().conf(plan)
        if plan.executor_python:
            conf["spark.executorEnv.PYSPARK_PYTHON"] = plan.executor_python
            if not self.driver_is_local:
                conf["spark.yarn.appMasterEnv.PYSPARK_PYTHON"] = plan.executor_python
        return conf


class Kubernetes(ClusterManager):
    """``k8s://https://host:port``: the namespace from the connection; the Pythons are the image's."""

    prefix = "k8s://"

    def conf(self, plan: SubmitPlan) -> dict[str, str]:
        conf = super().conf(plan)
        if self.target.namespace:
            conf["spark.kubernetes.namespace"] = self.target.namespace
        if plan.executor_python:
            conf["spark.executorEnv.PYSPARK_PYTHON"] = plan.executor_python
            conf["spark.kubernetes.driverEnv.PYSPARK_PYTHON"] = self.driver_python(plan) or plan.executor_python
        return conf


MANAGERS: tuple[type[ClusterManager], ...] = (Local, Standalone, Yarn, Kubernetes)


def cluster_manager(target: SparkTarget) -> ClusterManager:
    """The strategy for ``target``'s master URL.

    :raises ValueError: a master no strategy handles (naming the ones that exist)
    """
    for manager in MANAGERS:
        if target.master.startswith(manager.prefix):
            return manager(target)
    known = ", ".join(m.prefix for m in MANAGERS)
    raise ValueError(f"Spark master {target.master!r}: expected one of {known}")
