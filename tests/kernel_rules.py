"""The kernel's rules without Spark: cases replayed through ``dev.streamjoin.kernel.LocalKernel`` in one JVM.

``kernel_replay(runs)`` sends every run to the kernel's own stages (``KernelTask`` and the shape's ``Rules`` in the
batch ordering rule, the foreign-key and aggregate stages, routed to tasks as on Spark) with each store in memory,
and returns, per run, what the pipeline would emit, shaped as ``ReferenceEngine.replay`` returns it, without dead
letters (decoding and the projections are the driver's Spark SQL, not the kernel's: here they are done in Python
with the reference engine's resolved functions). A run is the spec's :class:`JoinPlan` (what the driver sends),
the records cut into batches, and either replay's file order (one task) or the batch ordering rule over the
spec's partitions, state carried between batches as a micro-batch job carries it in its stores.

A run of ~4,000 small cases takes ~20 s of CPU in one JVM (pyspark's jars on the classpath, no Spark context).
"""

from __future__ import annotations

import json
import os
import random
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyspark

from jvm_cases import run_cases
from streamjoin.core.codec import output_value
from streamjoin.core.join_plan import JoinPlan
from streamjoin.core.ordering import processing_order
from streamjoin.core.plans import KERNEL_JAR
from streamjoin.core.records import Emitted, Record
from streamjoin.core.reference import ReferenceEngine
from streamjoin.core.semantics.common import hashable
from streamjoin.core.shapes import ROLE_RANK, Kind, Role, Shape
from streamjoin.core.spec import Format, PipelineSpec, parse_spec
from streamjoin.spark.events import null_key_sides

MAIN_CLASS = "dev.streamjoin.kernel.LocalKernel"
#: the kernel jar whose rules run here (another build's, to try a mutation of the rules without touching the project's)
RULES_JAR = Path(os.environ.get("STREAMJOIN_RULES_KERNEL_JAR", str(KERNEL_JAR)))
SPARK_JARS = Path(pyspark.__file__).parent / "jars"
#: the whole run (one JVM for every case) takes seconds; this bounds a wedged JVM
RUN_TIMEOUT_S = 600


class KernelRulesError(RuntimeError):
    """The kernel's local runner failed (JVM, or one case): says which case and why."""


@dataclass(frozen=True)
class KernelRun:
    """One run of a case through the kernel's rules: ``batches`` of records (each record's partition and offset
    set), in replay's ``file_order`` or the batch ordering rule over ``spec.kafka.partitions`` tasks."""

    spec: PipelineSpec
    functions: Mapping[str, Callable[..., Any]] | None
    batches: tuple[tuple[Record, ...], ...]
    file_order: bool

    @property
    def records(self) -> list[Record]:
        return [record for batch in self.batches for record in batch]


@dataclass(frozen=True)
class KernelOutput:
    """What the kernel emitted for a run (join results then aggregate updates of each batch, in the batch's
    processing order), each join result's task beside it (``tasks``), or the error it raised."""

    emitted: list[Emitted]
    tasks: list[int | None]
    error: str | None = None


# --- the runs --------------------------------------------------------------------------------------------
def file_order_run(spec: PipelineSpec, functions: Any, records: Sequence[Record]) -> KernelRun:
    """``records`` in one batch, in file order (replay): one task, offsets the records' positions."""
    numbered = tuple(replace(r, partition=0, offset=i) for i, r in enumerate(records))
    return KernelRun(spec, functions, (numbered,), True)


def with_partitions(spec: PipelineSpec, partitions: int) -> PipelineSpec:
    data = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["kafka"] = {**data.get("kafka", {}), "partitions": partitions}
    return parse_spec(data, spec.name)


def spread(spec: PipelineSpec, records: Sequence[Record], partitions: int, seed: int) -> list[Record]:
    """``records`` over ``partitions`` co-partitioned partitions (a key's records of every input in one; a null
    key's anywhere; a global table's in one), each queue's offsets in file order."""
    rng = random.Random(seed)
    counts: dict[tuple[str, int], int] = {}
    out = []
    for record in records:
        if spec.input_by_topic(record.topic)[1].role is Role.GLOBAL_TABLE:
            partition = 0
        elif record.key is None:
            partition = rng.randrange(partitions)
        else:
            partition = zlib.crc32(json.dumps(record.key, sort_keys=True).encode()) % partitions
        offset = counts.get((record.topic, partition), 0)
        counts[(record.topic, partition)] = offset + 1
        out.append(replace(record, partition=partition, offset=offset))
    return out


