"""The reference engine equals Kafka Streams 4.1.1 (``TopologyTestDriver``) on every conformance scenario.

All scenarios go through one JVM (``tests/kafka_streams_oracle.py``): ~2 s of CPU, ~3 s of wall time.
Compared: each output topic's records in order (join results, aggregate updates); dead letters are
streamjoin's own (Kafka Streams drops those records), so the reference's dead-letter topic is left out, and
every input record, dead-lettered or not, is given to Kafka Streams. A deliberate difference is listed in
``docs/SEMANTICS.md`` ("Differences from Kafka Streams") and excluded here by scenario name, with a check
that Kafka Streams still does what that section says.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kafka_streams_oracle import OracleRun, kafka_streams_runs, without_dead_letters
from scenario_loader import Scenario, load_scenarios
from streamjoin.core.records import Emitted
from streamjoin.core.reference import ReferenceEngine

pytestmark = pytest.mark.kafka_streams

SCENARIOS = load_scenarios()
SEMANTICS = Path(__file__).resolve().parents[2] / "docs" / "SEMANTICS.md"


def _kafka_raises_npe_on_the_null_key(run: OracleRun) -> None:
    assert run.error is not None and "NullPointerException: key cannot be null" in run.error, run.error


#: scenario -> (why it is excluded, a check that Kafka Streams still behaves as docs/SEMANTICS.md says)
EXCLUDED: dict[str, tuple[str, Callable[[OracleRun], None]]] = {
    "stream_table_left_grace_null_key": (
        "Kafka Streams 4.1.1 fails the task on a null-key stream record of a left stream-table join with grace: "
        "KStreamKTableJoinProcessor keeps the record (KIP-962) and puts it into its grace buffer, whose put "
        "requires a key (NullPointerException); streamjoin joins it with null at once",
        _kafka_raises_npe_on_the_null_key,
    ),
}


@pytest.fixture(scope="module")
def kafka_runs() -> dict[str, OracleRun]:
    """Every scenario through Kafka Streams, in one JVM."""
    runs = kafka_streams_runs([(s.spec, s.inputs, None) for s in SCENARIOS])
    return {scenario.name: run for scenario, run in zip(SCENARIOS, runs, strict=True)}


def _per_topic(rows: list[Emitted]) -> dict[str, list[str]]:
    topics: dict[str, list[str]] = {}
    for row in rows:
        topics.setdefault(row.topic, []).append(json.dumps([row.key, row.value, row.ts]))
    return topics


def _show(topics: dict[str, list[str]]) -> str:
    return "\n".join(f"  {topic}:\n" + "\n".join(f"    {row}" for row in rows) for topic, rows in topics.items())


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.name not in EXCLUDED], ids=str)
def test_reference_engine_equals_kafka_streams(scenario: Scenario, kafka_runs: dict[str, OracleRun]) -> None:
    run = kafka_runs[scenario.name]
    assert run.error is None, f"{scenario.name}: Kafka Streams failed:\n{run.error}"
    reference = _per_topic(without_dead_letters(scenario.spec, ReferenceEngine(scenario.spec).replay(scenario.inputs)))
    kafka = _per_topic(run.emitted)
    assert kafka == reference, (
        f"{scenario.name}: the reference engine differs from Kafka Streams 4.1.1\n"
        f"reference:\n{_show(reference)}\nKafka Streams:\n{_show(kafka)}"
    )


@pytest.mark.parametrize("name", sorted(EXCLUDED))
def test_excluded_scenarios_still_differ_as_documented(name: str, kafka_runs: dict[str, OracleRun]) -> None:
    """An exclusion names a scenario, is documented, and Kafka Streams still does what the docs say."""
    assert name in kafka_runs, f"EXCLUDED names {name!r}, which is no scenario in tests/scenarios/"
    heading = "## Differences from Kafka Streams"
    text = SEMANTICS.read_text()
    assert heading in text, f"{SEMANTICS} has no section {heading!r}"
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    assert f"`{name}.yaml`" in section, f"{name} is excluded but not listed under {heading!r} in {SEMANTICS}"
    _, still_differs = EXCLUDED[name]
    still_differs(kafka_runs[name])


def test_the_oracle_sees_every_scenario_emit(kafka_runs: dict[str, OracleRun]) -> None:
    """Kafka Streams emitted join results for every compared scenario: a runner that emits nothing (a wrong
    topic, a wrong serde) would make the comparison above vacuous where the reference emits nothing too."""
    silent = [name for name, run in kafka_runs.items() if name not in EXCLUDED and not run.emitted]
    assert not silent, f"Kafka Streams emitted nothing for {silent}"
