"""ProvisionTopicsOperator run for real: connection from the environment, topics on the broker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kafka_helpers import create_topic, describe, seed_spec_data, topic_names, write_spec

from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook
from streamjoin.airflow.operators.provision_topics import ProvisionTopicsOperator
from streamjoin.core.errors import CoPartitioningError
from streamjoin.localdev.kafka_broker import KafkaBroker

pytestmark = pytest.mark.kafka


@pytest.fixture
def kafka_connection(kafka_broker: KafkaBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    conn = {"conn_type": "streamjoin_kafka", "host": "127.0.0.1", "port": kafka_broker.port}
    monkeypatch.setenv("AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT", json.dumps(conn))


def test_operator_creates_the_pipelines_topics_then_finds_them_ok(
    kafka_connection: None, kafka_bootstrap: str, topic_factory: Any, tmp_path: Path
) -> None:
    data = seed_spec_data(topic_factory)
    spec_path = write_spec(tmp_path, data)
    operator = ProvisionTopicsOperator(task_id="provision_topics", spec_path=str(spec_path))
    assert operator.template_fields == ("spec_path", "kafka_conn_id")

    first = operator.execute(context={})
    second = operator.execute(context={})

    clicks, regions = data["inputs"]["clicks"]["topic"], data["inputs"]["regions"]["topic"]
    names = [clicks, regions, data["output"]["topic"], data["aggregate"]["output"]["topic"], data["dead_letter_topic"]]
    assert first["created"] == names and first["already_ok"] == []
    assert second["created"] == [] and second["already_ok"] == names
    assert json.loads(json.dumps(first)) == first  # a plain XCom
    assert {name: describe(kafka_bootstrap, name).partitions for name in names} == dict.fromkeys(names, 4)
    assert describe(kafka_bootstrap, regions).config["cleanup.policy"] == "compact"


def test_operator_fails_on_a_copartitioning_mismatch_naming_both_topics(
    kafka_bootstrap: str, topic_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The connection as a URI with bootstrap servers in the extra, under a non-default id.
    monkeypatch.setenv("AIRFLOW_CONN_OTHER_KAFKA", f"streamjoin-kafka://?bootstrap.servers={kafka_bootstrap}")
    data = seed_spec_data(topic_factory)
    clicks, regions = data["inputs"]["clicks"]["topic"], data["inputs"]["regions"]["topic"]
    create_topic(kafka_bootstrap, clicks, 2)
    operator = ProvisionTopicsOperator(
        task_id="provision_topics", spec_path=str(write_spec(tmp_path, data)), kafka_conn_id="other_kafka"
    )

    with pytest.raises(CoPartitioningError, match=rf"'{clicks}' \(2 partitions\) and '{regions}' \(4 partitions\)"):
        operator.execute(context={})
    assert regions not in topic_names(kafka_bootstrap)


def test_hook_test_connection_reaches_the_broker(kafka_connection: None, kafka_broker: KafkaBroker) -> None:
    ok, message = StreamJoinKafkaHook().test_connection()
    assert ok, message
    where = f"connection 'streamjoin_kafka_default' (PLAINTEXT, at {kafka_broker.bootstrap})"
    assert message.startswith(f"connected: {where}: 1 broker(s)"), message
