"""The compose stack's spec (replication factor 3, min.insync.replicas 2) through the provisioning operator:
on the single test broker it is refused with a clear error before anything is created; lowered to what the
broker holds, the topics carry the spec's replication factor and min.insync.replicas."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from streamjoin.core.plans import PROJECT_HOME

pytestmark = [pytest.mark.kafka, pytest.mark.airflow]

DEPLOYED_SPEC = PROJECT_HOME / "deploy" / "pipelines" / "clicks_per_region.yaml"


def _spec(tmp_path: Path, topic: Callable[[str], str], **kafka: int) -> tuple[Path, list[str]]:
    raw = yaml.safe_load(DEPLOYED_SPEC.read_text())
    raw["kafka"].update(kafka)
    names = []
    for side in raw["inputs"].values():
        side["topic"] = topic(side["topic"])
        names.append(side["topic"])
    raw["output"]["topic"] = topic("enriched-clicks")
    raw["aggregate"]["output"]["topic"] = topic("clicks-per-region")
    raw["dead_letter_topic"] = topic("clicks-per-region-dlq")
    names += [raw["output"]["topic"], raw["aggregate"]["output"]["topic"], raw["dead_letter_topic"]]
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path, names


@pytest.fixture
def kafka_conn(kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch) -> str:
    host, port = kafka_bootstrap.split(":")
    conn = {"conn_type": "streamjoin_kafka", "host": host, "port": int(port)}
    monkeypatch.setenv("AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT", json.dumps(conn))
    return kafka_bootstrap


def test_the_deployed_replication_factor_is_refused_on_a_single_broker(
    kafka_conn: str, topic_factory: Callable[[str], str], tmp_path: Path
) -> None:
    from streamjoin.airflow.operators.provision_topics import ProvisionTopicsOperator
    from streamjoin.core.errors import ReplicationFactorError
    from streamjoin.kafka.admin import describe_topics

    path, names = _spec(tmp_path, topic_factory)
    with pytest.raises(ReplicationFactorError) as caught:
        ProvisionTopicsOperator(task_id="provision", spec_path=str(path)).execute(context={})
    assert (caught.value.replication_factor, caught.value.brokers) == (3, 1)
    assert "lower kafka.replication_factor in the spec" in str(caught.value)
    assert describe_topics({"bootstrap.servers": kafka_conn}, names, timeout=15) == {}, "nothing may be created"


def test_replication_and_min_insync_replicas_reach_the_topics(
    kafka_conn: str, topic_factory: Callable[[str], str], tmp_path: Path
) -> None:
    from streamjoin.airflow.operators.provision_topics import ProvisionTopicsOperator
    from streamjoin.kafka.admin import describe_topics

    path, names = _spec(tmp_path, topic_factory, replication_factor=1, min_insync_replicas=1)
    ProvisionTopicsOperator(task_id="provision", spec_path=str(path)).execute(context={})
    topics = describe_topics({"bootstrap.servers": kafka_conn}, names, timeout=15)
    assert sorted(topics) == sorted(names)
    assert {t.replication_factor for t in topics.values()} == {1}
    assert {t.config["min.insync.replicas"] for t in topics.values()} == {"1"}
    # 1 is also the test broker's default: the spec's value is on each topic as the topic's own config
    # (a topic created without it has none: tests/integration/test_kafka_topics.py)
    assert {_topic_level(kafka_conn, name).get("min.insync.replicas") for name in names} == {"1"}


def _topic_level(bootstrap: str, topic: str) -> dict[str, str]:
    """The configs set on ``topic`` itself (not the broker's or Kafka's defaults), read by confluent-kafka."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    client = AdminClient({"bootstrap.servers": bootstrap})  # alive until the future resolves
    entries = client.describe_configs([resource])[resource].result(timeout=30)
    own = (ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    return {name: entry.value for name, entry in entries.items() if entry.source in own}
