"""The local broker's lifecycle through scripts/kafka.sh: start, idempotent start, status, stop, restart
on the formatted storage. Uses its own ports and home, next to the session's test broker."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from streamjoin.core.errors import LocalBrokerError
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.localdev.kafka_broker import KafkaBroker, broker_answers

pytestmark = pytest.mark.kafka

#: beside the session's test broker (port, port + 1) and the secured one (+ 20 to + 22): two test sessions on
#: one machine, each with its own STREAMJOIN_TEST_KAFKA_PORT, do not start brokers on each other's ports
PORT = int(os.environ.get("STREAMJOIN_TEST_KAFKA_PORT", "19092")) + 10


def kafka_sh(*args: str, timeout: float = 150) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(PROJECT_HOME / "scripts" / "kafka.sh"), *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def test_start_status_stop_and_restart(tmp_path: Path) -> None:
    home = tmp_path / "kafka"
    broker = KafkaBroker(home, PORT, PORT + 1)
    try:
        started = kafka_sh("start", "--home", str(home), "--port", str(PORT))
        assert started.returncode == 0, started.stdout + started.stderr
        assert "kafka broker started in" in started.stdout and f"127.0.0.1:{PORT}" in started.stdout
        assert broker.is_running() and broker_answers(broker.bootstrap)
        cluster_id = (home / "data" / "meta.properties").read_text()
        props = broker.properties_file.read_text()
        assert "process.roles=broker,controller" in props and "auto.create.topics.enable=false" in props

        pid = broker.pid()
        again = broker.start()
        assert again is False and broker.pid() == pid and broker.is_running()  # running and healthy: left as is
        assert (home / "data" / "meta.properties").read_text() == cluster_id

        status = kafka_sh("status", "--home", str(home), "--port", str(PORT))
        assert status.returncode == 0 and "running, healthy" in status.stdout

        stopped = kafka_sh("stop", "--home", str(home), "--port", str(PORT))
        assert stopped.returncode == 0 and "stopped" in stopped.stdout
        assert not broker.is_running() and not broker.pid_file.exists()
        assert not broker_answers(broker.bootstrap, timeout=1)
        status = kafka_sh("status", "--home", str(home), "--port", str(PORT))
        assert status.returncode == 3 and "stopped" in status.stdout

        assert broker.start(timeout=90) is True
        assert (home / "data" / "meta.properties").read_text() == cluster_id  # not formatted twice
    finally:
        broker.stop()


def test_a_port_taken_by_another_broker_is_a_clear_error(kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    other = KafkaBroker(tmp_path / "other", kafka_broker.port, PORT + 3)
    with pytest.raises(LocalBrokerError, match=rf"port {kafka_broker.port} is already in use"):
        other.start()
    assert not (tmp_path / "other" / "data").exists()  # checked before anything was written
