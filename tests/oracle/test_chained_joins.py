"""Chained joins (``joins:``) and stream-stream self-joins: the reference engine equals Kafka Streams 4.1.1
(``TopologyTestDriver``, the chained DSL topology built by ``java/ks-oracle/.../Chain.java``), record for record
on each output topic, on Kafka's own multi-join tests and a two-table enrichment (``tests/chained_cases.py``).
The self-join runs twice: with ``topology.optimization=all`` (KIP-862's one-store ``KStreamKStreamSelfJoin``, as
Kafka's ``testSelfJoin``) and without (the plain join of a stream with itself); both must equal the reference."""

from __future__ import annotations

import json

import pytest

from chained_cases import CASES, STREAM_STREAM_SELF_JOIN_INNER, ChainCase
from kafka_streams_oracle import OracleRun, kafka_streams_runs, without_dead_letters
from streamjoin.core.records import Emitted
from streamjoin.core.reference import ReferenceEngine

pytestmark = pytest.mark.kafka_streams


@pytest.fixture(scope="module")
def runs() -> dict[str, OracleRun]:
    """Every case through Kafka Streams (one JVM per optimization setting)."""
    cases = [(case.spec, case.records, None) for case in CASES]
    optimized = kafka_streams_runs(cases)
    plain = kafka_streams_runs([(STREAM_STREAM_SELF_JOIN_INNER.spec, STREAM_STREAM_SELF_JOIN_INNER.records, None)],
                               optimize=False)  # fmt: skip
    out = {case.name: run for case, run in zip(CASES, optimized, strict=True)}
    out[f"{STREAM_STREAM_SELF_JOIN_INNER.name}-unoptimized"] = plain[0]
    return out


def _per_topic(rows: list[Emitted]) -> dict[str, list[str]]:
    topics: dict[str, list[str]] = {}
    for row in rows:
        topics.setdefault(row.topic, []).append(json.dumps([row.key, row.value, row.ts]))
    return topics


PARAMS = [(case, case.name) for case in CASES] + [
    (STREAM_STREAM_SELF_JOIN_INNER, f"{STREAM_STREAM_SELF_JOIN_INNER.name}-unoptimized")
]


@pytest.mark.parametrize(("case", "run_name"), PARAMS, ids=[name for _, name in PARAMS])
def test_reference_equals_kafka_streams_record_for_record(case: ChainCase, run_name: str,
                                                          runs: dict[str, OracleRun]) -> None:  # fmt: skip
    run = runs[run_name]
    assert run.error is None, f"{run_name} ({case.source}): Kafka Streams failed:\n{run.error}"
    reference = _per_topic(without_dead_letters(case.spec, ReferenceEngine(case.spec).replay(case.records)))
    kafka = _per_topic(run.emitted)
    assert kafka["out"], f"{run_name}: Kafka Streams emitted no join result (a wrong topology would pass vacuously)"
    assert kafka == reference, f"{run_name} ({case.source}):\nreference: {reference}\nKafka Streams: {kafka}"
