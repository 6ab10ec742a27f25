"""The driver lifecycle per cluster manager as plans and commands: what runs where, which lifecycle adopts a
recorded driver, and YARN and Kubernetes, which no test runs for real (no such cluster here). The standalone
cluster lifecycle runs for real in tests/cluster/test_cluster_driver.py."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from streamjoin.airflow.hooks.spark_submit import StreamJoinSparkSubmitHook
from streamjoin.core.job_files import PipelineFiles
from streamjoin.core.launch import PYTHON_RUNNER
from streamjoin.core.plans import SubmitPlan

PLAN = SubmitPlan(
    name="streamjoin-x", application="/home/jobs/stream_join.py", application_args=["--spec", "/s.yaml",
    "--kafka-config", "/secrets/k.json"], jars=["/j/kafka.jar", "/j/kernel.jar"], py_files=["/d/streamjoin.zip"],
    executor_python="/opt/py", secrets_file="/secrets/k.json",
)  # fmt: skip


def _hook(
    monkeypatch: pytest.MonkeyPatch, conn: Mapping[str, object], conn_id: str = "sj_spark"
) -> StreamJoinSparkSubmitHook:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))
    return StreamJoinSparkSubmitHook(conn_id, plan=PLAN)


def _conf(command: list[str]) -> dict[str, str]:
    return dict(command[i + 1].split("=", 1) for i, arg in enumerate(command) if arg == "--conf")


def test_a_python_driver_in_standalone_cluster_mode_is_submitted_through_pythonrunner(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from streamjoin.airflow.lifecycle import StandaloneDriver, lifecycle

    hook = _hook(monkeypatch, {"conn_type": "spark", "host": "spark://m", "port": 7077,
                               "extra": {"deploy-mode": "cluster", "rest-port": 16066}})  # fmt: skip
    command = hook.command()
    assert command[:5] == ["spark-submit", "--master", "spark://m:7077", "--deploy-mode", "cluster"]
    assert command[command.index("--class") + 1] == PYTHON_RUNNER and "--py-files" not in command
    # the application jar, then PythonRunner's arguments: the script, its py-files, the script's arguments
    tail = ["/j/kafka.jar", "/home/jobs/stream_join.py", "/d/streamjoin.zip", *PLAN.application_args]
    assert command[-len(tail) :] == tail
    conf = _conf(command)
    assert conf["spark.driver.extraClassPath"] == "/j/kafka.jar:/j/kernel.jar"
    assert conf["spark.submit.pyFiles"] == "/d/streamjoin.zip"
    assert conf["spark.pyspark.driver.python"] == conf["spark.pyspark.python"] == "/opt/py"
    # the secrets file goes by its path only; the provider's hook reads the master's REST endpoint
    assert hook._connection["rest_endpoint"] == "http://m:16066"
    assert isinstance(lifecycle(PipelineFiles(Path("/nonexistent")), hook), StandaloneDriver)


def test_client_mode_keeps_the_local_process_and_the_hook_reads_the_connection(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from streamjoin.airflow.lifecycle import LocalDriver, adopt, lifecycle

    hook = _hook(monkeypatch, {"conn_type": "spark", "host": "spark://m", "port": 7077})
    assert hook.target.deploy_mode == "client"
    assert "--class" not in hook.command()
    files = PipelineFiles(tmp_path)
    assert isinstance(lifecycle(files, hook), LocalDriver)
    files.record_driver(2**22 + 7, 2**22 + 7, str(tmp_path / "driver.log"), "streamjoin-x")
    driver = adopt(files)
    assert isinstance(driver, LocalDriver) and not driver.alive()  # no such process
    assert driver.stop(timeout=1) is False


def test_an_adopted_cluster_driver_must_be_on_the_connections_master(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from streamjoin.airflow.lifecycle import StandaloneDriver, adopt

    _hook(monkeypatch, {"conn_type": "spark", "host": "spark://m", "port": 7077, "extra": {"deploy-mode": "cluster"}})
    files = PipelineFiles(tmp_path)
    files.record_driver(None, None, None, "streamjoin-x", driver_id="driver-20261126-0001",
                        master="spark://m:7077", conn_id="sj_spark")  # fmt: skip
    driver = adopt(files)
    assert isinstance(driver, StandaloneDriver) and driver.hook.driver_id == "driver-20261126-0001"
    files.record_driver(None, None, None, "streamjoin-x", driver_id="driver-20261126-0001",
                        master="spark://other:7077", conn_id="sj_spark")  # fmt: skip
    with pytest.raises(ValueError, match="runs on spark://other:7077, but connection 'sj_spark' now names"):
        adopt(files)


def test_yarn_cluster_mode_detaches_and_kills_by_application_id(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Not run here (no YARN): the plan, the adoption and the kill command."""
    from streamjoin.airflow.lifecycle import YarnDriver, adopt, lifecycle

    conn = {"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster", "queue": "etl"}}
    hook = _hook(monkeypatch, conn)
    files = PipelineFiles(tmp_path)
    driver = lifecycle(files, hook)
    assert isinstance(driver, YarnDriver)
    command = driver.hook.manager.command(driver.detached(PLAN))
    assert command[command.index("--queue") + 1] == "etl"
    assert _conf(command)["spark.yarn.submit.waitAppCompletion"] == "false"
    assert _conf(command)["spark.yarn.appMasterEnv.PYSPARK_PYTHON"] == "/opt/py"
    # without the ResourceManager's address its state could never be read: refused before spark-submit runs
    with pytest.raises(ValueError, match="yarn_resourcemanager_webapp_address"):
        driver.submit(PLAN)
    assert files.driver() is None
    files.record_driver(None, None, None, "streamjoin-x", driver_id="application_1_0042", master="yarn",
                        conn_id="sj_spark")  # fmt: skip
    adopted = adopt(files)
    assert isinstance(adopted, YarnDriver)
    assert adopted.kill_command() == ["yarn", "application", "-kill", "application_1_0042"]


