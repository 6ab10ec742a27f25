"""Chained joins (``joins:``) and stream-stream self-joins: the reference engine equals Kafka Streams 4.1.1
(``TopologyTestDriver``, the chained DSL topology built by ``java/ks-oracle/.../Chain.java``), record for record
on each output topic, on Kafka's own multi-join tests and a two-table enrichment (``tests/chained_cases.py``).
The self-join runs twice: with ``topology.optimization=all`` (KIP-862's one-store ``KStreamKStreamSelfJoin``, as
Kafka's ``testSelfJoin``) and without (the plain join of a stream with itself); both must equal the reference.
Generated chains (stream-stream stages of every kind, null keys and values) equal Kafka Streams or differ only as
the documented differences explain them, case by case (``kafka_differences.classify``, as the matrix).

Time: the two JVM runs (~530 cases) ~5 s on a loaded 2-core machine; the rules' replays (``traced``, ``classify``)
~0.7 s."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kafka_differences import DROPPED_TIME, GETTER_TS, HELD, Verdict, classify, traced

from chained_cases import (
    CASES,
    GENERATED,
    GROUPS,
    SELF_JOIN_LEFT_REWRITTEN,
    SELF_JOIN_RETENTION_EDGE,
    SELF_JOINS_GENERATED,
    STREAM_STREAM_SELF_JOIN_INNER,
    TABLE_TABLE_GETTER_TS,
    ChainCase,
)
from kafka_streams_oracle import OracleRun, kafka_streams_runs, without_dead_letters
from streamjoin.core.records import Emitted
from streamjoin.core.reference import ReferenceEngine

pytestmark = pytest.mark.kafka_streams


EDGES = [SELF_JOIN_RETENTION_EDGE, SELF_JOIN_LEFT_REWRITTEN]
#: the cases Kafka Streams runs with topology optimization (a self-join as KIP-862's), and without
OPTIMIZED = [*CASES, *GENERATED, *EDGES, TABLE_TABLE_GETTER_TS]
PLAIN = [STREAM_STREAM_SELF_JOIN_INNER, *SELF_JOINS_GENERATED, *EDGES]


@pytest.fixture(scope="module")
def all_runs() -> dict[tuple[str, bool], OracleRun]:
    """Every case through Kafka Streams, by (case name, optimized): one JVM per optimization setting. The runner's
    tables also hold the values the reference reaches replaying a case by a documented difference's rule."""
    out: dict[tuple[str, bool], OracleRun] = {}
    for optimize, cases in ((True, OPTIMIZED), (False, PLAIN)):
        runs = kafka_streams_runs([(case.spec, case.records, None) for case in cases], optimize=optimize,
                                  traced=[traced(case) for case in cases])  # fmt: skip
        out |= {(case.name, optimize): run for case, run in zip(cases, runs, strict=True)}
    return out


@pytest.fixture(scope="module")
def runs(all_runs: dict[tuple[str, bool], OracleRun]) -> dict[str, OracleRun]:
    out = {case.name: all_runs[(case.name, True)] for case in CASES}
    out[f"{STREAM_STREAM_SELF_JOIN_INNER.name}-unoptimized"] = all_runs[(STREAM_STREAM_SELF_JOIN_INNER.name, False)]
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
    # an earlier stage's own output (``joins[i].output``) is its results as the next stage reads them: the
    # oracle's topology writes the last stage's and the aggregate's topics
    for stage in case.spec.earlier_joins:
        if stage.output is not None and stage.output.topic is not None:
            assert reference.pop(stage.output.topic), f"{run_name}: nothing written to {stage.output.topic}"
    kafka = _per_topic(run.emitted)
    assert kafka["out"], f"{run_name}: Kafka Streams emitted no join result (a wrong topology would pass vacuously)"
    assert kafka == reference, f"{run_name} ({case.source}):\nreference: {reference}\nKafka Streams: {kafka}"


@pytest.fixture(scope="module")
def generated_verdicts(all_runs: dict[tuple[str, bool], OracleRun]) -> list[tuple[Verdict, OracleRun]]:
    """Each generated chain's verdict against Kafka Streams (``kafka_differences.classify``, the matrix's rules
    applied at every stage they concern)."""
    runs = [all_runs[(case.name, True)] for case in GENERATED]
    return [(classify(case, run), run) for case, run in zip(GENERATED, runs, strict=True)]


