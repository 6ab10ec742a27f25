"""Helpers of the security tests (imported by name: a conftest cannot be imported reliably)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from streamjoin.localdev.kafka_broker import KafkaBroker

SECURE_USER = "streamjoin"


def kafka_connection(broker: KafkaBroker, password: str | None = None) -> str:
    """``AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT`` for the secure listener: login and password are the SASL user."""
    config = broker.secure_client_config(SECURE_USER, password)
    extra = {k: v for k, v in config.items() if k not in ("sasl.username", "sasl.password")}
    return json.dumps({
        "conn_type": "streamjoin_kafka", "login": config["sasl.username"], "password": config["sasl.password"],
        "extra": extra,
    })  # fmt: skip


def spark_event_log_conf(directory: Path) -> dict[str, Any]:
    """``SPARK_CONF_DIR`` whose spark-defaults.conf writes Spark's event log into ``directory/events``."""
    events = directory / "events"
    events.mkdir(parents=True, exist_ok=True)
    (directory / "spark-defaults.conf").write_text(f"spark.eventLog.enabled true\nspark.eventLog.dir file://{events}\n")
    return {"SPARK_CONF_DIR": str(directory)}
