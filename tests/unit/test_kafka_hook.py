"""The streamjoin Kafka connection: where bootstrap servers come from, what a connection may not carry."""

from __future__ import annotations

import json

import pytest

from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook
from streamjoin.airflow.provider_info import get_provider_info

ENV = "AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT"


def test_connection_contract() -> None:
    assert StreamJoinKafkaHook.conn_type == "streamjoin_kafka"
    assert StreamJoinKafkaHook.default_conn_name == "streamjoin_kafka_default"
    assert StreamJoinKafkaHook.conn_name_attr == "kafka_conn_id"
    assert StreamJoinKafkaHook.hook_name
    assert {"connection-type": "streamjoin_kafka", "hook-class-name": (
        "streamjoin.airflow.hooks.kafka_admin.StreamJoinKafkaHook"
    )} in get_provider_info()["connection-types"]  # fmt: skip


def test_bootstrap_from_host_and_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, json.dumps({"conn_type": "streamjoin_kafka", "host": "127.0.0.1", "port": 19092}))
    assert StreamJoinKafkaHook().bootstrap_servers() == "127.0.0.1:19092"


def test_bootstrap_from_extra_wins_and_other_settings_pass_through(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = {"bootstrap.servers": "b1:9092,b2:9092", "security.protocol": "PLAINTEXT"}
    monkeypatch.setenv(
        "AIRFLOW_CONN_OTHER_KAFKA", json.dumps({"conn_type": "streamjoin_kafka", "host": "ignored", "extra": extra})
    )
    assert StreamJoinKafkaHook("other_kafka").admin_config() == extra


def test_bootstrap_from_uri(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "streamjoin-kafka://broker.example:9093")
    assert StreamJoinKafkaHook().bootstrap_servers() == "broker.example:9093"


def test_no_bootstrap_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, json.dumps({"conn_type": "streamjoin_kafka"}))
    with pytest.raises(ValueError, match=r"'streamjoin_kafka_default': bootstrap\.servers: missing"):
        StreamJoinKafkaHook().bootstrap_servers()


def test_callbacks_cannot_come_from_a_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = {"bootstrap.servers": "b:1", "oauth_cb": "evil.module:fn"}
    monkeypatch.setenv(ENV, json.dumps({"conn_type": "streamjoin_kafka", "extra": extra}))
    with pytest.raises(ValueError, match="oauth_cb"):
        StreamJoinKafkaHook().admin_config()
