"""The kernel's per-record rules in one plain JVM (``LocalKernel``: the kernel's own stages, stores in memory, no
Spark), against the reference engine and Kafka Streams 4.1.1, on every generated case of the differential matrix
and every scenario:

* in replay's file order (one task) and in the batch ordering rule over three co-partitioned partitions, cut into
  batches of 1 to 4 records along the processing order (state carried between them as a job's stores carry it),
  the kernel emits exactly what the reference engine emits (each output topic in order; dead letters are the
  driver's, not the kernel's);
* per partition, Kafka Streams' ``TopologyTestDriver`` is fed that partition's records (and a global table's) in
  the same processing order: its output equals the kernel task's, or a documented difference of
  ``kafka_differences.py`` explains it by its rule (join shapes whose tasks are independent per partition;
  aggregates and foreign keys cross partitions, so they are compared with Kafka in file order by
  ``test_matrix_kafka_streams``, against the reference the kernel equals here).

The Spark tier (``tests/spark``) keeps what only Spark shows: the state store, crashes, sinks, several executors.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from kafka_differences import classify

from kafka_streams_oracle import kafka_streams_runs
from kernel_rules import KernelOutput, KernelRun, batch_order_run, file_order_run, kernel_replay, per_topic
from matrix_cases import MATRIX, Case, Cell, cases
from scenario_loader import Scenario, load_scenarios
from streamjoin.core.ordering import processing_order
from streamjoin.core.reference import ReferenceEngine
from streamjoin.core.semantics.common import hashable
from streamjoin.core.shapes import SHAPES, Role, Shape
from streamjoin.core.spec import parse_spec

pytestmark = pytest.mark.kafka_streams

SCENARIOS = load_scenarios()
PARTITIONS = 3
#: cells whose tasks are independent per partition (no aggregate, no foreign key): compared with Kafka per task
PER_TASK = [cell for cell in MATRIX if cell.agg is None and cell.shape is not Shape.TABLE_TABLE_FK]


#: stream-stream cases also run with times and windows scaled by this: the kernel's time buckets (an eighth of the
#: retention) then hold several times, so an edge inside a bucket is not hidden by the bucket's own bound
SCALE = 8


def _runs(spec: Any, functions: Any, records: Any, seed: int, max_batch: int) -> tuple[KernelRun, ...]:
    runs = (
        file_order_run(spec, functions, records),
        batch_order_run(spec, functions, records, partitions=PARTITIONS, seed=seed, max_batch=max_batch),
    )
    if spec.join.shape is not Shape.STREAM_STREAM:
        return runs
    data = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    window = spec.join.window
    assert window is not None
    data["join"] |= {"window": {"before": f"{window.before * SCALE}ms", "after": f"{window.after * SCALE}ms"},
                     "grace": f"{spec.join.grace * SCALE}ms"}  # fmt: skip
    scaled = [replace(r, ts=r.ts * SCALE) for r in records]
    return (*runs, batch_order_run(parse_spec(data, spec.name), functions, scaled, partitions=PARTITIONS,
                                   seed=seed, max_batch=max_batch))  # fmt: skip


@pytest.fixture(scope="module")
def matrix() -> dict[str, list[tuple[Case, KernelRun, KernelOutput]]]:
    """Per cell, each case's runs (file order, batch order; stream-stream scaled too) and what the kernel emitted,
    from one JVM run."""
    every = [(case, run) for cell in MATRIX for case in cases(cell) for run in _runs(*case.spec(), case.records,
                                                                                     case.seed, 4)]  # fmt: skip
    outputs = kernel_replay([run for _, run in every])
    out: dict[str, list[tuple[Case, KernelRun, KernelOutput]]] = {}
    for (case, run), output in zip(every, outputs, strict=True):
        out.setdefault(case.cell.id, []).append((case, run, output))
    return out


def _expected(run: KernelRun) -> Any:
    engine = ReferenceEngine(run.spec, run.functions)
    return engine.replay(run.records) if run.file_order else engine.replay_batch(run.records)


def _differs(run: KernelRun, output: KernelOutput, expected: Any) -> str | None:
    """Why the kernel's output is not the expected one (None: it is)."""
    how = "file order" if run.file_order else f"{len(run.batches)} batches over {PARTITIONS} partitions"
    if output.error is not None:
        return f"{how}: the kernel failed:\n{output.error[:3000]}"
    want, got = per_topic(run.spec, expected), per_topic(run.spec, output.emitted)
    if want != got:
        records = "\n".join(f"  [{r.partition}:{r.offset}] {r.topic} {r.key}={r.value}@{r.ts}" for r in run.records)
        return f"{how}:\n{records}\nreference: {want}\nkernel:    {got}"
    return None


@pytest.mark.parametrize("cell", MATRIX, ids=str)
def test_the_kernels_rules_equal_the_reference(cell: Cell, matrix: dict[str, Any]) -> None:
    differing = []
    for case, run, output in matrix[cell.id]:
        why = _differs(run, output, _expected(run))
        if why is not None:
            differing.append(f"seed {case.seed} ({'versioned' if case.versioned else 'plain'}), {why}")
    assert not differing, f"{cell}: {len(differing)} runs differ from the reference; the first:\n" + differing[0]


