"""The seed pipeline end to end on a SASL_SSL (SCRAM-SHA-512) broker with a private CA, through Airflow's
operators: provision, the supervised stream join, the lag on the Stream jobs page, a reprocessed day and its
quality check. Then every log and file the run produced is scanned for the password; and a wrong password
fails fast, naming the connection."""

from __future__ import annotations

import json
import shutil
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from streamjoin.airflow.operators.provision_topics import ProvisionTopicsOperator
from streamjoin.airflow.operators.reprocess import ReprocessDayOperator
from streamjoin.airflow.operators.stream_join import StreamJoinJobOperator
from streamjoin.airflow.operators.supervise import StopStreamJoinOperator, SuperviseStreamJoinOperator
from streamjoin.core.errors import KafkaAuthenticationError
from streamjoin.core.job_files import DriverRecord
from streamjoin.core.plans import PROJECT_HOME, checkpoint_dir, secrets_dir
from streamjoin.core.spec import load_spec
from streamjoin.core.supervision import Policy
from streamjoin.kafka.client_config import KafkaClientConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backfill"))  # the backfill tier's day of events
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))  # its bounded wait
from backfill_data import DAY, REGIONS, day_events, write_seed_spec
from secure_kafka import SECURE_USER, kafka_connection, spark_event_log_conf
from test_supervision import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.airflow]
CONN = "AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT"


