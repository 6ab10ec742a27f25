"""A password revoked under a running job (issue 26 items 1 and 7): the owner fails the task at its first look at
the dead driver, naming the refused password, instead of backing off and restarting into it; the job itself records
the refusal as terminal rather than the timeouts it saw.

The job runs on the secured broker's SASL_SSL listener as a user of its own; it is killed once (the owner restarts
it at once), then the user's SCRAM credential is deleted on the running broker and the driver killed again (this
broker does not make live connections re-authenticate, so the kill stands for the job's death; ``bench/soak.py``
lets the revocation kill it through ``connections.max.reauth.ms``). A second death in the window would back off
10 s before the restart; the owner asks the cluster first.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import signal
import sys
import threading
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk.exceptions import TaskDeferred

from job_modules import job_module
from streamjoin.airflow.operators.supervise import StreamJobFailure, SuperviseStreamJoinOperator, pipeline_files
from streamjoin.core.plans import PROJECT_HOME, checkpoint_dir
from streamjoin.core.spec import load_spec
from streamjoin.core.supervision import Policy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backfill"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from backfill_data import day_events, write_seed_spec
from test_supervision import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.airflow, pytest.mark.e2e]


def _scram(broker: Any, user: str, password: str | None) -> None:
    """Create (``password``) or delete (None) ``user``'s SCRAM-SHA-512 credential through the admin listener."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    change = (
        UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512) if password is None
        else UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                          password.encode())
    )  # fmt: skip
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.alter_user_scram_credentials([change], request_timeout=30).values():
        future.result(timeout=30)


async def _first_event(trigger: Any) -> dict[str, Any]:
    async for event in trigger.run():
        return dict(event.payload)
    raise AssertionError("the trigger ended without an event")


def _watch(deferral: TaskDeferred) -> dict[str, Any]:
    """Run the deferred owner's trigger as the triggerer does, until its event."""
    return asyncio.run(asyncio.wait_for(_first_event(deferral.trigger), 240))