def test_kubernetes_cluster_mode_detaches_and_asks_spark_about_the_driver_pod(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Not run here (no Kubernetes; the provider's hook wants the cncf.kubernetes provider for a k8s master,
    which is not installed: a stand-in client object lets it be built): the plan and the commands."""
    import airflow.providers.apache.spark.hooks.spark_submit as provider

    from streamjoin.airflow.lifecycle import KubernetesDriver, adopt

    monkeypatch.setattr(provider, "kube_client", object(), raising=False)
    conn = {"conn_type": "spark", "host": "k8s://https://api:6443", "extra": {"deploy-mode": "cluster",
                                                                               "namespace": "jobs"}}  # fmt: skip
    hook = _hook(monkeypatch, conn)
    files = PipelineFiles(tmp_path)
    files.record_driver(None, None, None, "streamjoin-x", driver_id="streamjoin-x-1a2b-driver",
                        master="k8s://https://api:6443", conn_id="sj_spark")  # fmt: skip
    driver = adopt(files)
    assert isinstance(driver, KubernetesDriver)
    conf = _conf(driver.hook.manager.command(driver.detached(PLAN)))
    assert conf["spark.kubernetes.submission.waitAppCompletion"] == "false"
    assert conf["spark.kubernetes.namespace"] == "jobs"
    submit = ["spark-submit", "--master", "k8s://https://api:6443"]
    assert driver.status_command() == [*submit, "--status", "spark:jobs:streamjoin-x-1a2b-driver"]
    assert driver.kill_command() == [*submit, "--kill", "spark:jobs:streamjoin-x-1a2b-driver"]
    assert hook.target.namespace == "jobs"


def test_an_attached_run_on_a_standalone_cluster_waits_for_its_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's and reprocessing's attached runs: spark-submit returns when the driver ends, not once it is
    submitted (the detached lifecycle keeps Spark's default, which returns at once)."""
    from streamjoin.airflow.launcher import SparkJobLauncher

    hook = _hook(monkeypatch, {"conn_type": "spark", "host": "spark://m", "port": 7077,
                               "extra": {"deploy-mode": "cluster"}})  # fmt: skip
    attached = _conf(SparkJobLauncher(PLAN, hook.target).command())
    assert attached["spark.standalone.submit.waitAppCompletion"] == "true"
    assert "spark.standalone.submit.waitAppCompletion" not in _conf(hook.command())


def test_a_missing_spark_connection_is_an_error_not_yarn() -> None:
    from streamjoin.airflow.hooks.spark_submit import SparkConnectionMissing
    from streamjoin.airflow.launcher import spark_target

    with pytest.raises(SparkConnectionMissing, match="'sj_no_such_spark' is not defined"):
        spark_target("sj_no_such_spark")