def _group_cmdlines(pgid: int) -> list[str]:
    """Command lines of every process of a process group (spark-submit, its JVM, Python workers)."""
    lines = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[2]) == pgid:
                lines.append((stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except (OSError, ValueError, IndexError):
            continue
    return lines


def _files_containing(secret: str, roots: list[Path]) -> list[str]:
    needle = secret.encode()
    return [
        str(path) for root in roots if root.exists() for path in ([root] if root.is_file() else root.rglob("*"))
        if path.is_file() and needle in path.read_bytes()
    ]  # fmt: skip


def _suite(path: Path, pipeline: str) -> Path:
    path.write_text(yaml.safe_dump({
        "pipeline": pipeline,
        "enriched": {"match_rate_min": 0.5, "values": {"value.region": {"in_set": [*REGIONS, "UNKNOWN"]}}},
    }))  # fmt: skip
    return path


@pytest.mark.e2e
def test_seed_pipeline_on_sasl_ssl_leaves_no_secret_anywhere(
    secure_broker: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api_server: Any,
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from streamjoin.airflow.operators.quality import DataQualityOperator
    from streamjoin.kafka.admin import delete_topics
    from streamjoin.kafka.clients import produce_records
    from streamjoin.kafka.topics import plan_topics

    caplog.set_level("DEBUG")
    password = secure_broker.scram_users[SECURE_USER]
    monkeypatch.setenv(CONN, kafka_connection(secure_broker))
    for key, value in spark_event_log_conf(tmp_path / "spark-conf").items():
        monkeypatch.setenv(key, value)
    suffix = uuid.uuid4().hex[:8]
    name = f"secured_{suffix}"
    work = PROJECT_HOME / "var" / "test-output" / name
    spec_path = write_seed_spec(work, lambda base: f"{base}-{suffix}", name=name)
    spec = load_spec(spec_path)
    kafka = KafkaClientConfig(secure_broker.secure_client_config(SECURE_USER), "test")
    secrets_before = set(secrets_dir().glob("*")) if secrets_dir().exists() else set()
    cmdlines: list[str] = []
    pages: list[str] = []
    try:
        ProvisionTopicsOperator(task_id="provision", spec_path=str(spec_path)).execute({})
        phase1, phase2 = day_events(spec)
        produce_records(kafka, phase1 + phase2)

        supervise = SuperviseStreamJoinOperator(task_id="supervise", spec_path=str(spec_path), policy=Policy())
        supervise.execute({})  # launches the job detached
        driver = wait_for(
            lambda: (checkpoint_dir(spec) / "driver.json").exists() and supervise_driver(spec), 30, "driver"
        )
        cmdlines += _group_cmdlines(int(driver.pgid or -1))

        def caught_up() -> bool:
            report = supervise.execute({})
            return report["state"] == "healthy" and bool(report["lag"]) and not any(report["lag"].values())

        wait_for(caught_up, 240, "the secured job to consume every input record (healthy, lag 0)", interval=3)
        cmdlines += _group_cmdlines(int(driver.pgid or -1))

        server = api_server(work)  # the Stream jobs page reads the lag through the secured connection
        status, body = server.get(f"/streamjoin/api/jobs/{name}", "admin")
        assert status == 200, body
        row = json.loads(body)
        assert row["state"] == "healthy" and row["lag"] == {spec.left.topic: 0, spec.right.topic: 0}, row
        pages += [body, server.get("/streamjoin/jobs", "admin")[1]]
        StopStreamJoinOperator(task_id="stop", spec_path=str(spec_path), timeout=60).execute({})

        outcome = ReprocessDayOperator(task_id="reprocess", spec_path=str(spec_path), day=DAY.isoformat()).execute({})
        assert Path(outcome["path"]).is_dir(), outcome
        check = DataQualityOperator(
            task_id="check", spec_path=str(spec_path), partition_path=outcome["path"], day=DAY.isoformat(),
            suite_path=str(_suite(work / "quality.yaml.txt", name)), data_docs_dir=str(work / "docs"),
            spark_master="local[1]",
        ).execute({"run_id": "secured", "ti": SimpleNamespace(try_number=1)})  # fmt: skip
        assert check["success"], check

        events = list((tmp_path / "spark-conf" / "events").glob("*"))
        assert len(events) >= 2, f"expected the event logs of the stream job and the reprocessing, got {events}"
        logs = caplog.text + "".join(capfd.readouterr())
        assert "SASL_SSL" in logs or "SCRAM" in logs  # the run did log about its secured connection
        leaks = _files_containing(password, [work, checkpoint_dir(spec), tmp_path, secrets_dir()])
        leaks += [f"process: {line[:200]}" for line in cmdlines if password in line]
        leaks += ["task logs" for text in [logs] if password in text]
        leaks += ["status page" for page in pages if password in page]
        assert not leaks, f"the password leaked into: {leaks}"
        assert (set(secrets_dir().glob("*")) if secrets_dir().exists() else set()) <= secrets_before  # all deleted
        # the scan finds a secret where there is one (so an empty result means something)
        (tmp_path / "control").write_text(f"x{password}x")
        assert _files_containing(password, [tmp_path]) == [str(tmp_path / "control")]
    finally:
        StopStreamJoinOperator(task_id="stop", spec_path=str(spec_path), timeout=30).execute({})
        delete_topics(kafka.librdkafka(), plan_topics(spec).names, timeout=30)
        shutil.rmtree(checkpoint_dir(spec), ignore_errors=True)


def supervise_driver(spec: Any) -> DriverRecord | None:
    from streamjoin.airflow.operators.supervise import pipeline_files

    return pipeline_files(spec).driver()


def test_a_wrong_password_fails_fast_naming_the_connection(
    secure_broker: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "not-the-password-" + uuid.uuid4().hex[:6]
    monkeypatch.setenv(CONN, kafka_connection(secure_broker, password=wrong))
    spec_path = write_seed_spec(tmp_path, lambda base: f"{base}-never-created", name="secured_wrong_password")
    for operator in (
        ProvisionTopicsOperator(task_id="provision", spec_path=str(spec_path)),
        StreamJoinJobOperator(task_id="run", spec_path=str(spec_path), available_now=True),
    ):
        with pytest.raises(KafkaAuthenticationError) as caught:
            operator.execute({})
        message = str(caught.value)
        assert message.startswith("connection 'streamjoin_kafka_default' (SASL_SSL, SCRAM-SHA-512 as 'streamjoin'")
        assert "invalid credentials" in message and wrong not in message
