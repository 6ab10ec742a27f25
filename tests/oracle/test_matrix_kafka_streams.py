"""The reference engine equals Kafka Streams 4.1.1 (``TopologyTestDriver``) on every generated case of every
cell of the differential matrix (``tests/matrix_cases.py``: the cases the reference tier checks for coverage),
except where a documented difference explains the case by its rule.

All cases of all cells go through one JVM (``tests/kafka_streams_oracle.py``). Compared: each output topic's
records in order (join results, aggregate updates), file order on both sides. Kafka Streams is given every
record, including those the reference dead-letters (it drops them by its own rules); dead letters are
streamjoin's own, so the reference's dead-letter topic is left out. Kafka Streams failing on a case is a
difference too.

No cell is excluded: each case is equal, or explained by the documented differences of
``kafka_differences.py`` (each recognised by its rule, alone or combined, with exact equality at the end),
or the cell's test fails showing the case and both outputs. A documented difference that no case shows
fails :func:`test_every_documented_difference_occurs`, so the list cannot go stale.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from kafka_differences import DIFFERENCES, Verdict, classify

from kafka_streams_oracle import kafka_streams_runs
from matrix_cases import MATRIX, Cell, cases

pytestmark = pytest.mark.kafka_streams

SEMANTICS = Path(__file__).resolve().parents[2] / "docs" / "SEMANTICS.md"
HEADING = "## Differences from Kafka Streams"


@pytest.fixture(scope="module")
def verdicts() -> dict[str, list[Verdict]]:
    """Per cell, each case's verdict against what Kafka Streams did with it, from one JVM run."""
    every = [case for cell in MATRIX for case in cases(cell)]
    specs = [case.spec() for case in every]
    runs = kafka_streams_runs([(spec, case.records, fns) for case, (spec, fns) in zip(every, specs, strict=True)])
    out: dict[str, list[Verdict]] = {}
    for case, run in zip(every, runs, strict=True):
        out.setdefault(case.cell.id, []).append(classify(case, run))
    return out


def summary(verdicts: dict[str, list[Verdict]]) -> list[tuple[str, int, int, dict[str, int]]]:
    """Per cell: cases run against Kafka Streams, cases equal, and cases explained per (combination of)
    documented differences."""
    rows = []
    for cell in MATRIX:
        cell_verdicts = verdicts[cell.id]
        explained = Counter(" + ".join(map(str, v.explained_by)) for v in cell_verdicts if v.explained_by)
        rows.append((cell.id, len(cell_verdicts), sum(v.equal for v in cell_verdicts), dict(sorted(explained.items()))))
    return rows


def summary_text(verdicts: dict[str, list[Verdict]]) -> str:
    lines = ["| Cell | Cases | Equal | Explained |", "|---|---|---|---|"]
    for cell_id, count, equal, explained in summary(verdicts):
        shown = ", ".join(f"{name}: {n}" for name, n in explained.items()) or "-"
        lines.append(f"| `{cell_id}` | {count} | {equal} | {shown} |")
    return "\n".join(lines)


@pytest.mark.parametrize("cell", MATRIX, ids=str)
def test_reference_equals_kafka_streams(cell: Cell, verdicts: dict[str, list[Verdict]]) -> None:
    cell_verdicts = verdicts[cell.id]
    unexplained = [v for v in cell_verdicts if v.unexplained]
    assert not unexplained, (
        f"{cell}: {len(unexplained)} of {len(cell_verdicts)} cases differ from Kafka Streams and no documented "
        f"difference explains them (seeds {[v.case.seed for v in unexplained]}); the first:\n"
        + "\n\n".join(v.detail for v in unexplained[:2])
    )


def test_every_documented_difference_occurs(verdicts: dict[str, list[Verdict]]) -> None:
    """Each difference is listed in docs/SEMANTICS.md by its name and explains at least one case (one only chains
    show: in ``test_chained_joins.py``)."""
    section = SEMANTICS.read_text().split(HEADING, 1)[1].split("\n## ", 1)[0]
    undocumented = [d.name for d in DIFFERENCES if f"`{d.name}`" not in section]
    assert not undocumented, f"not listed under {HEADING!r} in {SEMANTICS}: {undocumented}"
    used = {d for cell_verdicts in verdicts.values() for v in cell_verdicts for d in v.explained_by}
    stale = [d.name for d in DIFFERENCES if d not in used and not d.chains_only]
    assert not stale, f"documented differences no generated case shows any more (remove or fix them): {stale}"


def test_summary(verdicts: dict[str, list[Verdict]]) -> None:
    """Prints the per-cell figures (``-rP`` or ``-s`` shows them): every case ran against Kafka Streams."""
    print(summary_text(verdicts))
    assert all(count > 0 for _, count, _, _ in summary(verdicts))
