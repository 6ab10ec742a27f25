"""The local broker's configuration and its failure messages, without starting a JVM."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamjoin.core.errors import KafkaUnavailableError
from streamjoin.localdev.kafka_broker import KafkaBroker


def test_server_properties_describe_a_single_node_kraft_broker(tmp_path: Path) -> None:
    props = KafkaBroker(tmp_path, 29392, 29393).server_properties()
    assert props["process.roles"] == "broker,controller"
    assert props["node.id"] == "1"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:29393"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:29392,CONTROLLER://127.0.0.1:29393"
    assert props["log.dirs"] == str(tmp_path.resolve() / "data")
    assert props["offsets.topic.replication.factor"] == "1"
    assert props["transaction.state.log.replication.factor"] == "1"
    assert props["group.initial.rebalance.delay.ms"] == "0"
    assert props["auto.create.topics.enable"] == "false"
    assert props["num.partitions"] == "4"


def test_a_broker_never_started_is_not_running(tmp_path: Path) -> None:
    broker = KafkaBroker(tmp_path, 29392, 29393)
    assert not broker.is_running()
    assert broker.bootstrap == "127.0.0.1:29392"
    (tmp_path / "broker.pid").write_text("1\n")  # pid 1 is alive but is not this broker
    assert not broker.is_running()
    assert not broker.stop()


def test_waiting_in_vain_says_what_the_broker_logged_last(tmp_path: Path) -> None:
    broker = KafkaBroker(tmp_path, 29392, 29393)  # nothing listens on 29392
    broker.log_file.write_text("".join(f"log line {i}\n" for i in range(1, 41)))
    with pytest.raises(KafkaUnavailableError) as caught:
        broker.wait_healthy(timeout=0.5)
    message = str(caught.value)
    assert "127.0.0.1:29392 did not answer within" in message
    assert "log line 11\n" in message and "log line 40" in message
    assert "log line 10\n" not in message  # only the last 30 lines
    assert caught.value.transient
