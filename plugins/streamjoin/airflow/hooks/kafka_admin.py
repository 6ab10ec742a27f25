"""The Airflow connection to a Kafka cluster for streamjoin (topic provisioning, producing, reading)."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from streamjoin.core.errors import KafkaConfigError
from streamjoin.kafka.client_config import KafkaClientConfig

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
            "hidden_fields": ["schema"],
            "relabeling": {
                "host": "Bootstrap host", "login": "SASL user name", "password": "SASL password (or API secret)",
                "extra": "Client config (JSON, librdkafka names)",
            },
            "placeholders": {
                "host": "127.0.0.1 (or give bootstrap.servers in the client config)",
                "port": "19092",
                "login": "sasl.username (an API key on Confluent Cloud)",
                "extra": '{"bootstrap.servers": "b1:9093", "security.protocol": "SASL_SSL", '
                '"sasl.mechanism": "SCRAM-SHA-512", "ssl.ca.location": "/etc/kafka/ca.pem"}',
            },
        }  # fmt: skip

    def kafka_config(self) -> KafkaClientConfig:
        """The connection as one :class:`~streamjoin.kafka.client_config.KafkaClientConfig` (what every client,
        Spark's included, is built from). Its secrets are registered with Airflow's log masker.

        The connection's login and password are ``sasl.username`` / ``sasl.password`` unless ``extra`` gives them.

        :raises KafkaConfigError: no bootstrap servers, or a callback setting
        """
        from airflow.sdk.log import mask_secret

        conn = self.get_connection(self.kafka_conn_id)
        source = f"connection {self.kafka_conn_id!r}"
        extra = dict(conn.extra_dejson or {})
        callbacks = sorted(_CALLBACK_KEYS & extra.keys())
        if callbacks:
            raise KafkaConfigError(source, ", ".join(callbacks), "callback settings cannot come from a connection")
        bootstrap = extra.get("bootstrap.servers")
        if not bootstrap and conn.host:
            # A host may already list several servers with ports ("b1:9092,b2:9092").
            bootstrap = conn.host if (":" in conn.host or not conn.port) else f"{conn.host}:{conn.port}"
        if not bootstrap:
            raise KafkaConfigError(
                source, "bootstrap.servers", 'missing: set the host and port, or "bootstrap.servers" in the extra'
            )
        extra["bootstrap.servers"] = str(bootstrap)
        if conn.login and not extra.get("sasl.username"):
            extra["sasl.username"] = conn.login
        if conn.password and not extra.get("sasl.password"):
            extra["sasl.password"] = conn.password
        config = KafkaClientConfig(extra, source)
        for secret in config.secrets():
            mask_secret(secret)
        return config

    def checked_config(self, timeout: float = 20.0) -> KafkaClientConfig:
        """:meth:`kafka_config` after the cluster accepted it: a wrong password or an untrusted certificate
        fails here in about a second, naming the connection (:class:`~streamjoin.core.errors.KafkaAuthenticationError`),
        before any job is launched."""
        from streamjoin.kafka.connection_check import check_connection

        config = self.kafka_config()
        check_connection(config, timeout=timeout)
        return config

    def client_config(self) -> dict[str, Any]:
        """confluent-kafka client settings: the connection's ``extra`` plus ``bootstrap.servers`` and SASL login."""
        return self.kafka_config().librdkafka()

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
            config = self.checked_config(timeout=10)
            metadata = self.get_conn().list_topics(timeout=10)
        except Exception as exc:
            return False, f"{type(exc).__name__}: {exc}"
        brokers, topics = len(metadata.brokers), len(metadata.topics)
        return True, f"connected: {config.describe()}: {brokers} broker(s), {topics} topic(s)"
