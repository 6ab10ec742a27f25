"""The differential matrix on the reference engine alone (no JVM): per cell, its seeded generated cases.

* **Batch cuts.** The streaming job cuts a backlog into micro-batches by event time (docs/SEMANTICS.md §2):
  each batch is a prefix of the merge order, so one batch, one record per batch and any sizes in between
  (a restart may change the size mid-backlog) give the same output. Here every case goes through
  ``replay_batch`` whole and through :func:`plan_batch`'s cuts, each batch a ``replay_batch`` of its records
  on the engine the batch before left (the running max of a partition is *not* carried: the cuts must make
  that unnecessary), and the outputs must be equal, in order.
* **File order vs batch order.** Where the semantics claim it, ``replay`` (file order) and ``replay_batch``
  agree: after a table-table or foreign-key join the final output table is a function of the final input
  tables (docs/SEMANTICS.md §6, §7), and so are the aggregate's non-zero totals (§8).
* **Coverage.** A cell's cases together must show everything :func:`matrix_cases.required` lists.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from matrix_cases import (
    CASES_PER_CELL,
    FEATURES,
    MATRIX,
    Case,
    Cell,
    cases,
    features,
    generate,
    missing,
    required,
    richest,
    show_rows,
)
from streamjoin.core.batch_plan import RecordsIndex, plan_batch
from streamjoin.core.ordering import source_orders
from streamjoin.core.records import Emitted, Record, final_tables
from streamjoin.core.shapes import SHAPES, Kind, Shape


def numbered(records: tuple[Record, ...]) -> list[Record]:
    """Offsets = position within (topic, partition), as a file read into one batch has them."""
    counts: Counter[tuple[str, int]] = Counter()
    out = []
    for r in records:
        out.append(Record(r.topic, r.key, r.value, r.ts, r.partition, counts[(r.topic, r.partition)]))
        counts[(r.topic, r.partition)] += 1
    return out


def replay_in_cuts(case: Case, sizes: list[int]) -> tuple[list[Emitted], list[int]]:
    """The case as the streaming job runs it: batches planned by event time with ``sizes`` in turn (the
    last one repeated), one engine carried across them. Returns the output and the batch sizes."""
    spec, _ = case.spec()
    records = numbered(case.records)
    logs: dict[tuple[str, int], list[int]] = {}
    for r in records:
        logs.setdefault((r.topic, r.partition), []).append(r.ts)
    index = RecordsIndex(logs)
    latest = index.latest()
    position = {tp: 0 for tp in latest}
    engine = case.engine()
    out: list[Emitted] = []
    taken: list[int] = []
    for n in range(len(records) + 1):
        plan = plan_batch(position, latest, source_orders(spec), index, sizes[min(n, len(sizes) - 1)])
        if plan.empty:
            break
        part = [r for r in records if plan.start[(r.topic, r.partition)] <= r.offset < plan.end[(r.topic, r.partition)]]
        taken.append(len(part))
        out += engine.replay_batch(part)
        position = dict(plan.end)
    assert sum(taken) == len(records), f"the cuts took {taken} of {len(records)} records"
    return out, taken


def cut_sizes(case: Case) -> list[list[int]]:
    n = len(case.records)
    restart = random.Random(f"{case.cell.id}/{case.seed}/cuts")
    return [[1], [2], [-(-n // 3)], [restart.randint(1, 4) for _ in range(4)]]


def final(rows: list[Emitted]) -> dict[str, dict[Any, Any]]:
    """The final output tables: the join's, and the aggregate's non-zero totals (a group whose total went
    back to 0 stays in the table; whether it was ever reached depends on the order)."""
    tables = final_tables(rows, exclude=["dlq"])
    if "agg" in tables:
        tables["agg"] = {group: total for group, total in tables["agg"].items() if total}
    return {topic: table for topic, table in tables.items() if table}


def _failures(case: Case) -> list[str]:
    whole = case.engine().replay_batch(case.records)
    problems = []
    for sizes in cut_sizes(case):
        got, taken = replay_in_cuts(case, sizes)
        if got != whole:
            problems.append(
                f"cut by sizes {sizes} into batches of {taken}: differs from one batch\n"
                f"one batch:\n{show_rows(whole)}\nin batches:\n{show_rows(got)}"
            )
    if SHAPES[case.cell.shape].table_result:
        in_file_order = case.engine().replay(case.records)
        if final(in_file_order) != final(whole):
            problems.append(
                f"final tables differ between file order and batch order\n"
                f"file order: {final(in_file_order)}\nbatch order: {final(whole)}\n"
                f"file order output:\n{show_rows(in_file_order)}\nbatch order output:\n{show_rows(whole)}"
            )
    return [f"{case}\n{problem}" for problem in problems]


@pytest.mark.parametrize("cell", MATRIX, ids=str)
def test_cell_on_the_reference(cell: Cell) -> None:
    cell_cases = cases(cell, CASES_PER_CELL)
    seen = [features(case) for case in cell_cases]
    lacking = missing(cell, seen)
    assert not lacking, f"{cell}: the {len(cell_cases)} generated cases (seeds 0..) never showed: {lacking}"
    failures = [failure for case in cell_cases for failure in _failures(case)]
    assert not failures, f"{cell}: {len(failures)} failure(s); the first:\n" + "\n\n".join(failures[:2])


def test_every_cell_needs_joins_and_what_its_shape_can_do() -> None:
    """The coverage each cell requires is not empty talk: joined results always, the non-joined sides of
    left/outer kinds, tombstones of table results, null keys of stream sides, retractions of table
    aggregates, both value-type arrangements where the shape allows both."""
    by_id = {cell.id: required(cell) for cell in MATRIX}
    assert all("joined" in need and "out-of-order-emitted" in need for need in by_id.values())
    assert {"left-only", "right-only", "null-key-joined", "null-key-right-joined", "late-emitted"} <= by_id[
        "stream-stream-outer-none"
    ]
    assert {"dl-null-key", "dl-null-value", "late"} <= by_id["stream-stream-inner-none"]
    assert {"tombstone-out", "retraction", "dl-null-group", "dl-null-amount", "versioned-joined"} <= by_id[
        "table-table-left-sum"
    ]
    assert {"long-left-joined", "string-left-joined"} <= by_id["stream-table-inner-count"]
    assert {"null-key-matched", "null-lookup-joined", "tombstone-in"} <= by_id["stream-globaltable-left-none"]
    assert set().union(*by_id.values()) == set(FEATURES)


def test_trivial_generation_fails_the_coverage_check() -> None:
    """What the old matrix generated (two null-value left records at ts 0) misses nearly everything."""
    for cell in (c for c in MATRIX if c.kind is Kind.LEFT):
        trivial = Case(cell, 0, False, False, (Record("lt", "A", None, 0), Record("lt", "A", None, 0)))
        lacking = missing(cell, [features(trivial)])
        assert any(item.startswith("joined ") for item in lacking), (cell, lacking)
        assert any(item.startswith("left-only ") for item in lacking), (cell, lacking)


def test_cases_are_reproducible_and_the_richest_is_chosen_by_coverage() -> None:
    cell = Cell(Shape.TABLE_TABLE, Kind.OUTER, "sum")
    assert generate(cell, 7) == generate(cell, 7)
    assert generate(cell, 7) != generate(cell, 8)
    cell_cases = cases(cell, 20)
    seen = [features(case) for case in cell_cases]
    best = richest(cell_cases, seen)
    need = required(cell)
    assert len(seen[cell_cases.index(best)] & need) == max(len(s & need) for s in seen)