def batch_order_run(
    spec: PipelineSpec, functions: Any, records: Sequence[Record], *, partitions: int, seed: int, max_batch: int
) -> KernelRun:
    """``records`` spread over ``partitions`` (:func:`spread`) and cut into batches of 1 to ``max_batch`` records
    along their processing order, as a micro-batch job's offset ranges cut them."""
    spec = with_partitions(spec, partitions)
    ordered = processing_order(spread(spec, records, partitions, seed), spec)
    rng = random.Random(seed)
    batches = []
    while ordered:
        size = rng.randint(1, max_batch)
        batches.append(tuple(ordered[:size]))
        ordered = ordered[size:]
    return KernelRun(spec, functions, tuple(batches), False)


# --- the JVM ---------------------------------------------------------------------------------------------
def kernel_replay(runs: Sequence[KernelRun]) -> list[KernelOutput]:
    """Per run, what the kernel's rules emit (see the module docstring); a case the kernel raised on carries its
    ``error``."""
    adapters = [_Adapter(run) for run in runs]
    results = _run_jvm([adapter.encode() for adapter in adapters])
    outputs = []
    for adapter, result in zip(adapters, results, strict=True):
        if "error" in result:
            outputs.append(KernelOutput([], [], str(result["error"])))
        else:
            outputs.append(adapter.decode(result["rows"]))
    return outputs


