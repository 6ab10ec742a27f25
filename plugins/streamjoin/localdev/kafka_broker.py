"""A single-node KRaft Kafka broker for development and tests, run from the Maven-resolved jars.

``scripts/fetch-jars.sh`` puts the broker's jars into ``.local/jars/kafka``; :class:`KafkaBroker` writes a
``server.properties`` and a log4j2 config into its home, formats the storage once, starts the JVM
detached (it outlives the Python process that started it) and records its pid.

CLI::

    python -m streamjoin.localdev.kafka_broker start|stop|status [--port 19092] [--home .local/kafka]
        [--secure-port 19094 --scram-users users.json]

With a secure port the broker also listens with SASL_SSL there: SCRAM-SHA-512 users (``{"user": "password"}``)
are created at every start through the PLAINTEXT listener, and a CA and a broker certificate for 127.0.0.1 are
generated into ``<home>/tls/`` once (``ca.pem`` is what clients trust: ``ssl.ca.location``).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streamjoin.core.errors import KafkaUnavailableError, LocalBrokerError
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.localdev.processes import LOG_TAIL_LINES, live_pid, port_in_use, run_command, stop_pid, tail

DEFAULT_HOME = PROJECT_HOME / ".local" / "kafka"
DEFAULT_JARS = PROJECT_HOME / ".local" / "jars" / "kafka"

_LOG4J2_XML = """<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by streamjoin.localdev.kafka_broker; rewritten on every start. -->
<Configuration status="WARN">
  <Appenders>
    <File name="broker" fileName="{log}" append="true">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Root level="INFO"><AppenderRef ref="broker"/></Root>
    <Logger name="kafka.request.logger" level="WARN"/>
    <Logger name="state.change.logger" level="WARN"/>
    <Logger name="kafka.log.LogCleaner" level="WARN"/>
    <Logger name="org.apache.kafka.clients" level="WARN"/>
  </Loggers>
