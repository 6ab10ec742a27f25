"""The Airflow connection to a Kafka cluster for streamjoin (topic provisioning, producing, reading)."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

#: librdkafka settings whose values are callables: a connection (plain JSON) cannot carry them, and
#: resolving dotted paths from a connection would let whoever edits connections run code in workers.
_CALLBACK_KEYS = frozenset({"error_cb", "throttle_cb", "stats_cb", "log_cb", "oauth_cb", "on_commit", "on_delivery"})


class StreamJoinKafkaHook(BaseHook):
    """Kafka cluster settings from an Airflow connection; clients are built per call, never at construction.

    ``bootstrap.servers`` comes from the connection's ``extra`` (``{"bootstrap.servers": "h1:9092,h2:9092"}``,
    which wins) or from its host and port (``127.0.0.1`` + ``19092``). Any other ``extra`` key is passed to
    the confluent-kafka clients as is (``security.protocol``, ``sasl.mechanism``, ...).

    :param kafka_conn_id: the connection id
    """

    conn_name_attr = "kafka_conn_id"
    default_conn_name = "streamjoin_kafka_default"
    conn_type = "streamjoin_kafka"
    hook_name = "streamjoin Kafka"

    def __init__(self, kafka_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kafka_conn_id = kafka_conn_id

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": ["schema", "login", "password"],
            "relabeling": {"host": "Bootstrap host", "extra": "Client config (JSON)"},
            "placeholders": {
                "host": "127.0.0.1 (or give bootstrap.servers in the client config)",
                "port": "19092",
                "extra": '{"bootstrap.servers": "broker1:9092,broker2:9092", "security.protocol": "PLAINTEXT"}',
            },
        }

    def client_config(self) -> dict[str, Any]:
        """confluent-kafka client settings: the connection's ``extra`` plus ``bootstrap.servers``.

        :raises ValueError: the connection gives no bootstrap servers, or a callback setting
        """
        conn = self.get_connection(self.kafka_conn_id)
        extra = dict(conn.extra_dejson or {})
        callbacks = sorted(_CALLBACK_KEYS & extra.keys())
        if callbacks:
            raise ValueError(
                f"connection {self.kafka_conn_id!r}: callback settings {callbacks} cannot come from a connection"
            )
        bootstrap = extra.get("bootstrap.servers")
        if not bootstrap and conn.host:
            # A host may already list several servers with ports ("b1:9092,b2:9092").
            bootstrap = conn.host if (":" in conn.host or not conn.port) else f"{conn.host}:{conn.port}"
        if not bootstrap:
            raise ValueError(
                f"connection {self.kafka_conn_id!r} has no bootstrap servers: set its host and port, or "
                '"bootstrap.servers" in its extra'
            )
        extra["bootstrap.servers"] = str(bootstrap)
        return extra

    def bootstrap_servers(self) -> str:
        """``bootstrap.servers`` of the connection, e.g. ``127.0.0.1:19092``."""
        return str(self.client_config()["bootstrap.servers"])

    def admin_config(self) -> dict[str, Any]:
        """Settings for :func:`streamjoin.kafka.admin.ensure_topics` and other admin calls."""
        return self.client_config()

    def get_conn(self) -> Any:
        """A new confluent-kafka ``AdminClient`` for this connection."""
        from streamjoin.kafka.admin import admin_client

        return admin_client(self.admin_config())

    def test_connection(self) -> tuple[bool, str]:
        """Ask the cluster for its metadata (10 s at most); the UI's "Test" button calls this."""
        try:
            bootstrap = self.bootstrap_servers()
            metadata = self.get_conn().list_topics(timeout=10)
        except Exception as exc:
            return False, f"{type(exc).__name__}: {exc}"
        return True, f"connected to {bootstrap}: {len(metadata.brokers)} broker(s), {len(metadata.topics)} topic(s)"
