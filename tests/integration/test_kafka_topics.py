"""ensure_topics against the real broker: what it creates, what it refuses, and that it changes nothing
when it refuses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kafka_helpers import create_topic, describe, seed_spec_data, topic_names

from streamjoin.core.errors import CoPartitioningError, ReplicationFactorError, TopicConfigError
from streamjoin.core.spec import parse_spec
from streamjoin.core.topic_plan import TopicPlan, plan_topics
from streamjoin.kafka.admin import delete_topics, ensure_topics

pytestmark = pytest.mark.kafka


def seed_plan(make: Callable[[str], str], **kafka: Any) -> TopicPlan:
    data = seed_spec_data(make)
    data["kafka"].update(kafka)
    return plan_topics(parse_spec(data))


def test_creates_every_topic_with_its_partitions_and_configs(kafka_bootstrap: str, topic_factory: Any) -> None:
    plan = seed_plan(topic_factory, partitions=3, min_insync_replicas=1)
    report = ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan, timeout=30)

    assert report.created == plan.names and report.already_ok == []
    assert report.brokers == 1
    clicks, regions, enriched, totals, dlq = (describe(kafka_bootstrap, name) for name in plan.names)
    assert [d.partitions for d in (clicks, regions, enriched, totals, dlq)] == [3, 3, 3, 3, 3]
    assert [d.replication_factor for d in (clicks, regions, enriched, totals, dlq)] == [1, 1, 1, 1, 1]
    assert clicks.config["cleanup.policy"] == "delete"
    assert regions.config["cleanup.policy"] == "compact"
    assert enriched.config["cleanup.policy"] == "delete"
    assert totals.config["cleanup.policy"] == "compact"
    assert dlq.config["cleanup.policy"] == "delete"
    assert dlq.config["retention.ms"] == str(14 * 24 * 3600 * 1000)
    # 1 is also the test broker's default: what shows the spec's value reached the topic is that the topic
    # carries it as its own config (a replication-1 broker allows no other value; the plan test checks 2)
    assert {d.topic_level.get("min.insync.replicas") for d in (clicks, regions, enriched, totals, dlq)} == {"1"}
    bare = topic_factory("bare")  # created without configs: the same broker, nothing at topic level
    create_topic(kafka_bootstrap, bare, 1)
    assert describe(kafka_bootstrap, bare).topic_level == {}


def test_rerun_changes_nothing_and_reports_ok(kafka_bootstrap: str, topic_factory: Any) -> None:
    plan = seed_plan(topic_factory)
    config = {"bootstrap.servers": kafka_bootstrap}
    ensure_topics(config, plan, timeout=30)
    ids_before = {name: describe(kafka_bootstrap, name).topic_id for name in plan.names}

    again = ensure_topics(config, plan, timeout=30)

    assert again.created == [] and again.already_ok == plan.names
    assert again.warnings == []
    assert {name: describe(kafka_bootstrap, name).topic_id for name in plan.names} == ids_before


def test_existing_inputs_with_different_partition_counts_are_refused(kafka_bootstrap: str, topic_factory: Any) -> None:
    plan = seed_plan(topic_factory)  # 4 partitions
    clicks, regions = plan.names[:2]
    create_topic(kafka_bootstrap, clicks, 4)
    create_topic(kafka_bootstrap, regions, 3, {"cleanup.policy": "compact"})

    with pytest.raises(CoPartitioningError) as caught:
        ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan, timeout=30)

    error = caught.value
    assert (error.left_topic, error.left_partitions, error.right_topic, error.right_partitions) == (
        clicks, 4, regions, 3,
    )  # fmt: skip
    assert f"'{clicks}' (4 partitions)" in str(error) and f"'{regions}' (3 partitions)" in str(error)
    assert topic_names(kafka_bootstrap) & set(plan.names) == {clicks, regions}  # nothing else created


def test_a_missing_input_that_would_not_match_the_existing_one_is_refused(
    kafka_bootstrap: str, topic_factory: Any
) -> None:
    plan = seed_plan(topic_factory)  # plans 4 partitions
    clicks, regions = plan.names[:2]
    create_topic(kafka_bootstrap, regions, 6, {"cleanup.policy": "compact"})

    with pytest.raises(CoPartitioningError) as caught:
        ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan, timeout=30)

    assert (caught.value.left_topic, caught.value.left_partitions) == (clicks, 4)
    assert (caught.value.right_topic, caught.value.right_partitions) == (regions, 6)
    assert topic_names(kafka_bootstrap) & set(plan.names) == {regions}


def test_a_table_topic_that_is_not_compacted_is_refused(kafka_bootstrap: str, topic_factory: Any) -> None:
    plan = seed_plan(topic_factory)
    regions = plan.names[1]
    create_topic(kafka_bootstrap, regions, 4, {"cleanup.policy": "delete"})

    with pytest.raises(TopicConfigError) as caught:
        ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan, timeout=30)

    assert (caught.value.topic, caught.value.key, caught.value.actual) == (regions, "cleanup.policy", "delete")
    assert "compact" in str(caught.value)
    assert topic_names(kafka_bootstrap) & set(plan.names) == {regions}


def test_more_replicas_than_brokers_is_refused_before_creating_anything(
    kafka_bootstrap: str, topic_factory: Any
) -> None:
    plan = seed_plan(topic_factory, replication_factor=3)

    with pytest.raises(ReplicationFactorError) as caught:
        ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan, timeout=30)

    assert (caught.value.replication_factor, caught.value.brokers) == (3, 1)
    assert "replication factor 3 is larger than the 1 broker(s)" in str(caught.value)
    assert topic_names(kafka_bootstrap) & set(plan.names) == set()


def test_existing_topics_that_differ_harmlessly_are_ok_with_warnings(kafka_bootstrap: str, topic_factory: Any) -> None:
    plan = seed_plan(topic_factory)
    enriched = plan.names[2]
    create_topic(kafka_bootstrap, enriched, 2)  # an output: no co-partitioning needed

    report = ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan, timeout=30)

    assert enriched in report.already_ok and len(report.created) == 4
    assert report.warnings == [f"{enriched}: has 2 partitions, the spec's kafka.partitions is 4"]
    assert describe(kafka_bootstrap, enriched).partitions == 2


def test_delete_topics_removes_only_what_exists(kafka_bootstrap: str, topic_factory: Any) -> None:
    present, absent = topic_factory("present"), topic_factory("absent")
    create_topic(kafka_bootstrap, present, 1)

    assert delete_topics({"bootstrap.servers": kafka_bootstrap}, [present, absent], timeout=30) == [present]
    assert present not in topic_names(kafka_bootstrap)