@pytest.fixture(scope="module")
def scenario_runs() -> dict[str, tuple[list[KernelRun], list[KernelOutput]]]:
    """Per scenario, its runs (file order; one-record batches over three partitions; scaled, for stream-stream)
    and what the kernel emitted, from one JVM run."""
    runs = {s.name: list(_runs(s.spec, None, s.inputs, 0, 1)) for s in SCENARIOS}
    outputs = iter(kernel_replay([run for group in runs.values() for run in group]))
    return {name: (group, [next(outputs) for _ in group]) for name, group in runs.items()}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_every_scenario_on_the_kernels_rules(scenario: Scenario, scenario_runs: dict[str, Any]) -> None:
    """Each scenario in file order gives its expected changelog; over three partitions in one-record batches (and
    scaled, for stream-stream), the reference's answer for that processing order."""
    runs, outputs = scenario_runs[scenario.name]
    why = _differs(runs[0], outputs[0], scenario.expected)
    assert why is None, f"{scenario.name}: {why}"
    for run, output in zip(runs[1:], outputs[1:], strict=True):
        why = _differs(run, output, _expected(run))
        assert why is None, f"{scenario.name}: {why}"


#: cells whose aggregate may emit per batch (after a stream-producing join: Spark's per-batch emit)
PER_BATCH = [cell for cell in MATRIX if cell.agg is not None and not SHAPES[cell.shape].table_result]


@pytest.mark.parametrize("cell", PER_BATCH, ids=str)
def test_a_per_batch_aggregate_emits_each_groups_last_change_of_each_batch(cell: Cell) -> None:
    """With ``emit: per_batch``, in every batch each group's update is its last per-change update of that batch
    (whose exactness the cells above check), once; each key's records in order on each topic (the order Kafka
    keeps), the join results unchanged."""
    runs = []
    for case in cases(cell):
        spec, functions = case.spec()
        data = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
        data["aggregate"]["emit"] = "per_batch"
        runs.append(batch_order_run(parse_spec(data, spec.name), functions, case.records, partitions=PARTITIONS,
                                    seed=case.seed, max_batch=4))  # fmt: skip
    differing = []
    for run, output in zip(runs, kernel_replay(runs), strict=True):
        engine = ReferenceEngine(run.spec, run.functions)
        expected: list[Any] = []
        for batch in run.batches:  # contiguous cuts of the processing order: replayed one after the other
            changes = [row for row in engine.replay(batch) if row.topic != run.spec.dead_letter_topic]
            last = {hashable(row.key): i for i, row in enumerate(changes) if row.topic == engine.aggregate_topic}
            expected += [row for i, row in enumerate(changes)
                         if row.topic != engine.aggregate_topic or last[hashable(row.key)] == i]  # fmt: skip
        if output.error is not None or _by_key(expected) != _by_key(output.emitted):
            differing.append(_differs(run, output, expected))
    assert len(runs) == 60 and not differing, f"{cell}: {len(differing)} runs differ; the first:\n{differing[0]}"


def _by_key(rows: list[Any]) -> dict[tuple[str, Any], list[tuple[Any, int]]]:
    keyed: dict[tuple[str, Any], list[tuple[Any, int]]] = {}
    for row in rows:
        keyed.setdefault((row.topic, hashable(row.key)), []).append((hashable(row.value), row.ts))
    return keyed


def _task_case(case: Case, run: KernelRun, task: int) -> Case:
    """The case as Kafka Streams' task ``task`` sees it: its partition's records (and a global table's), in the
    run's processing order, as one partition."""
    spec = run.spec
    mine = [r for r in run.records if r.partition == task or spec.input_by_topic(r.topic)[1].role is Role.GLOBAL_TABLE]
    ordered = processing_order(mine, spec)
    return replace(case, records=tuple(replace(r, partition=0, offset=i) for i, r in enumerate(ordered)))


@pytest.fixture(scope="module")
def per_task(matrix: dict[str, Any]) -> list[tuple[Case, list[Any], Any]]:
    """For each per-task cell's batch-order runs, each task's case, the kernel task's join results and what Kafka
    Streams emitted for that case (one JVM for all)."""
    items = []
    for cell in PER_TASK:
        for case, run, output in matrix[cell.id]:
            if run.file_order or output.error is not None or run.spec.join != case.spec()[0].join:  # scaled
                continue
            for task in range(PARTITIONS):
                mine = [row for row, t in zip(output.emitted, output.tasks, strict=True) if t == task]
                items.append((_task_case(case, run, task), mine))
    kafka = kafka_streams_runs([(c.spec()[0], c.records, c.spec()[1]) for c, _ in items])
    return [(c, mine, k) for (c, mine), k in zip(items, kafka, strict=True)]


def test_each_kernel_task_equals_kafka_streams_task(per_task: list[tuple[Case, list[Any], Any]]) -> None:
    """A kernel task's results are the reference's for its partition's records, and Kafka Streams' task given
    the same records in the same order emits the same, or a documented difference explains it."""
    assert len(per_task) == len(PER_TASK) * 60 * PARTITIONS
    differing, unexplained = [], []
    for case, mine, kafka in per_task:
        spec, functions = case.spec()
        reference = ReferenceEngine(spec, functions).replay(case.records)
        if per_topic(spec, mine) != per_topic(spec, reference):
            differing.append(f"{case}\nreference: {per_topic(spec, reference)}\nkernel task: {per_topic(spec, mine)}")
        verdict = classify(case, kafka)
        if verdict.unexplained:
            unexplained.append(verdict.detail)
    assert not differing, f"{len(differing)} kernel tasks differ from the reference; the first:\n{differing[0]}"
    assert not unexplained, f"{len(unexplained)} tasks differ from Kafka Streams, unexplained; the first:\n" + (
        unexplained[0]
    )