@pytest.mark.parametrize("group", GROUPS)
def test_generated_chains_equal_kafka_streams(group: str, generated_verdicts: list[tuple[Verdict, OracleRun]]) -> None:
    """Chains of every stage pair (with plain and versioned tables) and every three-stage chain, random kinds and
    records (``chained_cases.generated``, null keys and values included): each case equals Kafka Streams or
    differs only as documented differences explain by their rules, and the group's cases emit results."""
    mine = [(verdict, run) for verdict, run in generated_verdicts if verdict.case.group == group]
    assert sum(len(_kafka_out(run)) for verdict, run in mine if run.error is None) > 0, f"{group}: no join result"
    unexplained = [verdict for verdict, _ in mine if verdict.unexplained]
    assert not unexplained, (
        f"{group}: {len(unexplained)} of {len(mine)} cases differ from Kafka Streams and no documented difference "
        "explains them; the first:\n" + "\n\n".join(verdict.detail for verdict in unexplained[:2])
    )


def test_generated_chains_show_the_stream_stream_differences(
    generated_verdicts: list[tuple[Verdict, OracleRun]],
) -> None:
    """The generated chains reach the stream-stream rules in a chain: held results (left/outer stages) and dropped
    records (null keys and values) change what Kafka emits in some cases, which their rules explain. (``-s``
    prints the figures.)"""
    explained = Counter(" + ".join(map(str, v.explained_by)) for v, _ in generated_verdicts if v.explained_by)
    print(f"{len(generated_verdicts)} chains, {sum(v.equal for v, _ in generated_verdicts)} equal, explained: "
          f"{dict(sorted(explained.items()))}")  # fmt: skip
    used = {difference for verdict, _ in generated_verdicts for difference in verdict.explained_by}
    assert {HELD, DROPPED_TIME} <= used, explained


def _reference_out(case: ChainCase) -> list[tuple[Any, Any, int]]:
    return [(r.key, r.value, r.ts) for r in ReferenceEngine(case.spec).replay(case.records) if r.topic == "out"]


def _kafka_out(run: OracleRun) -> list[tuple[Any, Any, int]]:
    assert run.error is None, run.error
    return [(r.key, r.value, r.ts) for r in run.emitted if r.topic == "out"]


def test_generated_self_joins_equal_kafkas_plain_join(all_runs: dict[tuple[str, bool], OracleRun]) -> None:
    """Inner, left and outer self-joins of random records (20 each): the reference equals Kafka Streams' join of a
    stream with itself (no topology optimization; KIP-862's rewrite differs, see the next test)."""
    runs = [all_runs[(case.name, False)] for case in SELF_JOINS_GENERATED]
    differing = [case.name for case, run in zip(SELF_JOINS_GENERATED, runs, strict=True)
                 if _kafka_out(run) != _reference_out(case)]  # fmt: skip
    assert not differing and sum(len(_kafka_out(run)) for run in runs) > 100, differing


def test_kip_862s_self_join_differs_only_as_documented(all_runs: dict[tuple[str, bool], OracleRun]) -> None:
    """``self-join-retention-edge`` and ``self-join-kind-rewritten`` (docs/SEMANTICS.md): on a case built for each,
    Kafka Streams' plain join equals the reference, and the optimized one lacks exactly the documented row."""
    semantics = (Path(__file__).resolve().parents[2] / "docs" / "SEMANTICS.md").read_text()
    differences = semantics.split("## Differences from Kafka Streams", 1)[1]
    assert "`self-join-retention-edge`" in differences and "`self-join-kind-rewritten`" in differences
    plain = [all_runs[(case.name, False)] for case in EDGES]
    optimized = [all_runs[(case.name, True)] for case in EDGES]
    for case, run in zip(EDGES, plain, strict=True):
        assert _kafka_out(run) == _reference_out(case), case.name
    assert _reference_out(SELF_JOIN_RETENTION_EDGE) == [("B", "p.p", 5), ("B", "q.q", 0)]
    assert _kafka_out(optimized[0]) == [("B", "p.p", 5)]  # q at streamTime - retention + 1: no self row
    assert _reference_out(SELF_JOIN_LEFT_REWRITTEN) == [("B", "a.a", 6), ("C", "z.n", 0)]
    assert _kafka_out(optimized[1]) == [("B", "a.a", 6)]  # the left join ran as the inner self-join


def test_chained_table_getter_ts_differs_only_as_documented(all_runs: dict[tuple[str, bool], OracleRun]) -> None:
    """``chained-table-getter-ts`` (docs/SEMANTICS.md) on a case built for it: Kafka Streams joins the right record of
    the second table-table stage at the timestamp the first stage's value getter recomputes (r's 0, not the left
    tombstone's 6 the result was forwarded with), and the rule explains exactly that."""
    run = all_runs[(TABLE_TABLE_GETTER_TS.name, True)]
    assert _reference_out(TABLE_TABLE_GETTER_TS) == [("B", "n.y0.n", 0), ("B", "n.y0.n", 6), ("B", "n.y0.x", 6)]
    assert _kafka_out(run) == [("B", "n.y0.n", 0), ("B", "n.y0.n", 6), ("B", "n.y0.x", 1)]
    assert classify(TABLE_TABLE_GETTER_TS, run).explained_by == (GETTER_TS,)