</Configuration>
"""


def _random_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding (as ``Uuid.randomUuid``)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):  # Kafka's tools reject ids that look like an option
            return cluster_id


class KafkaBroker:
    """A local single-node KRaft broker (``process.roles=broker,controller``) listening on 127.0.0.1.

    :param home: folder for ``server.properties``, the data (``data/``), ``broker.log`` and the pid file
    :param port: the client (PLAINTEXT) port; the bootstrap address is ``127.0.0.1:<port>``
    :param controller_port: the KRaft controller listener's port
    :param jars: the broker's jars (``scripts/fetch-jars.sh``)
    :param heap: the JVM's ``-Xmx``
    :param secure_port: also listen with SASL_SSL (SCRAM-SHA-512) on this port
    :param scram_users: user -> password of the SCRAM-SHA-512 users created at start
    """

    def __init__(
        self,
        home: Path = DEFAULT_HOME,
        port: int = 19092,
        controller_port: int = 19093,
        *,
        jars: Path = DEFAULT_JARS,
        heap: str = "1g",
        secure_port: int | None = None,
        scram_users: Mapping[str, str] | None = None,
    ) -> None:
        self.home = Path(home).resolve()
        self.port = port
        self.controller_port = controller_port
        self.jars = Path(jars).resolve()
        self.heap = heap
        self.secure_port = secure_port
        self.scram_users = dict(scram_users or {})

    @property
    def bootstrap(self) -> str:
        """``bootstrap.servers`` for clients."""
        return f"127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> Path:
        """The CA certificate (PEM) that signed the broker's certificate: clients' ``ssl.ca.location``."""
        return self.home / "tls" / "ca.pem"

    def secure_client_config(self, user: str, password: str | None = None) -> dict[str, Any]:
        """librdkafka settings for the SASL_SSL listener as ``user`` (with its password unless one is given)."""
        if self.secure_port is None:
            raise LocalBrokerError("this broker has no secure listener (secure_port)", self.home)
        return {
            "bootstrap.servers": f"127.0.0.1:{self.secure_port}",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": self.scram_users[user] if password is None else password,
            "ssl.ca.location": str(self.ca_file),
        }

    @property
    def properties_file(self) -> Path:
        return self.home / "server.properties"

    @property
    def log_file(self) -> Path:
        """Everything the broker logs (log4j2)."""
        return self.home / "broker.log"

    @property
    def stdout_file(self) -> Path:
        """The JVM's own stdout/stderr (crashes before logging is set up, JVM errors)."""
        return self.home / "broker.stdout"

    @property
    def pid_file(self) -> Path:
        return self.home / "broker.pid"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    def __repr__(self) -> str:
        return f"KafkaBroker(home={str(self.home)!r}, bootstrap={self.bootstrap!r})"

    # -- state --------------------------------------------------------------------------------------------

    def pid(self) -> int | None:
        """The pid of this home's broker if it is alive (a stale pid file, or a reused pid, counts as not running)."""
        return live_pid(self.pid_file, *self._markers())

    def _markers(self) -> tuple[bytes, ...]:
        """What the broker's command line holds: Kafka's main class and this home's properties."""
        return b"kafka.Kafka", str(self.properties_file).encode()

    def is_running(self) -> bool:
        """Whether this home's broker process is alive (not whether it answers; see :meth:`is_healthy`)."""
        return self.pid() is not None

    def is_formatted(self) -> bool:
        return (self.data_dir / "meta.properties").exists()

    def is_healthy(self, timeout: float = 3.0) -> bool:
        """Whether a broker answers a metadata request on :attr:`bootstrap` within ``timeout`` seconds."""
        return broker_answers(self.bootstrap, timeout)

    # -- files --------------------------------------------------------------------------------------------

    def server_properties(self) -> dict[str, str]:
        """The broker's configuration: one node that is both broker and controller, replication 1."""
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            # Static voters (no dynamic quorum): the storage is formatted without --standalone.
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            # One broker: internal topics can only have one replica.
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            # Consumers in tests join their group at once instead of waiting 3 s for others.
            "group.initial.rebalance.delay.ms": "0",
            # Topics come from the topic plan only: a typo in a topic name must fail, not create a topic.
            "auto.create.topics.enable": "false",
            "num.partitions": "4",
            "delete.topic.enable": "true",
            "log.retention.check.interval.ms": "60000",
            "num.network.threads": "2",
            "num.io.threads": "4",
            **self._secure_properties(),
        }

    def _secure_properties(self) -> dict[str, str]:
        if self.secure_port is None:
            return {}
        tls = self.ca_file.parent
        return {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},SASL_SSL://127.0.0.1:{self.secure_port},"
            f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port},SASL_SSL://127.0.0.1:{self.secure_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(tls / "broker.pem"),
        }  # fmt: skip

    def _write_configs(self) -> Path:
        self.home.mkdir(parents=True, exist_ok=True)
        lines = [f"{key}={value}" for key, value in self.server_properties().items()]
        self.properties_file.write_text("# Written by streamjoin.localdev.kafka_broker\n" + "\n".join(lines) + "\n")
        log4j = self.home / "log4j2.xml"
        log4j.write_text(_LOG4J2_XML.format(log=self.log_file))
        return log4j

    def _java(self) -> str:
        java_home = os.environ.get("JAVA_HOME")
        java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
        if not java or not Path(java).exists():
            raise LocalBrokerError("no `java` found: install a JDK 17+ or set JAVA_HOME", self.home)
        return java

    def _classpath(self) -> str:
        if not any(self.jars.glob("kafka_2.13-*.jar")):
            raise LocalBrokerError(f"the Kafka jars are missing in {self.jars}: run scripts/fetch-jars.sh", self.home)
        return f"{self.jars}/*"  # the JVM expands the wildcard itself

    def logging_problem(self) -> str | None:
        """Why the broker would log nothing, if its jars show it: Kafka 4.1 calls the slf4j 1.7 API, which
        only finds the slf4j-1 binding ``log4j-slf4j-impl``; ``log4j-slf4j2-impl`` needs slf4j-api 2."""
        names = [p.name for p in self.jars.glob("*.jar")]
        api1 = any(n.startswith("slf4j-api-1.") for n in names)
        binding1 = any(n.startswith("log4j-slf4j-impl-") for n in names)
        if api1 and not binding1:
            return (
                f"{self.jars} has slf4j-api 1.x but not its log4j2 binding log4j-slf4j-impl, so the broker logs "
                "nothing (slf4j's NOP logger; see broker.stdout). Depend on "
                "org.apache.logging.log4j:log4j-slf4j-impl in java/kafka-broker/pom.xml and run FORCE=1 "
                "scripts/fetch-jars.sh"
            )
        return None

    def format_storage(self, timeout: float = 60.0) -> bool:
        """Format ``log.dirs`` with a new cluster id unless already formatted; ``True`` if it formatted."""
        if self.is_formatted():
            return False
        self._write_configs()
        cluster_id = _random_cluster_id()
        cmd = [
            self._java(), "-Xmx256m", "-cp", self._classpath(), "kafka.tools.StorageTool",
            "format", "-t", cluster_id, "-c", str(self.properties_file),
        ]  # fmt: skip
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise LocalBrokerError(f"formatting the storage took more than {timeout:.0f} s", self.home) from exc
        if done.returncode != 0 or not self.is_formatted():
            output = "\n".join((done.stdout + done.stderr).strip().splitlines()[-LOG_TAIL_LINES:])
            raise LocalBrokerError(
                f"`kafka.tools.StorageTool format` failed with exit code {done.returncode}:\n{output}", self.home
            )
        return True

    # -- lifecycle ----------------------------------------------------------------------------------------

    def start(self, timeout: float = 90.0) -> bool:
        """Start the broker and wait until it answers; a no-op if this home's broker already runs healthy.

        :param timeout: seconds to wait for the broker to answer
        :return: ``True`` if this call started the broker, ``False`` if it was already running
        :raises LocalBrokerError: the ports are taken by another process, or the JVM exited
        :raises KafkaUnavailableError: the broker started but did not answer within ``timeout``
        """
        if self.is_running():
            self.wait_healthy(timeout)
            return False
        for port in (self.port, self.controller_port):
            if port_in_use(port):
                raise LocalBrokerError(
                    f"port {port} is already in use by another process (another broker home? "
                    f"`ss -ltnp 'sport = :{port}'` shows which); stop it or choose other ports",
                    self.home,
                )
        log4j = self._write_configs()
        if self.secure_port is not None:
            write_tls_files(self.ca_file.parent)
        self.format_storage()
        problem = self.logging_problem()
        if problem:  # said where anyone looking for the broker's log will look
            with self.log_file.open("a") as log:
                log.write(f"[streamjoin] WARNING: {problem}\n")
            print(f"warning: {problem}", file=sys.stderr)
        cmd = [
            self._java(),
            f"-Xmx{self.heap}",
            "-Xms256m",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j}",
            f"-Dkafka.logs.dir={self.home}",
            "-cp",
            self._classpath(),
            "kafka.Kafka",
            str(self.properties_file),
        ]
        with self.stdout_file.open("ab") as out:
            process = subprocess.Popen(  # detached: its own session, survives the caller
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                cwd=self.home,
            )  # fmt: skip
        self.pid_file.write_text(f"{process.pid}\n")
        try:
            self.wait_healthy(timeout, process=process)
            self.create_scram_users(timeout)
        except BaseException:
            self.stop()
            raise
        return True

    def create_scram_users(self, timeout: float = 60.0) -> None:
        """Create (or update) the SCRAM-SHA-512 users through the PLAINTEXT listener, then wait until the
        first one can log in on the SASL_SSL listener."""
        if self.secure_port is None or not self.scram_users:
            return
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import (
            AdminClient,
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialAlteration,
            UserScramCredentialUpsertion,
        )

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        upserts: list[UserScramCredentialAlteration] = [
            UserScramCredentialUpsertion(u, info, p.encode()) for u, p in self.scram_users.items()
        ]
        for future in admin.alter_user_scram_credentials(upserts, request_timeout=timeout).values():
            future.result(timeout=timeout)
        user = next(iter(self.scram_users))
        deadline = time.monotonic() + timeout
        while True:  # the credential reaches the SASL listener through the metadata log: a moment later
            try:
                secure = AdminClient({**self.secure_client_config(user), "log_level": 0})
                secure.list_topics(timeout=5)
                return
            except KafkaException as exc:
                if time.monotonic() >= deadline:
                    raise KafkaUnavailableError(
                        f"user {user!r} could not log in on 127.0.0.1:{self.secure_port} within {timeout:.0f} s: "
                        f"{exc}\nlast lines of {self.log_file}:\n{tail(self.log_file)}"
                    ) from exc
                time.sleep(0.5)

    def wait_healthy(self, timeout: float = 60.0, *, process: subprocess.Popen[bytes] | None = None) -> None:
        """Wait until the broker answers a metadata request (AdminClient ``list_topics``).

        :param timeout: seconds to wait in all
        :param process: the JVM just started, to fail fast if it exits
        :raises KafkaUnavailableError: no answer within ``timeout``; carries the end of ``broker.log``
        :raises LocalBrokerError: the JVM exited while we waited
        """
        deadline = time.monotonic() + timeout
        while True:
            if process is not None and process.poll() is not None:
                raise LocalBrokerError(
                    f"the broker JVM exited with code {process.returncode} while starting", self.home
                )
            left = deadline - time.monotonic()
            if broker_answers(self.bootstrap, max(0.5, min(2.0, left))):
                return
            if time.monotonic() >= deadline:
                raise KafkaUnavailableError(
                    f"the broker at {self.bootstrap} did not answer within {timeout:.0f} s; "
                    f"last lines of {self.log_file}:\n{tail(self.log_file)}\n"
                    f"last lines of {self.stdout_file}:\n{tail(self.stdout_file, 10)}"
                )
            time.sleep(0.2)

    def stop(self, timeout: float = 30.0) -> bool:
        """SIGTERM the broker (a clean shutdown), SIGKILL it if it is still alive after ``timeout`` seconds.

        :return: ``True`` if a broker was running
        """
        return stop_pid(self.pid_file, *self._markers(), timeout=timeout)

    def status(self) -> str:
        """One line for humans: running/healthy/stopped, pid, bootstrap and home."""
        pid = self.pid()
        healthy = pid is not None and self.is_healthy()
        state = "stopped" if pid is None else ("running, healthy" if healthy else "running, NOT answering")
        return f"kafka broker {state}: bootstrap {self.bootstrap}, pid {pid or '-'}, home {self.home}"


