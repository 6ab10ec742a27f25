"""KafkaOffsets' answers when the broker answers a partition with an error: a retriable one (a leader not yet
serving a partition just created) is asked again, any other names the partition. The broker's answers come
from a small stand-in admin client: a real broker gives NOT_LEADER_FOR_PARTITION only in a race."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import ListOffsetsResultInfo

from streamjoin.core.errors import KafkaUnavailableError
from streamjoin.kafka.offsets import KafkaOffsets


class _Broker:
    """Answers list_offsets from ``answers[(topic, partition)]``: a list consumed one ask at a time, each an
    offset or a KafkaError code (the last answer stays)."""

    def __init__(self, answers: dict[tuple[str, int], list[int | tuple[str, int]]]) -> None:
        self.answers = answers
        self.asks = 0

    def list_offsets(self, request: dict[TopicPartition, Any], **_: Any) -> dict[TopicPartition, Future[Any]]:
        self.asks += 1
        futures: dict[TopicPartition, Future[Any]] = {}
        for tp in request:
            queue = self.answers[(tp.topic, tp.partition)]
            answer = queue.pop(0) if len(queue) > 1 else queue[0]
            future: Future[Any] = Future()
            if isinstance(answer, tuple):
                future.set_exception(KafkaException(KafkaError(answer[1])))
            else:
                future.set_result(ListOffsetsResultInfo(answer, 1_000 + answer, -1))
            futures[tp] = future
        return futures


def _offsets(broker: _Broker, timeout: float = 5.0) -> KafkaOffsets:
    offsets = KafkaOffsets("127.0.0.1:1", timeout=timeout)
    offsets._admin = broker  # type: ignore[assignment]
    return offsets


NOT_LEADER = ("NOT_LEADER_FOR_PARTITION", KafkaError.NOT_LEADER_FOR_PARTITION)
DENIED = ("TOPIC_AUTHORIZATION_FAILED", KafkaError.TOPIC_AUTHORIZATION_FAILED)


def test_a_partition_whose_leader_is_not_serving_yet_is_asked_again() -> None:
    broker = _Broker({("clicks", 0): [7], ("clicks", 1): [NOT_LEADER, NOT_LEADER, 3]})
    found = _offsets(broker).latest([("clicks", 0), ("clicks", 1)])
    assert found == {("clicks", 0): 7, ("clicks", 1): 3}
    assert broker.asks == 3
    assert _offsets(_Broker({("clicks", 0): [NOT_LEADER, 5]})).first_timestamps([("clicks", 0)]) == {
        ("clicks", 0): 1_005
    }


def test_an_error_no_retry_can_help_names_the_partition_at_once() -> None:
    broker = _Broker({("clicks", 0): [7], ("clicks", 1): [DENIED, 3]})
    with pytest.raises(KafkaUnavailableError, match=r"offsets of `clicks` \[1\]: .*TOPIC_AUTHORIZATION_FAILED"):
        _offsets(broker).earliest([("clicks", 0), ("clicks", 1)])
    assert broker.asks == 1


def test_a_leader_still_missing_at_the_timeout_is_an_error() -> None:
    broker = _Broker({("clicks", 0): [NOT_LEADER]})
    with pytest.raises(KafkaUnavailableError, match=r"offsets of `clicks` \[0\]: .*[Nn]ot leader"):
        _offsets(broker, timeout=0.6).latest([("clicks", 0)])
    assert broker.asks >= 2
