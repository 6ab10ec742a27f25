"""Fail fast on a connection the cluster refuses: a wrong password or an untrusted certificate is reported in
about a second, naming the connection, instead of every client retrying until its timeout.

librdkafka retries a failed SASL handshake forever and reports it only to ``error_cb``, which confluent-kafka
serves from ``poll``: :func:`check_connection` polls while it asks for metadata.
"""

from __future__ import annotations

import time

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from streamjoin.core.errors import KafkaAuthenticationError, KafkaUnavailableError
from streamjoin.kafka.client_config import KafkaClientConfig, KafkaTarget

#: librdkafka errors that a retry cannot fix: credentials, TLS trust
_REFUSED = frozenset({KafkaError._AUTHENTICATION, KafkaError._SSL, KafkaError.SASL_AUTHENTICATION_FAILED})


def check_connection(kafka: KafkaTarget, *, timeout: float = 20.0) -> int:
    """Ask the cluster for its metadata; return its broker count.

    :raises KafkaAuthenticationError: the credentials or the TLS handshake were refused (terminal)
    :raises KafkaUnavailableError: no answer within ``timeout`` (transient)
    """
    config = KafkaClientConfig.of(kafka)
    errors: list[KafkaError] = []
    admin = AdminClient(config.librdkafka(**{
        "error_cb": errors.append, "socket.timeout.ms": 10_000, "socket.connection.setup.timeout.ms": 10_000,
    }))  # fmt: skip
    deadline = time.monotonic() + timeout
    while True:
        try:
            return len(admin.list_topics(timeout=1.0).brokers)
        except KafkaException as exc:
            admin.poll(0.1)  # serves error_cb
            refused = [e for e in errors if e.code() in _REFUSED]
            if refused:
                raise KafkaAuthenticationError(config.describe(), refused[-1].str()) from None
            if time.monotonic() >= deadline:
                last = errors[-1].str() if errors else str(exc)
                raise KafkaUnavailableError(f"{config.describe()}: no answer within {timeout:g} s: {last}") from None