def _run_jvm(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if not RULES_JAR.exists():
        raise KernelRulesError(f"no kernel jar at {RULES_JAR}: run `make setup`")
    return run_cases("the kernel's local runner", [str(RULES_JAR), f"{SPARK_JARS}/*"], MAIN_CLASS, cases,
                     timeout_s=RUN_TIMEOUT_S, error=KernelRulesError)  # fmt: skip


# --- one run ---------------------------------------------------------------------------------------------
def _text(value: Any) -> str | None:
    """A value as the kernel carries it here: opaque JSON text (equal values, equal text)."""
    return None if value is None else json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


class _Adapter:
    """Decodes a run's records as the driver's ``events.decode_batch`` does, and the kernel's rows back into the
    reference engine's outputs, with the spec's projections as the reference engine resolves them."""

    def __init__(self, run: KernelRun) -> None:
        self.run = run
        self.spec = run.spec
        self.engine = ReferenceEngine(run.spec, run.functions)
        join = self.spec.join
        self.lookup = (join.shape is Shape.STREAM_GLOBALTABLE and join.key_selector is not None) or (
            join.foreign_key is not None
        )

    def _key_text(self, key: Any, fmt: Format) -> str | None:
        if key is None:
            return None
        if fmt is Format.LONG:
            return str(int(key))
        return _text(key) if fmt is Format.JSON else str(key)

    def _key_back(self, key: str | None) -> Any:
        fmt = self.spec.left.key.format
        if key is None:
            return None
        if fmt is Format.LONG:
            return int(key)
        return json.loads(key) if fmt is Format.JSON else key

    def _decoded(self, record: Record) -> list[Any]:
        spec, join = self.spec, self.spec.join
        names = list(spec.inputs)
        is_left = record.topic == spec.left.topic
        side = "L" if is_left else "R"
        inp = spec.left if is_left else spec.right
        lookup: Any = None
        join_key = record.key
        if is_left and join.shape is Shape.STREAM_GLOBALTABLE and join.key_selector is not None:
            assert self.engine.key_selector is not None
            if record.value is not None:
                lookup = self.engine.key_selector(record.key, record.value)
                join_key = lookup
        stream = inp.role is Role.STREAM
        reason = None
        if join_key is None and side not in null_key_sides(spec):
            reason = "null-key"
        elif stream and record.value is None:
            reason = "null-value"
        if join.foreign_key is not None and is_left and record.value is not None and reason is None:
            assert self.engine.foreign_key is not None
            lookup = self.engine.foreign_key(record.key, record.value)
        value = None if reason is not None else _text(record.value)
        row = [
            side,
            self._key_text(record.key, inp.key.format),
            value if is_left else None,
            None if is_left else value,
            record.value is None,
            record.ts,
            record.partition,
            record.offset,
            ROLE_RANK[inp.role],
            names.index(join.left if is_left else join.right),
            record.topic,
            reason,
        ]
        if self.lookup:
            row.append(None if lookup is None else self._key_text(lookup, spec.right.key.format))
        return row

    def _joined(self, key: Any, left: Any, right: Any) -> Any:
        return output_value(self.engine.joiner(key, left, right), self.spec.output.value_format)

    def _groups(self) -> list[list[Any]]:
        """``[key, left, right, group, amount]`` for every (key, left, right) a join result of the run can carry
        (over-approximated: per left key, every left value with every right value or none)."""
        engine = self.engine
        assert engine.group_by is not None
        lefts: dict[Any, tuple[Any, list[Any]]] = {}
        rights: dict[Any, list[Any]] = {}
        all_rights: list[Any] = []
        for record in self.run.records:
            if record.value is None:
                continue
            if record.topic == self.spec.left.topic:
                lefts.setdefault(hashable(record.key), (record.key, []))[1].append(record.value)
            else:
                rights.setdefault(hashable(record.key), []).append(record.value)
                all_rights.append(record.value)
        join = self.spec.join
        cross = join.shape in (Shape.STREAM_GLOBALTABLE, Shape.TABLE_TABLE_FK)
        left_only = [None] if join.kind is not Kind.INNER else []
        combos = []
        for hkey, (key, values) in lefts.items():
            found = all_rights if cross else rights.get(hkey, [])
            combos += [(key, left, right) for left in values for right in [*found, *left_only]]
        if join.kind is Kind.OUTER:
            for hkey, values in rights.items():
                key = next(r.key for r in self.run.records if hashable(r.key) == hkey)
                combos += [(key, None, right) for right in values]
        entries: dict[tuple[Any, ...], list[Any]] = {}
        key_format = self.spec.left.key.format
        for key, left, right in combos:
            entry_key = (self._key_text(key, key_format), _text(left), _text(right))
            if entry_key in entries:
                continue
            try:  # an over-approximated pair the spec's functions cannot take is one no result carries
                value = self._joined(key, left, right)
                group = engine.group_by(key, value)
                amount: Any = 1
                if group is not None and not engine.counting:
                    assert engine.value_of is not None
                    amount = engine.value_of(key, value)
            except (TypeError, KeyError, AttributeError):
                continue
            entries[entry_key] = [*entry_key, None if group is None else str(group),
                                  None if amount is None or group is None else str(int(amount))]  # fmt: skip
        return list(entries.values())

    def encode(self) -> dict[str, Any]:
        return {
            "plan": json.loads(JoinPlan.of(self.spec).to_json()),
            "lookup": self.lookup,
            "file_order": self.run.file_order,
            "batches": [[self._decoded(record) for record in batch] for batch in self.run.batches],
            "groups": self._groups() if self.spec.aggregate is not None else [],
        }

    def decode(self, rows: list[list[Any]]) -> KernelOutput:
        """The kernel's rows as emitted records, each batch's in its processing order (join results before the
        aggregate updates of the same place, as the driver's replay sorts them)."""
        engine = self.engine

        def order(row: list[Any]) -> tuple[Any, ...]:
            if row[0] == "J":  # J, batch, key, left, right, ts, tomb, sub, pos, input, partition, offset, task
                return (row[1], row[8], row[9], row[10], row[11], 0, row[7])
            return (row[1], row[6], row[7], row[8], row[9], 1, row[5])  # A, batch, group, total, ts, sub, pos..

        emitted: list[Emitted] = []
        tasks: list[int | None] = []
        for row in sorted(rows, key=order):
            if row[0] == "J":
                _, _, key_text, left, right, ts, tomb = row[:7]
                key = self._key_back(key_text)
                value = None
                if not tomb:
                    value = self._joined(key, *(None if t is None else json.loads(t) for t in (left, right)))
                emitted.append(Emitted(engine.output_topic, key, value, ts))
                tasks.append(row[12])
            else:
                assert engine.aggregate_topic is not None
                emitted.append(Emitted(engine.aggregate_topic, row[2], row[3], row[4]))
                tasks.append(None)
        return KernelOutput(emitted, tasks)


def per_topic(spec: PipelineSpec, rows: Sequence[Emitted]) -> dict[str, list[tuple[Any, Any, int]]]:
    """Each topic's records in order, dead letters left out (the kernel does not make them)."""
    topics: dict[str, list[tuple[Any, Any, int]]] = {}
    for row in rows:
        if row.topic != spec.dead_letter_topic:
            topics.setdefault(row.topic, []).append((hashable(row.key), hashable(row.value), row.ts))
    return topics
