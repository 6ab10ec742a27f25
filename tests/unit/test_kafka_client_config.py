"""One Kafka client config from the connection: librdkafka settings as they are, the matching Java options for
Spark, and secrets that never show (repr, messages, argv)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook
from streamjoin.core.errors import KafkaConfigError
from streamjoin.kafka.client_config import KafkaClientConfig

SECRET = 'p@ss "w\\ord'  # quotes and a backslash: JAAS must escape them
SCRAM = {
    "bootstrap.servers": "b1:9096,b2:9096", "security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "alice", "sasl.password": SECRET,
}  # fmt: skip


def test_a_bootstrap_string_is_a_plaintext_cluster() -> None:
    config = KafkaClientConfig.of("127.0.0.1:19092")
    assert config.librdkafka() == {"bootstrap.servers": "127.0.0.1:19092"}
    assert config.spark_options() == {
        "kafka.bootstrap.servers": "127.0.0.1:19092",
        "kafka.security.protocol": "PLAINTEXT",
    }
    assert config.job_arguments("/nonexistent") == ["--bootstrap", "127.0.0.1:19092"]


def test_scram_over_tls_with_a_custom_ca(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n")
    config = KafkaClientConfig({**SCRAM, "ssl.ca.location": str(ca), "linger.ms": 5}, "connection 'k'")
    assert config.librdkafka()["sasl.password"] == SECRET  # confluent-kafka gets the settings as they are
    assert config.spark_options() == {
        "kafka.bootstrap.servers": "b1:9096,b2:9096",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="p@ss \\"w\\\\ord";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(ca),
    }  # linger.ms is confluent-kafka tuning: Spark's options are set by the job


def test_confluent_cloud_plain_and_mtls_and_oauth() -> None:
    confluent_cloud = {k: v for k, v in SCRAM.items() if k != "sasl.mechanism"} | {"sasl.mechanisms": "PLAIN"}
    plain = KafkaClientConfig(confluent_cloud)
    assert plain.java()["sasl.jaas.config"].startswith("org.apache.kafka.common.security.plain.PlainLoginModule")
    mtls = KafkaClientConfig({
        "bootstrap.servers": "b:1", "security.protocol": "SSL", "ssl.certificate.pem": "C", "ssl.key.pem": "K",
        "ssl.key.password": "kp", "ssl.endpoint.identification.algorithm": "none",
    })  # fmt: skip
    assert mtls.java() == {
        "bootstrap.servers": "b:1", "security.protocol": "SSL", "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": "C", "ssl.keystore.key": "K", "ssl.key.password": "kp",
        "ssl.endpoint.identification.algorithm": "",
    }  # fmt: skip
    oauth = KafkaClientConfig({
        "bootstrap.servers": "b:1", "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": "app", "sasl.oauthbearer.client.secret": "s",
        "sasl.oauthbearer.token.endpoint.url": "https://idp/token", "sasl.oauthbearer.scope": "kafka",
        "sasl.oauthbearer.extensions": "logicalCluster=lkc-1,identityPoolId=pool-2",
    }).java()  # fmt: skip
    assert oauth["sasl.jaas.config"] == (
        'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="app" '
        'clientSecret="s" scope="kafka" extension_logicalCluster="lkc-1" extension_identityPoolId="pool-2";'
    )
    assert oauth["sasl.oauthbearer.token.endpoint.url"] == "https://idp/token"


@pytest.mark.parametrize(
    ("extra", "key", "problem"),
    [
        ({"sasl.kerberos.service.name": "kafka"}, "sasl.kerberos.service.name", "no equivalent"),
        ({"enable.ssl.certificate.verification": "false"}, "enable.ssl.certificate.verification", "no equivalent"),
        ({"sasl.password": None}, "sasl.password", "missing"),
        ({"sasl.mechanism": "GSSAPI"}, "sasl.mechanism", "'GSSAPI'"),
        ({"security.protocol": "TLS"}, "security.protocol", "'TLS'"),
        ({"ssl.ca.location": "/no/such/ca.pem"}, "ssl.ca.location", "not a file"),
    ],
)
def test_what_spark_cannot_be_given_is_refused_by_name(extra: dict[str, object], key: str, problem: str) -> None:
    with pytest.raises(KafkaConfigError) as caught:
        KafkaClientConfig({**SCRAM, **extra}, "connection 'prod_kafka'").java()
    message = str(caught.value)
    assert message.startswith(f"connection 'prod_kafka': {key}: ") and problem in message
    assert SECRET not in message


def test_secrets_never_show_and_reach_a_job_only_in_a_private_file(tmp_path: Path) -> None:
    config = KafkaClientConfig(SCRAM, "connection 'k'")
    assert SECRET not in repr(config) and SECRET not in config.describe() and SECRET not in str(config)
    assert config.describe() == "connection 'k' (SASL_SSL, SCRAM-SHA-512 as 'alice', at b1:9096,b2:9096)"
    args = config.job_arguments(tmp_path / "secrets")
    assert args[0] == "--kafka-config" and SECRET not in " ".join(args)
    path = Path(args[1])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    read = KafkaClientConfig.from_job_arguments(None, str(path))
    assert read.librdkafka() == SCRAM and read.source == "connection 'k'"
    assert not path.exists()  # the job deletes it once read


def test_connection_login_and_password_are_the_sasl_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    conn = {"conn_type": "streamjoin_kafka", "login": "API_KEY", "password": "API_SECRET",
            "extra": {"bootstrap.servers": "pkc-1.confluent.cloud:9092", "security.protocol": "SASL_SSL",
                      "sasl.mechanisms": "PLAIN"}}  # fmt: skip
    monkeypatch.setenv("AIRFLOW_CONN_CCLOUD", json.dumps(conn))
    config = StreamJoinKafkaHook("ccloud").kafka_config()
    assert config.librdkafka()["sasl.username"] == "API_KEY" and config.secrets() == ["API_SECRET"]
    assert config.source == "connection 'ccloud'"
    assert 'username="API_KEY" password="API_SECRET"' in config.java()["sasl.jaas.config"]