def write_tls_files(directory: Path, host: str = "127.0.0.1") -> None:
    """A CA (``ca.pem``) and a broker certificate it signed for ``host`` and ``localhost``, with the broker's
    unencrypted PKCS#8 key, in one PEM file (``broker.pem``, Kafka's ``ssl.keystore.type=PEM``). Kept once made."""
    if (directory / "ca.pem").exists() and (directory / "broker.pem").exists():
        return
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "streamjoin local dev CA")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host)), x509.DNSName("localhost")])
    cert = (
        x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(san, critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    broker = directory / "broker.pem"
    broker.write_bytes(key_pem + cert.public_bytes(pem) + ca.public_bytes(pem))
    broker.chmod(0o600)
    (directory / "ca.pem").write_bytes(ca.public_bytes(pem))


def broker_answers(bootstrap: str, timeout: float = 3.0) -> bool:
    """Whether a Kafka broker at ``bootstrap`` answers a metadata request within ``timeout`` seconds."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    if not any(port_in_use(int(hp.rsplit(":", 1)[1]), hp.rsplit(":", 1)[0]) for hp in bootstrap.split(",")):
        return False  # nothing listens: skip librdkafka's connect/retry logging
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout * 1000), "log_level": 0})
    try:
        admin.list_topics(timeout=timeout)
    except KafkaException:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamjoin.localdev.kafka_broker", description=__doc__)
    parser.add_argument("command", choices=["start", "stop", "status"])
    parser.add_argument("--port", type=int, default=19092, help="client port (default 19092)")
    parser.add_argument("--controller-port", type=int, default=None, help="controller port (default port+1)")
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME, help=f"broker home (default {DEFAULT_HOME})")
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for start/stop")
    parser.add_argument("--secure-port", type=int, default=None, help="also listen with SASL_SSL on this port")
    parser.add_argument(
        "--scram-users", type=Path, default=None, help='JSON file {"user": "password"}: SCRAM-SHA-512 users'
    )
    args = parser.parse_args(argv)
    users = json.loads(args.scram_users.read_text()) if args.scram_users else None
    broker = KafkaBroker(
        args.home, args.port, args.controller_port or args.port + 1, secure_port=args.secure_port, scram_users=users
    )
    errors = (LocalBrokerError, KafkaUnavailableError)
    return run_command(broker, args.command, args.timeout, "kafka broker", broker.bootstrap, errors)


if __name__ == "__main__":
    sys.exit(main())
