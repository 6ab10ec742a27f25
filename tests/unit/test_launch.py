"""The one launcher's plans and per-cluster-manager commands, as data; the stop-marker/intent files."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamjoin.core.job_files import PipelineFiles
from streamjoin.core.launch import Kubernetes, Local, SparkTarget, Standalone, Yarn, cluster_manager
from streamjoin.core.plans import PROJECT_HOME, SubmitPlan, plan_submit
from streamjoin.core.spec import load_spec
from streamjoin.core.supervision import Event, Health, Policy, State, watch_step

SPEC_PATH = "include/pipelines/clicks_per_region.yaml"
SPEC = load_spec(PROJECT_HOME / SPEC_PATH)


def _plan(monkeypatch: pytest.MonkeyPatch, executor: str | None = "/opt/python3") -> SubmitPlan:
    if executor:
        monkeypatch.setenv("STREAMJOIN_EXECUTOR_PYTHON", executor)
    else:
        monkeypatch.delenv("STREAMJOIN_EXECUTOR_PYTHON", raising=False)
    return plan_submit(SPEC, SPEC_PATH, ["--kafka-config", "/s/k.json"], ["a.jar", "b.jar"], py_files=["z.zip"])


def _conf(command: list[str]) -> dict[str, str]:
    return dict(command[i + 1].split("=", 1) for i, arg in enumerate(command) if arg == "--conf")


def test_every_manager_gets_the_plans_jars_py_files_args_and_the_executor_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan = _plan(monkeypatch)
    assert plan.secrets_file == "/s/k.json"
    for master, kind in [("spark://h:7077", Standalone), ("yarn", Yarn), ("k8s://https://h:443", Kubernetes)]:
        manager = cluster_manager(SparkTarget(master=master, deploy_mode="cluster", queue="q", namespace="ns"))
        assert isinstance(manager, kind)
        command = manager.command(plan)
        assert command[:5] == ["spark-submit", "--master", master, "--deploy-mode", "cluster"]
        assert command[command.index("--jars") + 1] == "a.jar,b.jar" and "z.zip" in command
        assert command[-len(plan.application_args) :] == plan.application_args
        assert "--kafka-config" in plan.application_args and "/s/k.json" in command
        conf = _conf(command)
        # in cluster mode the driver runs beside the executors: both take the executors' Python
        assert conf["spark.pyspark.python"] == conf["spark.pyspark.driver.python"] == "/opt/python3"
        assert not manager.driver_is_local
    command = cluster_manager(SparkTarget(master="yarn", deploy_mode="cluster", queue="q")).command(plan)
    assert command[command.index("--queue") + 1] == "q"
    assert _conf(command)["spark.yarn.appMasterEnv.PYSPARK_PYTHON"] == "/opt/python3"
    k8s = _conf(cluster_manager(SparkTarget(master="k8s://https://h", namespace="ns")).command(plan))
    assert k8s["spark.kubernetes.namespace"] == "ns" and k8s["spark.executorEnv.PYSPARK_PYTHON"] == "/opt/python3"


def test_local_and_client_mode_run_the_driver_here_with_our_python(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    plan = _plan(monkeypatch)
    local = cluster_manager(SparkTarget(master="local[2]"))
    assert isinstance(local, Local) and local.driver_is_local
    # local executors live in the driver: a cluster image's Python does not exist here
    assert _conf(local.command(plan))["spark.pyspark.python"] == sys.executable
    assert local.env(plan) == {"PYSPARK_PYTHON": sys.executable}
    client = cluster_manager(SparkTarget(master="spark://h:7077"))
    conf = _conf(client.command(plan))
    assert conf["spark.pyspark.python"] == "/opt/python3" and conf["spark.pyspark.driver.python"] == sys.executable
    yarn = _conf(cluster_manager(SparkTarget(master="yarn")).command(_plan(monkeypatch, None)))
    assert yarn["spark.pyspark.python"] == sys.executable  # no STREAMJOIN_EXECUTOR_PYTHON: ours
    with pytest.raises(ValueError, match="deploy mode client"):
        cluster_manager(SparkTarget(master="local[2]", deploy_mode="cluster"))
    with pytest.raises(ValueError, match="expected one of local, spark://, yarn, k8s://"):
        cluster_manager(SparkTarget(master="mesos://h:5050"))


def test_the_owners_trigger_fires_on_death_stop_redeploy_lag_and_the_end_of_the_watch(tmp_path: Path) -> None:
    policy = Policy(lag_threshold=10, lag_grace=60)

    def step(
        state: State, intent: str = "run", *, waiting: bool = False, since: float | None = None, now: float = 100
    ) -> tuple[Event | None, float | None]:
        return watch_step(Health(state, "", {"t": 11} if state is State.LAGGING else {}), intent, waiting=waiting,
                          lagging_since=since, now=now, watch_until=1000, policy=policy)  # fmt: skip

    assert step(State.HEALTHY) == (None, None)
    assert step(State.DEAD) == (Event.DEAD, None)
    assert step(State.STOPPED, "stop") == (Event.STOPPED, None)
    assert step(State.DEAD, "redeploy") == (Event.REDEPLOY, None)
    assert step(State.STOPPED, "stop", waiting=True) == (None, None)  # meant to be down: no event
    assert step(State.STOPPED, "redeploy", waiting=True) == (Event.REDEPLOY, None)
    assert step(State.STOPPED, "stop", waiting=True, now=1000) == (Event.WATCHED, None)
    assert step(State.LAGGING) == (None, 100)  # lag starts: the grace period runs
    assert step(State.LAGGING, since=40) == (Event.LAGGING, 40)
    assert step(State.HEALTHY, since=40, now=1000) == (Event.WATCHED, None)
    files = PipelineFiles(tmp_path)
    assert files.intent() == "run" and not files.stopped_on_purpose()
    files.set_intent("stop")
    assert files.intent() == "stop" and files.stopped_on_purpose()
    with pytest.raises(ValueError, match="expected one of run, stop, redeploy"):
        files.set_intent("pause")


@pytest.mark.parametrize(
    ("connection", "master", "deploy_mode"),
    [
        ({"conn_type": "spark"}, "local[*]", "client"),
        ({"conn_type": "spark", "host": "local[2]"}, "local[2]", "client"),
        ({"conn_type": "spark", "host": "spark://h", "port": 7077, "extra": {"deploy-mode": "cluster"}},
         "spark://h:7077", "cluster"),
        ({"conn_type": "spark", "host": "yarn", "extra": {"queue": "etl"}}, "yarn", "client"),
    ],
)  # fmt: skip
def test_one_reading_of_the_spark_connection_for_jobs_and_quality_sessions(
    monkeypatch: pytest.MonkeyPatch, connection: dict[str, object], master: str, deploy_mode: str
) -> None:
    """The launcher and the quality operator's in-task session read the master from the same function."""
    import json

    from streamjoin.airflow.launcher import spark_target

    monkeypatch.setenv("AIRFLOW_CONN_SJ_SPARK_TEST", json.dumps(connection))
    target = spark_target("sj_spark_test")
    assert (target.master, target.deploy_mode) == (master, deploy_mode)


