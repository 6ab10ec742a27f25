"""The batch processing-order rule (streamjoin.core.ordering.processing_order)."""

from __future__ import annotations

import pytest

from streamjoin.core.ordering import effective_timestamps, processing_order
from streamjoin.core.records import Record
from streamjoin.core.spec import PipelineSpec, parse_spec


def spec_of(left_role: str, right_role: str, shape: str) -> PipelineSpec:
    join: dict[str, object] = {"shape": shape, "kind": "inner", "left": "s", "right": "t"}
    if shape == "stream-stream":
        join["window"] = {"before": 10, "after": 10}
    return parse_spec(
        {
            "name": "order_test",
            "inputs": {"s": {"topic": "s", "role": left_role}, "t": {"topic": "t", "role": right_role}},
            "join": join,
            "output": {"topic": "out"},
            "dead_letter_topic": "dlq",
        }
    )


STREAM_TABLE = spec_of("stream", "table", "stream-table")
STREAM_STREAM = spec_of("stream", "stream", "stream-stream")
STREAM_GLOBAL = spec_of("stream", "global_table", "stream-globaltable")


def r(topic: str, ts: int, offset: int, partition: int = 0, key: str = "k") -> Record:
    return Record(topic, key, f"{topic}{ts}", ts, partition, offset)


def names(records: list[Record]) -> list[str]:
    return [f"{x.topic}{x.partition}@{x.ts}#{x.offset}" for x in records]


def test_queues_merge_by_timestamp() -> None:
    batch = [r("s", 5, 0), r("s", 9, 1), r("t", 1, 0), r("t", 7, 1)]
    assert names(processing_order(batch, STREAM_TABLE)) == ["t0@1#0", "s0@5#0", "t0@7#1", "s0@9#1"]


def test_a_partition_is_never_reordered_an_out_of_order_record_waits_behind_the_running_max() -> None:
    batch = [r("s", 10, 0), r("s", 2, 1), r("s", 12, 2), r("t", 5, 0), r("t", 11, 1)]
    assert effective_timestamps(batch)[("s", 0, 1)] == 10
    assert names(processing_order(batch, STREAM_TABLE)) == ["t0@5#0", "s0@10#0", "s0@2#1", "t0@11#1", "s0@12#2"]


def test_at_equal_time_table_updates_go_before_stream_records() -> None:
    batch = [r("s", 5, 0), r("t", 5, 0)]
    assert names(processing_order(batch, STREAM_TABLE)) == ["t0@5#0", "s0@5#0"]


def test_ties_between_streams_go_by_input_position_then_partition_then_offset() -> None:
    batch = [r("t", 5, 0), r("s", 5, 0, partition=1), r("s", 5, 0), r("s", 5, 1)]
    assert names(processing_order(batch, STREAM_STREAM)) == ["s0@5#0", "s0@5#1", "s1@5#0", "t0@5#0"]


def test_global_table_records_come_first_whatever_their_timestamp() -> None:
    batch = [r("s", 1, 0), r("t", 100, 0, partition=1), r("t", 50, 0), r("s", 2, 1)]
    assert names(processing_order(batch, STREAM_GLOBAL)) == ["t0@50#0", "t1@100#0", "s0@1#0", "s0@2#1"]


def test_queues_are_read_in_offset_order_whatever_the_input_order() -> None:
    batch = [r("s", 3, 1), r("s", 8, 0)]
    assert names(processing_order(batch, STREAM_TABLE)) == ["s0@8#0", "s0@3#1"]


def test_unknown_topic_and_repeated_offset_are_rejected() -> None:
    with pytest.raises(ValueError, match="not an input"):
        processing_order([r("nope", 1, 0)], STREAM_TABLE)
    with pytest.raises(ValueError, match="appears twice"):
        processing_order([r("s", 1, 0), r("s", 2, 0)], STREAM_TABLE)
