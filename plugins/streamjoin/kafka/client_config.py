"""One Kafka client configuration, from the Airflow connection to every client: confluent-kafka (librdkafka
names, as they are) and Spark's Kafka source/sink (the matching Java client settings as ``kafka.*`` options).

Pure Python (no confluent-kafka, no Airflow, no Spark): the hook, the Spark jobs and the tests all import it.

============================================  =====================================================
librdkafka (the connection's ``extra``)        Java client (Spark: ``kafka.`` + name)
============================================  =====================================================
``bootstrap.servers``                          ``bootstrap.servers``
``security.protocol``                          ``security.protocol`` (upper case)
``sasl.mechanism`` / ``sasl.mechanisms``       ``sasl.mechanism``
``sasl.username`` + ``sasl.password``          ``sasl.jaas.config`` (PLAIN / SCRAM-SHA-256 / SCRAM-SHA-512)
``sasl.oauthbearer.method=oidc`` + client id,  ``sasl.jaas.config`` (OAuthBearerLoginModule),
secret, scope, extensions, token endpoint      ``sasl.oauthbearer.token.endpoint.url``, login handler
``ssl.ca.location`` (a PEM file)               ``ssl.truststore.type=PEM``, ``ssl.truststore.location``
``ssl.ca.pem``                                 ``ssl.truststore.type=PEM``, ``ssl.truststore.certificates``
``ssl.certificate.*`` + ``ssl.key.*`` (PEM)    ``ssl.keystore.type=PEM``, ``.certificate.chain``, ``.key``
``ssl.key.password``                           ``ssl.key.password``
``ssl.endpoint.identification.algorithm``      same (``none`` -> empty)
============================================  =====================================================

Any other ``ssl.*`` / ``sasl.*`` setting is refused with its name (a security setting silently dropped on
the way to Spark would be worse than an error); other librdkafka tuning stays with confluent-kafka.

Secrets never travel on a command line: :meth:`KafkaClientConfig.write_private` writes the settings to a
file only its owner can read, whose path the job gets (and deletes once read). ``repr`` and
:meth:`~KafkaClientConfig.describe` never show a secret.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamjoin.core.errors import KafkaConfigError

#: librdkafka settings whose values are secret (masked in logs, never on argv or in error messages)
SECRET_KEYS = frozenset({
    "sasl.password", "sasl.oauthbearer.client.secret", "sasl.oauthbearer.config", "ssl.key.password",
    "ssl.key.pem", "ssl.keystore.password", "ssl_key",
})  # fmt: skip
#: Java settings whose values hold a secret (Spark logs options unless redacted: see SPARK_REDACTION_REGEX)
JAVA_SECRET_KEYS = frozenset({"sasl.jaas.config", "ssl.key.password", "ssl.keystore.key", "ssl.truststore.password"})
#: Spark conf ``spark.redaction.regex`` / ``spark.sql.redaction.options.regex``: hides these option values
#: in Spark's UI, event log and plan strings (Spark's defaults miss ``jaas`` and ``keystore.key``)
SPARK_REDACTION_REGEX = r"(?i)secret|password|token|access[.]?key|jaas|keystore\.key|url"

_SASL_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_OAUTH_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
_MAPPED = frozenset({
    "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password", "sasl.oauthbearer.method",
    "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret", "sasl.oauthbearer.scope",
    "sasl.oauthbearer.extensions", "sasl.oauthbearer.token.endpoint.url", "ssl.ca.location", "ssl.ca.pem",
    "ssl.certificate.location", "ssl.certificate.pem", "ssl.key.location", "ssl.key.pem", "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
})  # fmt: skip
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: ``--kafka-config`` files are written here unless told otherwise (0700, under the project's var/)
PRIVATE_DIR_NAME = "secrets"


def _jaas_quote(value: str) -> str:
    """A JAAS option value in double quotes (Java's parser reads ``\\\\`` and ``\\"`` escapes)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class KafkaClientConfig:
    """Kafka client settings in librdkafka names, and where they came from (for messages).

    :param settings: ``bootstrap.servers`` plus any librdkafka settings (security included)
    :param source: what to name in errors, e.g. ``connection 'streamjoin_kafka_default'``
    """

    settings: Mapping[str, Any] = field(repr=False)
    source: str = "Kafka client config"

    def __post_init__(self) -> None:
        if not str(self.settings.get("bootstrap.servers") or "").strip():
            raise KafkaConfigError(self.source, "bootstrap.servers", "missing: give a host and port, or this setting")

    # -- construction ---------------------------------------------------------------------------------

    @classmethod
    def of(cls, kafka: KafkaTarget) -> KafkaClientConfig:
        """A config from a bootstrap string (``host:port,...``), a librdkafka dict, or a config (unchanged)."""
        if isinstance(kafka, KafkaClientConfig):
            return kafka
        if isinstance(kafka, str):
            return cls({"bootstrap.servers": kafka}, f"Kafka at {kafka}")
        return cls(dict(kafka), f"Kafka at {kafka.get('bootstrap.servers')}")

    @classmethod
    def from_file(cls, path: str | Path, *, delete: bool = False) -> KafkaClientConfig:
        """Read a file written by :meth:`write_private`; ``delete`` removes it once read (the job does)."""
        path = Path(path)
        data = json.loads(path.read_text())
        if delete:
            path.unlink(missing_ok=True)
        return cls(data["settings"], data.get("source", str(path)))

    def write_private(self, directory: str | Path) -> Path:
        """Write the settings to a new file in ``directory`` that only this user can read (0600, in a 0700
        folder): what a job gets instead of secrets on its command line."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(directory, 0o700)
        fd, name = tempfile.mkstemp(prefix="kafka-", suffix=".json", dir=directory)  # created 0600
        with os.fdopen(fd, "w") as handle:
            json.dump({"source": self.source, "settings": dict(self.settings)}, handle)
        return Path(name)

    def job_arguments(self, directory: str | Path) -> list[str]:
        """A job's Kafka arguments: ``--bootstrap B`` when that is all there is, else ``--kafka-config FILE``
        (:meth:`write_private` into ``directory``; the job deletes it once read): never a secret on argv."""
        if set(self.settings) == {"bootstrap.servers"}:
            return ["--bootstrap", self.bootstrap]
        return ["--kafka-config", str(self.write_private(directory))]

    @classmethod
    def from_job_arguments(cls, bootstrap: str | None, config_file: str | None) -> KafkaClientConfig:
        """The job side of :meth:`job_arguments`: the file wins (and is deleted once read)."""
        if config_file:
            return cls.from_file(config_file, delete=True)
        if not bootstrap:
            raise KafkaConfigError("the job's arguments", "--bootstrap", "give --bootstrap or --kafka-config")
        return cls.of(bootstrap)

    # -- views ----------------------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return str(self.settings["bootstrap.servers"])

    @property
    def security_protocol(self) -> str:
        return str(self.settings.get("security.protocol") or "PLAINTEXT").upper()

    @property
    def mechanism(self) -> str | None:
        value = self.settings.get("sasl.mechanism") or self.settings.get("sasl.mechanisms")
        return str(value).upper() if value else None

    def secrets(self) -> list[str]:
        """The secret values (to mask in logs, and for tests that scan for them)."""
        return [str(v) for k, v in self.settings.items() if k in SECRET_KEYS and v]

    def describe(self) -> str:
        """``connection 'x' (SASL_SSL, SCRAM-SHA-512 as 'alice', at b1:9093)``: never a secret."""
        parts = [self.security_protocol]
        if self.mechanism:
            user = self.settings.get("sasl.username") or self.settings.get("sasl.oauthbearer.client.id")
            parts.append(self.mechanism + (f" as {str(user)!r}" if user else ""))
        return f"{self.source} ({', '.join(parts)}, at {self.bootstrap})"

    def __repr__(self) -> str:
        return f"KafkaClientConfig({self.describe()})"

    def librdkafka(self, **overrides: Any) -> dict[str, Any]:
        """Settings for a confluent-kafka client: the connection's, then ``overrides`` (dotted names via ``**``)."""
        return {**self.settings, **overrides}

    def java(self) -> dict[str, str]:
        """The matching Java client settings (without Spark's ``kafka.`` prefix).

        :raises KafkaConfigError: a security setting that has no Java equivalent here, or an incomplete one
        """
        s, java = self.settings, {"bootstrap.servers": self.bootstrap}
        for key in s:
            if (key.startswith(("ssl.", "sasl.", "enable.ssl")) or key == "ssl_key") and key not in _MAPPED:
                raise KafkaConfigError(self.source, key, "has no equivalent for Spark's Kafka client here")
        protocol = self.security_protocol
        if protocol not in _PROTOCOLS:
            raise KafkaConfigError(self.source, "security.protocol", f"got {protocol!r}; expected one of {_PROTOCOLS}")
        java["security.protocol"] = protocol
        if protocol.startswith("SASL"):
            java |= self._java_sasl()
        if protocol.endswith("SSL"):
            java |= self._java_ssl()
        return java

    def spark_options(self) -> dict[str, str]:
        """Options for Spark's Kafka source and sink: :meth:`java` with the ``kafka.`` prefix."""
        return {f"kafka.{k}": v for k, v in self.java().items()}

    # -- mapping --------------------------------------------------------------------------------------

    def _need(self, key: str, why: str) -> str:
        value = self.settings.get(key)
        if not value:
            raise KafkaConfigError(self.source, key, f"missing: {why}")
        return str(value)

    def _java_sasl(self) -> dict[str, str]:
        mechanism = self.mechanism or "GSSAPI"  # librdkafka's default
        if mechanism in _SASL_MODULES:
            why = f"{mechanism} needs a user name and password"
            user, password = self._need("sasl.username", why), self._need("sasl.password", why)
            jaas = f"{_SASL_MODULES[mechanism]} required username={_jaas_quote(user)} password={_jaas_quote(password)};"
            return {"sasl.mechanism": mechanism, "sasl.jaas.config": jaas}
        if mechanism == "OAUTHBEARER":
            method = str(self.settings.get("sasl.oauthbearer.method") or "default").lower()
            if method != "oidc":
                raise KafkaConfigError(
                    self.source, "sasl.oauthbearer.method", f"got {method!r}; only 'oidc' can be given to Spark"
                )
            why = "OAUTHBEARER with OIDC needs it"
            options = {
                "clientId": self._need("sasl.oauthbearer.client.id", why),
                "clientSecret": self._need("sasl.oauthbearer.client.secret", why),
            }
            if scope := self.settings.get("sasl.oauthbearer.scope"):
                options["scope"] = str(scope)
            for pair in filter(None, str(self.settings.get("sasl.oauthbearer.extensions") or "").split(",")):
                name, _, value = pair.partition("=")
                options[f"extension_{name.strip()}"] = value.strip()
            jaas = " ".join(f"{k}={_jaas_quote(v)}" for k, v in options.items())
            return {
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.jaas.config": f"{_OAUTH_MODULE} required {jaas};",
                "sasl.login.callback.handler.class": _OAUTH_HANDLER,
                "sasl.oauthbearer.token.endpoint.url": self._need("sasl.oauthbearer.token.endpoint.url", why),
            }
        raise KafkaConfigError(
            self.source, "sasl.mechanism", f"got {mechanism!r}; Spark gets PLAIN, SCRAM-SHA-256/512, OAUTHBEARER"
        )

    def _pem(self, key: str, location_key: str) -> str | None:
        if inline := self.settings.get(key):
            return str(inline)
        if location := self.settings.get(location_key):
            try:
                return Path(str(location)).read_text()
            except OSError as exc:
                raise KafkaConfigError(self.source, location_key, f"cannot read {location}: {exc.strerror}") from None
        return None

    def _java_ssl(self) -> dict[str, str]:
        java: dict[str, str] = {}
        if location := self.settings.get("ssl.ca.location"):
            if str(location) != "probe":  # librdkafka's "the system's CAs": the JVM's default truststore
                if not Path(str(location)).is_file():
                    raise KafkaConfigError(self.source, "ssl.ca.location", f"{location} is not a file")
                java |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(location)}
        elif pem := self.settings.get("ssl.ca.pem"):
            java |= {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": str(pem)}
        chain = self._pem("ssl.certificate.pem", "ssl.certificate.location")
        key = self._pem("ssl.key.pem", "ssl.key.location")
        if (chain is None) != (key is None):
            raise KafkaConfigError(
                self.source, "ssl.key.location", "a client certificate needs a certificate and a key"
            )
        if chain is not None and key is not None:
            java |= {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": chain, "ssl.keystore.key": key}
            if password := self.settings.get("ssl.key.password"):
                java["ssl.key.password"] = str(password)
        algorithm = self.settings.get("ssl.endpoint.identification.algorithm")
        if algorithm is not None:
            java["ssl.endpoint.identification.algorithm"] = "" if str(algorithm).lower() == "none" else str(algorithm)
        return java


#: what callers may pass where a cluster is meant: a bootstrap string, librdkafka settings, or a config
KafkaTarget = str | Mapping[str, Any] | KafkaClientConfig
