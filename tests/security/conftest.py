"""Fixtures of the security tests: a SASL_SSL broker (one per session, started only when these tests run) and
a real Airflow api-server with the simple auth manager, users and teams.

  STREAMJOIN_TEST_KAFKA_PORT  the secured broker takes port + 20 (PLAINTEXT, admin), + 21 (controller) and
                              + 22 (SASL_SSL), home ``.local/test-kafka-secure-<port + 20>``
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from secure_kafka import SECURE_USER

from api_server import ApiServer, copy_test_db, start_api_server, stop_api_servers
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.localdev.kafka_broker import KafkaBroker

KAFKA_TEST_PORT = int(os.environ.get("STREAMJOIN_TEST_KAFKA_PORT", "19092"))


@pytest.fixture(scope="session")
def secure_broker() -> Iterator[KafkaBroker]:
    """A broker with a SASL_SSL listener (SCRAM-SHA-512) and a CA made for it; a new random password for
    :data:`SECURE_USER` every session (the secret-scan looks for it)."""
    port = KAFKA_TEST_PORT + 20
    password = f"sj-{secrets.token_urlsafe(18)}"
    broker = KafkaBroker(
        PROJECT_HOME / ".local" / f"test-kafka-secure-{port}", port, port + 1, heap="512m",
        secure_port=port + 2, scram_users={SECURE_USER: password},
    )  # fmt: skip
    started = broker.start(timeout=120)
    if not started:  # a previous session's broker: give the user this session's password
        broker.create_scram_users()
    yield broker
    if started and os.environ.get("STREAMJOIN_KEEP_BROKER") != "1":
        broker.stop()


SEED_TEAMS = """
import sys
from airflow.models.dag import DagModel
from airflow.models.dagbundle import DagBundleModel
from airflow.models.team import Team
from airflow.utils.session import create_session

owners = dict(arg.split("=", 1) for arg in sys.argv[1:])  # dag_id=team
with create_session() as session:
    for team_name in sorted(set(owners.values()) | {"analytics"}):
        team = session.query(Team).filter_by(name=team_name).one_or_none() or Team(name=team_name)
        bundle = session.get(DagBundleModel, f"bundle_{team_name}") or DagBundleModel(name=f"bundle_{team_name}")
        bundle.teams = [team]
        session.add_all([team, bundle])
        session.flush()
        for dag_id, owner in owners.items():
            if owner == team_name:
                session.merge(DagModel(dag_id=dag_id, bundle_name=f"bundle_{team_name}", fileloc="/dev/null"))
"""


@pytest.fixture
def api_server(tmp_path: Path) -> Iterator[Callable[..., ApiServer]]:
    """``start(pipelines_dir, dag_teams={dag_id: team}, env={...})`` -> an api-server on a copy of the test DB
    in multi-team mode: ``admin`` (ADMIN) and ``viewer`` (VIEWER of team ``analytics``; DAGs of other teams
    are not readable by it)."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(pipelines: Path, dag_teams: dict[str, str] | None = None, env: dict[str, str] | None = None) -> ApiServer:
        home = tmp_path / f"airflow-{len(procs)}"
        home.mkdir()
        copy_test_db(home)
        passwords = {"admin": secrets.token_urlsafe(12), "viewer": secrets.token_urlsafe(12)}
        (home / "passwords.json").write_text(json.dumps(passwords))
        airflow_env = {
            **os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            "AIRFLOW__CORE__MULTI_TEAM": "True", "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:ADMIN,viewer:VIEWER:analytics",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "STREAMJOIN_PIPELINES_DIR": str(pipelines), **(env or {}),
        }  # fmt: skip
        pairs = [f"{dag_id}={team}" for dag_id, team in (dag_teams or {}).items()]
        seeded = subprocess.run([sys.executable, "-c", SEED_TEAMS, *pairs], env=airflow_env, capture_output=True,
                                text=True, timeout=120, check=False)  # fmt: skip
        assert seeded.returncode == 0, seeded.stderr[-3000:]
        url, log = start_api_server(airflow_env, tmp_path, procs)
        return ApiServer(url, passwords, log)

    yield start
    stop_api_servers(procs)