def test_a_revoked_password_fails_the_owner_at_its_first_look_naming_it(
    secure_broker: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streamjoin.kafka.clients import produce_records
    from streamjoin.kafka.connection_check import check_connection
    from streamjoin.localdev.alert_sink import serve

    user, password = f"revoked-{uuid.uuid4().hex[:6]}", f"sj-{secrets.token_urlsafe(12)}"
    _scram(secure_broker, user, password)
    config = secure_broker.secure_client_config(user, password)
    wait_for(lambda: _accepted(config, check_connection), 60, f"{user} to log in")
    extra = {k: v for k, v in config.items() if k not in ("sasl.username", "sasl.password")}
    monkeypatch.setenv("AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT", json.dumps(
        {"conn_type": "streamjoin_kafka", "login": user, "password": password, "extra": extra}))  # fmt: skip
    sink = serve(0, tmp_path / "alerts.jsonl")
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    monkeypatch.setenv("AIRFLOW_CONN_STREAMJOIN_ALERTS_WEBHOOK", json.dumps(
        {"conn_type": "http", "host": "127.0.0.1", "port": sink.server_port, "schema": "http"}))  # fmt: skip
    monkeypatch.delenv("STREAMJOIN_ALERTS_FILE", raising=False)

    suffix = uuid.uuid4().hex[:8]
    name = f"revoked_{suffix}"
    spec_path = write_seed_spec(PROJECT_HOME / "var" / "test-output" / name, lambda b: f"{b}-{suffix}", name=name)
    spec = load_spec(spec_path)
    files = pipeline_files(spec)
    from streamjoin.airflow.operators.provision_topics import ProvisionTopicsOperator

    owner = SuperviseStreamJoinOperator(task_id="own_job", spec_path=str(spec_path), policy=Policy(), watch=600,
                                        poll=1)  # fmt: skip
    try:
        ProvisionTopicsOperator(task_id="provision", spec_path=str(spec_path)).execute({})
        phase1, phase2 = day_events(spec)
        produce_records(secure_broker.bootstrap, phase1)
        with pytest.raises(TaskDeferred) as deferred:
            owner.execute({})
        wait_for(lambda: _ran_since(files, 0.0), 240, "the first driver's first batch")

        first = files.driver()
        assert first is not None and first.pgid is not None
        os.killpg(first.pgid, signal.SIGKILL)  # the first death: restarted at once
        event = _watch(deferred.value)
        assert event["event"] == "dead", event
        with pytest.raises(TaskDeferred) as deferred:
            owner.resume({}, event)
        second = files.driver()
        assert second is not None and second.pid != first.pid and len(files.supervisor().restarts) == 1
        produce_records(secure_broker.bootstrap, phase2)
        wait_for(lambda: _ran_since(files, second.started_at or 0.0), 240, "the restarted driver's first batch")

        _scram(secure_broker, user, None)  # the password revoked on the running broker
        assert second.pgid is not None
        os.killpg(second.pgid, signal.SIGKILL)
        event = _watch(deferred.value)
        assert event["event"] == "dead", event
        with pytest.raises(StreamJobFailure) as failed:
            owner.resume({}, event)  # at the first look: no backoff, no restart
        message = str(failed.value)
        assert "a restart cannot fix: KafkaAuthenticationError" in message and "invalid credentials" in message
        assert f"as '{user}'" in message and password not in message
        assert files.driver() == second and not files.driver_alive()  # nothing launched into the refusal
        record = files.supervisor()
        assert len(record.restarts) == 1 and record.gave_up_at is not None and record.restart_after is None

        from streamjoin.airflow.notifiers import PipelineAlertNotifier  # what pipeline_dag's on_failure_callback does

        ti = SimpleNamespace(dag_id=f"streamjoin_{name}", task_id="own_job", run_id="t", log_url=None)
        PipelineAlertNotifier(spec_path=str(spec_path)).notify({"exception": failed.value, "ti": ti})
        alerts = [json.loads(line)["alert"] for line in (tmp_path / "alerts.jsonl").read_text().splitlines()]
        assert len(alerts) == 1 and alerts[0]["event"] == "streamjoin.task_failed", alerts
        assert "authentication to Kafka failed" in alerts[0]["error"] and alerts[0]["task_id"] == "own_job"
    finally:
        sink.shutdown()
        from streamjoin.airflow.lifecycle import stop_driver

        stop_driver(files, timeout=30)
        shutil.rmtree(checkpoint_dir(spec), ignore_errors=True)


def _accepted(config: dict[str, Any], check: Any) -> bool:
    try:
        check(config, timeout=5)
    except Exception:
        return False
    return True


def _ran_since(files: Any, since: float) -> bool:
    """A batch with records committed after ``since``."""
    status = files.status()
    return (
        status is not None and status.written_at is not None and status.written_at > since
        and status.counts.input_records > 0
    )  # fmt: skip


def test_the_job_records_a_revoked_password_as_terminal_not_as_the_timeout_it_saw(secure_broker: Any) -> None:
    """A password revoked under a running job reaches it as timeouts and failed tasks (its clients' sessions
    end at the broker's re-authentication): the job's ``failure.json`` must say a person must act. The job's
    :func:`classify` asks the real cluster before recording a transient error."""
    from streamjoin.core.errors import KafkaAuthenticationError, KafkaUnavailableError

    job = job_module("stream_join")

    user, password = f"job-{uuid.uuid4().hex[:8]}", secrets.token_urlsafe(12)
    _scram(secure_broker, user, password)
    config = secure_broker.secure_client_config(user, password)
    seen = KafkaUnavailableError("offsets of `clicks` [0]: KafkaError{code=_TIMED_OUT}")
    kept = job.classify(seen, config)  # the password still works: what the job saw stands (transient)
    assert (kept.error, kept.transient) == ("KafkaUnavailableError", True)

    _scram(secure_broker, user, None)  # revoked
    failure = job.classify(seen, config)
    assert (failure.error, failure.transient) == ("KafkaAuthenticationError", False), failure
    assert f"as '{user}'" in failure.message and "_TIMED_OUT" in failure.message and password not in failure.message
    unreachable = job.classify(seen, {**config, "bootstrap.servers": "127.0.0.1:1"}, timeout=3)
    assert (unreachable.error, unreachable.transient) == ("KafkaUnavailableError", True)
    terminal = job.classify(KafkaAuthenticationError("x", "y"), None)  # terminal errors are recorded as they are
    assert not terminal.transient
