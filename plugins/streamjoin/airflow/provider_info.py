"""Provider metadata read by Airflow's providers manager (entry point ``apache_airflow_provider``)."""

from __future__ import annotations

from typing import Any


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "streamjoin",
        "name": "streamjoin",
        "description": "Kafka Streams-style joins on Apache Spark, launched and supervised by Airflow.",
        "versions": ["0.1.0"],
        "connection-types": [
            {
                "connection-type": "streamjoin_kafka",
                "hook-class-name": "streamjoin.airflow.hooks.kafka_admin.StreamJoinKafkaHook",
            },
        ],
    }
