"""docker-compose.yaml: valid against the Compose specification's JSON schema, no secrets in it, and every
service the DAGs need is there with the ports and hosts the Airflow connections in it point at.

No Docker engine runs here; ``docker compose config`` runs only where a compose client is installed.
The schema is ``deploy/compose-spec/compose-spec.json``, vendored from a PyPI package (see its SOURCE.md).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from streamjoin.core.plans import PROJECT_HOME

COMPOSE_FILE = PROJECT_HOME / "docker-compose.yaml"
ENV_EXAMPLE = PROJECT_HOME / ".env.example"
SCHEMA_FILE = PROJECT_HOME / "deploy" / "compose-spec" / "compose-spec.json"
MOUNT_ROOT = "/opt/streamjoin"
SECRET_WORDS = ("PASSWORD", "FERNET", "SECRET", "TOKEN")
KAFKA_BROKERS = ("kafka-1", "kafka-2", "kafka-3")
AIRFLOW_SERVICES = (
    "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-worker", "airflow-triggerer",
)  # fmt: skip


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return dict(yaml.safe_load(COMPOSE_FILE.read_text()))


def _env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def _published(service: dict[str, Any]) -> dict[int, int]:
    """container port -> host port of ``ports: ["H:C"]``."""
    ports = {}
    for entry in service.get("ports", []):
        host, _, container = str(entry).rpartition(":")
        ports[int(container)] = int(host)
    return ports


def test_compose_file_is_valid_against_the_compose_specification_schema(compose: dict[str, Any]) -> None:
    import jsonschema

    schema = json.loads(SCHEMA_FILE.read_text())
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    errors = sorted(validator_class(schema).iter_errors(compose), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:10])
    # the check bites: a misspelt service key is refused
    broken = json.loads(json.dumps(compose))
    broken["services"]["redis"]["helthcheck"] = broken["services"]["redis"].pop("healthcheck")
    assert any("helthcheck" in e.message for e in validator_class(schema).iter_errors(broken))


def _compose_client() -> list[str] | None:
    for command in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(command[0]) is None:
            continue
        probe = subprocess.run([*command, "version"], capture_output=True, text=True, timeout=30)
        if probe.returncode == 0:
            return command
    return None


def test_docker_compose_config_accepts_the_file(tmp_path: Path) -> None:
    client = _compose_client()
    if client is None:
        pytest.skip("no docker compose client on this machine (docker compose / docker-compose)")
    env_file = tmp_path / ".env"
    secrets = r"^(\w*(PASSWORD|FERNET_KEY|JWT_SECRET))=$"
    filled = re.sub(secrets, r"\1=not-a-secret", ENV_EXAMPLE.read_text(), flags=re.M)
    env_file.write_text(filled)
    done = subprocess.run(
        [*client, "--env-file", str(env_file), "-f", str(COMPOSE_FILE), "config", "--quiet"],
        capture_output=True, text=True, timeout=120, cwd=PROJECT_HOME,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_stack_has_every_service_with_health_checks_and_ordered_start(compose: dict[str, Any]) -> None:
    services = compose["services"]
    needed = {"postgres", "redis", "airflow-init", *AIRFLOW_SERVICES, *KAFKA_BROKERS, "spark-master"}
    assert needed <= services.keys(), needed - services.keys()
    workers = [name for name, s in services.items() if "deploy.worker.Worker" in " ".join(s.get("command", []))]
    assert len(workers) == 2, workers
    for name in needed - {"airflow-init"} | set(workers):
        assert "test" in services[name].get("healthcheck", {}), f"{name} has no health check"
    for name in AIRFLOW_SERVICES:
        depends = services[name]["depends_on"]
        assert depends["postgres"]["condition"] == depends["redis"]["condition"] == "service_healthy", name
        assert depends["airflow-init"]["condition"] == "service_completed_successfully", name
    # the worker runs the jobs: it waits for the brokers and the Spark cluster
    worker_deps = services["airflow-worker"]["depends_on"]
    for name in (*KAFKA_BROKERS, "spark-master", *workers):
        assert worker_deps[name]["condition"] == "service_healthy", name
    assert all(services[w]["depends_on"]["spark-master"]["condition"] == "service_healthy" for w in workers)
    assert _env(services["airflow-scheduler"])["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"


def test_images_match_the_pinned_versions(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert all(services[b]["image"] == "apache/kafka:${KAFKA_VERSION:-4.1.1}" for b in KAFKA_BROKERS)
    assert services["spark-master"]["image"] == "${SPARK_IMAGE:-spark:4.1.1-scala2.13-java17-ubuntu}"
    import pyspark

    assert pyspark.__version__ == "4.1.1", "the compose file's Spark image must follow the pinned pyspark"
    dockerfile = (PROJECT_HOME / "deploy" / "airflow" / "Dockerfile").read_text()
    assert "ARG AIRFLOW_VERSION=3.3.2" in dockerfile and "ARG PYTHON_VERSION=3.11" in dockerfile


def test_our_folders_are_mounted_where_airflow_and_the_jobs_look(compose: dict[str, Any]) -> None:
    for name in AIRFLOW_SERVICES:
        service = compose["services"][name]
        volumes = {v.split(":")[1]: v.split(":")[0] for v in service["volumes"]}
        for folder in ("dags", "plugins", "jobs", "include"):
            assert volumes[f"{MOUNT_ROOT}/{folder}"] == f"./{folder}", (name, folder)
        env = _env(service)
        assert env["AIRFLOW__CORE__DAGS_FOLDER"] == f"{MOUNT_ROOT}/dags"
        assert env["AIRFLOW__CORE__PLUGINS_FOLDER"] == f"{MOUNT_ROOT}/plugins"
        assert env["STREAMJOIN_HOME"] == MOUNT_ROOT
        assert (PROJECT_HOME / volumes[f"{MOUNT_ROOT}/include/pipelines/clicks_per_region.yaml"]).is_file()


def test_no_secrets_in_the_compose_file(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for key, value in _env(service).items():
            if any(word in key for word in SECRET_WORDS):
                assert re.fullmatch(r"\$\{\w+(:\?[^}]*|:-)?\}", value), f"{name}: {key} must come from .env"
            assert not re.search(r"://[^:/@]+:[^$@{]+@", value), f"{name}: {key} embeds a password: {value}"
    lines = ENV_EXAMPLE.read_text().splitlines()
    example = dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))
    required = set(re.findall(r"\$\{(\w+):\?", COMPOSE_FILE.read_text()))
    assert required <= example.keys(), f".env.example lacks {required - example.keys()}"
    assert all(example[k] == "" for k in required if any(w in k for w in SECRET_WORDS)), "secrets left in .env.example"


def test_airflow_connections_point_at_the_brokers_and_the_spark_master(compose: dict[str, Any]) -> None:
    """Parse the connection values as Airflow does and check each host:port is a service's listener."""
    from airflow.models.connection import Connection

    services = compose["services"]
    env = _env(services["airflow-worker"])
    kafka = Connection(conn_id="streamjoin_kafka_default", **json.loads(env["AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT"]))
    assert kafka.conn_type == "streamjoin_kafka"
    servers = [s.rsplit(":", 1) for s in kafka.extra_dejson["bootstrap.servers"].split(",")]
    assert sorted(host for host, _ in servers) == list(KAFKA_BROKERS)
    for host, port in servers:
        broker_env = _env(services[host])
        assert f"PLAINTEXT://{host}:{port}" in broker_env["KAFKA_ADVERTISED_LISTENERS"].split(",")
        assert f"PLAINTEXT://:{port}" in broker_env["KAFKA_LISTENERS"].split(",")
        assert broker_env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093"
        assert broker_env["KAFKA_DEFAULT_REPLICATION_FACTOR"] == "3"
    assert len({_env(services[b])["KAFKA_NODE_ID"] for b in KAFKA_BROKERS}) == 3

    spark = Connection(conn_id="spark_default", **json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"]))
    master = f"{spark.host}:{spark.port}"  # as the Spark provider's hook builds it
    assert master == "spark://spark-master:7077"
    command = services["spark-master"]["command"]
    assert command[command.index("--port") + 1] == str(urlsplit(master).port)
    assert command[command.index("--host") + 1] == urlsplit(master).hostname
    for name, service in services.items():
        if "deploy.worker.Worker" in " ".join(service.get("command", [])):
            assert master in service["command"], name
    assert _published(services["spark-master"])[8080] == 18080
    assert _published(services["airflow-apiserver"])[8080] == 8080


def test_the_deployed_spec_is_the_seed_with_replication_three(compose: dict[str, Any]) -> None:
    from streamjoin.core.spec import load_spec
    from streamjoin.core.topic_plan import plan_topics

    seed = yaml.safe_load((PROJECT_HOME / "include" / "pipelines" / "clicks_per_region.yaml").read_text())
    deployed_path = PROJECT_HOME / "deploy" / "pipelines" / "clicks_per_region.yaml"
    deployed = yaml.safe_load(deployed_path.read_text())
    assert {k: v for k, v in deployed.items() if k != "kafka"} == {k: v for k, v in seed.items() if k != "kafka"}
    plan = plan_topics(load_spec(deployed_path))
    assert {t.replication_factor for t in plan.topics} == {3}
    assert {t.config["min.insync.replicas"] for t in plan.topics} == {"2"}
    assert len(KAFKA_BROKERS) >= plan.max_replication_factor