def test_the_specs_spark_settings_reach_spark_submit_and_secrets_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from streamjoin.core.errors import SpecError
    from streamjoin.core.spec import parse_spec

    fields = SPEC.model_dump(mode="json")
    fields["spark"] = {"driver_memory": "4g", "executor_memory": "2g", "executor_cores": 2,
                       "conf": {"spark.executor.instances": "3", "spark.driver.extraJavaOptions": "-Dx=1"}}  # fmt: skip
    spec = parse_spec(fields)
    monkeypatch.setenv("STREAMJOIN_EXECUTOR_PYTHON", "/opt/python3")
    plan = plan_submit(spec, SPEC_PATH, ["--bootstrap", "b:9092"], ["a.jar"])
    for target, driver_here in [(SparkTarget(master="local[2]"), True), (SparkTarget(master="yarn"), True),
                                (SparkTarget(master="yarn", deploy_mode="cluster"), False)]:  # fmt: skip
        conf = _conf(cluster_manager(target).command(plan))
        assert conf["spark.driver.memory"] == "4g" and conf["spark.executor.memory"] == "2g"
        assert conf["spark.executor.cores"] == "2" and conf["spark.executor.instances"] == "3"
        assert conf["spark.sql.shuffle.partitions"] == "4"
        # the spec's own driver options, after the class archive's where the driver runs here
        options = conf["spark.driver.extraJavaOptions"]
        assert options.endswith("-Dx=1") and ("SharedArchiveFile" in options) is driver_here, (target, options)
    fields["spark"] = {"conf": {"spark.hadoop.fs.s3a.secret.key": "abc"}}
    secret = r"spark\.conf\.spark\.hadoop\.fs\.s3a\.secret\.key: .* looks like a secret"
    with pytest.raises(SpecError, match=secret) as caught:
        parse_spec(fields)
    assert "abc" not in str(caught.value)  # the key, never its value
    fields["spark"] = {"driver_memory": "4 GB"}
    with pytest.raises(SpecError, match=r"spark\.driver_memory"):
        parse_spec(fields)
