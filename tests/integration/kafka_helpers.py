"""Looking at the test broker directly with confluent-kafka's AdminClient, independently of the code
under test, and writing pipeline specs whose topic names no other test uses."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

from streamjoin.core.plans import PROJECT_HOME

SEED_SPEC = PROJECT_HOME / "include" / "pipelines" / "clicks_per_region.yaml"


#: the source of a config set on the topic itself (an enum member or its value, by client version)
TOPIC_LEVEL = (ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.DYNAMIC_TOPIC_CONFIG.value)


@dataclass(frozen=True)
class Described:
    partitions: int
    replication_factor: int
    config: dict[str, str]
    topic_id: str
    #: the configs set on the topic itself (by whoever created or altered it), not broker or Kafka defaults
    topic_level: dict[str, str]


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def topic_names(bootstrap: str) -> set[str]:
    return set(admin(bootstrap).list_topics(timeout=30).topics)


def describe(bootstrap: str, name: str) -> Described:
    client = admin(bootstrap)
    description = client.describe_topics(TopicCollection([name]))[name].result(timeout=30)
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    entries = client.describe_configs([resource])[resource].result(timeout=30)
    return Described(
        partitions=len(description.partitions),
        replication_factor=len(description.partitions[0].replicas),
        config={k: e.value for k, e in entries.items() if e.value is not None},
        topic_id=str(description.topic_id),
        topic_level={k: e.value for k, e in entries.items() if e.source in TOPIC_LEVEL},
    )


def create_topic(bootstrap: str, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
    client = admin(bootstrap)  # keep it alive until the future resolves: destroying it fails the future
    new = NewTopic(name, partitions, 1, config=config or {})
    client.create_topics([new], operation_timeout=10)[name].result(timeout=15)
    deadline = time.monotonic() + 15  # until this broker's metadata lists it with a leader per partition
    while True:
        topic = client.list_topics(topic=name, timeout=30).topics.get(name)
        listed = topic is not None and topic.error is None and len(topic.partitions) == partitions
        if listed and topic is not None and all(p.leader >= 0 for p in topic.partitions.values()):
            return
        assert time.monotonic() < deadline, f"topic {name} not listed with {partitions} partitions within 15 s"
        time.sleep(0.1)


def seed_spec_data(make: Callable[[str], str]) -> dict[str, Any]:
    """The seed spec as a mapping, with every topic renamed by ``make`` (the topic_factory fixture)."""
    data = copy.deepcopy(yaml.safe_load(SEED_SPEC.read_text()))
    for spec_input in data["inputs"].values():
        spec_input["topic"] = make(spec_input["topic"])
    data["output"]["topic"] = make(data["output"]["topic"])
    data["aggregate"]["output"]["topic"] = make(data["aggregate"]["output"]["topic"])
    data["aggregate"]["output"].pop("files", None)
    data["dead_letter_topic"] = make(data["dead_letter_topic"])
    return data


def write_spec(directory: Path, data: dict[str, Any]) -> Path:
    path = directory / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
