"""Fixtures shared by every test tier. Each block belongs to one area; add yours as a separate block."""

from __future__ import annotations

# =====================================================================================================
# Kafka: one real single-node KRaft broker per test session, unique topic names per test.
# Tests that use these carry the `kafka` marker.
#   STREAMJOIN_TEST_KAFKA_PORT  client port of the test broker (default 19092; controller = port + 1)
#   STREAMJOIN_KEEP_BROKER=1    leave a broker this session started running (faster next session)
# =====================================================================================================
import os
import uuid
from collections.abc import Callable, Iterator

import pytest

from streamjoin.core.errors import LocalBrokerError
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.localdev.kafka_broker import KafkaBroker, broker_answers

KAFKA_TEST_PORT = int(os.environ.get("STREAMJOIN_TEST_KAFKA_PORT", "19092"))


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    """The test broker (``.local/test-kafka``, ``.local/test-kafka-<port>`` on another port): reused when one
    already answers on the port (a previous session's, or ``make broker-start``'s), else started here and
    stopped at the end of the session."""
    home = "test-kafka" if KAFKA_TEST_PORT == 19092 else f"test-kafka-{KAFKA_TEST_PORT}"
    broker = KafkaBroker(PROJECT_HOME / ".local" / home, KAFKA_TEST_PORT, KAFKA_TEST_PORT + 1)
    started = False
    if broker.is_running():
        broker.wait_healthy(60)
    elif not broker_answers(broker.bootstrap, timeout=5):
        try:
            started = broker.start(timeout=120)
        except LocalBrokerError:
            # Another process (`make broker-start`, a parallel test session) took the port meanwhile.
            if not broker_answers(broker.bootstrap, timeout=30):
                raise
    yield broker
    if started and os.environ.get("STREAMJOIN_KEEP_BROKER") != "1":
        broker.stop()


@pytest.fixture
def kafka_bootstrap(kafka_broker: KafkaBroker) -> str:
    return kafka_broker.bootstrap


@pytest.fixture
def topic_factory(kafka_broker: KafkaBroker) -> Iterator[Callable[[str], str]]:
    """``make("user-clicks")`` -> ``"user-clicks-3f9a1c2b"``: a name no other test (or run) uses. The
    topics are only named here; whatever exists under these names at the end of the test is deleted."""
    from streamjoin.kafka.admin import delete_topics

    suffix = uuid.uuid4().hex[:8]
    names: list[str] = []

    def make(base: str) -> str:
        name = f"{base}-{suffix}"
        names.append(name)
        return name

    yield make
    try:
        delete_topics({"bootstrap.servers": kafka_broker.bootstrap}, names, timeout=15)
    except Exception as exc:  # cleanup must not hide the test's own outcome
        print(f"warning: could not delete test topics {names}: {exc}")


@pytest.fixture
def fresh_topics(topic_factory: Callable[[str], str]) -> Callable[[str], str]:
    """Another name for :func:`topic_factory`."""
    return topic_factory


# ===================================================================================== end of Kafka


# =====================================================================================================
# Spark: one local SparkSession for the whole pytest process (the backfill, quality and Spark tiers).
# A JVM's heap is fixed when it starts and SparkSession.getOrCreate returns a running session as it is,
# so one fixture per tier meant the first tier's settings (1 GiB heap) held for all of them.
# =====================================================================================================


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The local SparkSession of :func:`spark_session.local_session`."""
    import logging

    from spark_session import local_session

    session = local_session("streamjoin-tests")
    yield session
    session.stop()
    logging.getLogger("py4j").setLevel(logging.WARNING)  # no 'closing connection' logs after pytest exits


# ===================================================================================== end of Spark


# =====================================================================================================
# Randomness: every generated test is seeded, so CI runs the same cases every time and a failure repeats.
# Hypothesis derives its seed from each test's name (derandomize); a failure prints the example and the
# blob to reproduce it. STREAMJOIN_HYPOTHESIS_PROFILE=explore draws new cases each run (to look for bugs,
# not in CI). Plain `random` use takes an explicit seed (`random.Random(seed)`), never the global one.
# =====================================================================================================
from hypothesis import settings as hypothesis_settings  # noqa: E402

hypothesis_settings.register_profile("seeded", derandomize=True, print_blob=True)
hypothesis_settings.register_profile("explore", derandomize=False, print_blob=True)
hypothesis_settings.load_profile(os.environ.get("STREAMJOIN_HYPOTHESIS_PROFILE", "seeded"))
# ================================================================================= end of Randomness
