"""The reference engine: every join shape, one record at a time, in plain Python. The test oracle.

``ReferenceEngine(spec).replay(records)`` processes records in the given order and returns what the
pipeline emits: join results (to ``spec.output.topic``, or ``"<join>"``), aggregate updates (to
``spec.aggregate.output.topic``, or ``"<aggregate>"``) and dead letters (to ``spec.dead_letter_topic``,
with ``reason`` and ``source_topic`` headers). ``replay_batch`` first puts the batch in the order of
:func:`streamjoin.core.ordering.processing_order`. The rules are in ``docs/SEMANTICS.md``.

Joiners, selectors and aggregate projections must be ``function`` projections (``module.path:name``):
Spark SQL (``expr``, ``select``) cannot be evaluated here. ``functions`` may supply Python callables
instead, keyed by role (``"joiner"``, ``"key_selector"``, ``"foreign_key"``, ``"group_by"``, ``"value"``)
or by dotted path.

State is per task: a record's task is its partition (co-partitioned inputs), so one-partition replays
have one task. The global table, the foreign-key join and the aggregation keep one state for all tasks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from streamjoin.core.codec import output_value
from streamjoin.core.errors import SpecError
from streamjoin.core.ordering import processing_order
from streamjoin.core.records import Emitted, Record
from streamjoin.core.semantics import aggregate, foreign_key, stream_stream, stream_table, table_table
from streamjoin.core.semantics.common import Result, Side, Step
from streamjoin.core.shapes import traits
from streamjoin.core.spec import Input, Joiner, Kind, PipelineSpec, Projection, Reduce, Role, Shape, import_function

JOIN_TOPIC = "<join>"
AGGREGATE_TOPIC = "<aggregate>"


def default_joiner(key: Any, left: Any, right: Any) -> dict[str, Any]:
    return {"left": left, "right": right}


def _history(inp: Input) -> int | None:
    """A versioned input's history retention (ms), or None for a plain table."""
    return inp.versioned.history_retention if inp.versioned is not None else None


class ReferenceEngine:
    """Processes records of one pipeline exactly as the semantics say; see the module docstring.

    :param spec: the pipeline.
    :param functions: optional callables overriding the spec's projections, by role or dotted path.
    :raises SpecError: a projection is Spark SQL (no override given) or its function cannot be imported.
    """

    def __init__(self, spec: PipelineSpec, functions: Mapping[str, Callable[..., Any]] | None = None) -> None:
        self.spec = spec
        self._overrides = dict(functions or {})
        join = spec.join
        self.shape, self.kind = join.shape, join.kind
        self.joiner = self._resolve_joiner(join.joiner)
        self.key_selector = self._resolve("key_selector", "join.key_selector", join.key_selector)
        self.foreign_key = self._resolve("foreign_key", "join.foreign_key", join.foreign_key)
        agg = spec.aggregate
        self.group_by = self._resolve("group_by", "aggregate.group_by", agg.group_by) if agg else None
        self.value_of = self._resolve("value", "aggregate.value", agg.value) if agg else None
        self.counting = agg is not None and agg.reduce is Reduce.COUNT
        self.output_topic = spec.output.topic or JOIN_TOPIC
        self.aggregate_topic = (agg.output.topic or AGGREGATE_TOPIC) if agg else None
        self.counters: dict[str, int] = {"records": 0, "emitted": 0, "late_dropped": 0, "dead_lettered": 0}
        self._inputs: dict[str, tuple[Side, Role]] = {
            spec.left.topic: (Side.LEFT, spec.left.role),
            spec.right.topic: (Side.RIGHT, spec.right.role),
        }
        self.stream_time: dict[int, int] = {}
        self._tasks: dict[int, Any] = {}
        self._global = stream_table.TableState()
        self._fk = foreign_key.ForeignKeyState(join.kind)
        if join.shape is Shape.TABLE_TABLE_FK:
            self._fk.left_versions.history_retention = _history(spec.left)
            self._fk.right_versions.history_retention = _history(spec.right)
        self._stream_agg = aggregate.StreamAggregateState()
        self._table_agg = aggregate.TableAggregateState()

    # --- projections ----------------------------------------------------------------------------------
    def _sql_error(self, path: str, value: Any, role: str) -> SpecError:
        return SpecError(
            self.spec.name,
            path,
            value,
            f"a 'function' projection (module.path:name): the reference engine cannot evaluate Spark SQL; "
            f"or pass functions={{{role!r}: callable}}",
        )

    def _function(self, role: str, path: str, dotted: str) -> Callable[..., Any]:
        if dotted in self._overrides:
            return self._overrides[dotted]
        return import_function(dotted, file=self.spec.name, where=path)

    def _resolve(self, role: str, path: str, projection: Projection | None) -> Callable[..., Any] | None:
        if role in self._overrides:
            return self._overrides[role]
        if projection is None:
            return None
        if projection.function is None:
            raise self._sql_error(f"{path}.expr", projection.expr, role)
        return self._function(role, f"{path}.function", projection.function)

    def _resolve_joiner(self, joiner: Joiner) -> Callable[..., Any]:
        if "joiner" in self._overrides:
            return self._overrides["joiner"]
        if joiner.select is not None:
            raise self._sql_error("join.joiner.select", joiner.select, "joiner")
        if joiner.function is not None:
            return self._function("joiner", "join.joiner.function", joiner.function)
        return default_joiner

    # --- processing -----------------------------------------------------------------------------------
    def replay(self, records: Iterable[Record]) -> list[Emitted]:
        """Process records one at a time in the given (file) order; continues from the current state."""
        emitted: list[Emitted] = []
        for record in records:
            emitted.extend(self.process(record))
        return emitted

    def replay_batch(self, records: Iterable[Record]) -> list[Emitted]:
        """Process a batch in :func:`processing_order`; a record's offset is first set to its position
        among the batch's records of the same topic and partition."""
        counts: dict[tuple[str, int], int] = {}
        numbered: list[Record] = []
        for record in records:
            queue = (record.topic, record.partition)
            numbered.append(dataclasses.replace(record, offset=counts.get(queue, 0)))
            counts[queue] = counts.get(queue, 0) + 1
        return self.replay(processing_order(numbered, self.spec))

    def process(self, record: Record) -> list[Emitted]:
        """Process one record fully; returns what it emits, in order."""
        if record.topic not in self._inputs:
            raise ValueError(f"record on topic {record.topic!r} is not an input of the join of {self.spec.name!r}")
        self.counters["records"] += 1
        side, role = self._inputs[record.topic]
        lookup_key = record.key
        selects = role is Role.STREAM and self.shape is Shape.STREAM_GLOBALTABLE and self.key_selector is not None
        if selects and record.value is not None:
            assert self.key_selector is not None
            lookup_key = self.key_selector(record.key, record.value)
        # a null join key is dropped (dead letter) unless the record is on a side the join keeps (KIP-962)
        if lookup_key is None and not self._outer_side(side, role):
            return self._dead_letter(record, "null-key")
        if role is Role.STREAM and record.value is None:
            return self._dead_letter(record, "null-value")
        step = self._step(record, side, role, lookup_key)
        if step.late:
            self.counters["late_dropped"] += 1
        out: list[Emitted] = []
        for result in step.results:
            out.extend(self._emit(result))
        self.counters["emitted"] += len(out)
        return out

    def _outer_side(self, side: Side, role: Role) -> bool:
        """Whether a stream record of this side is joined with null when its join key is null (KIP-962):
        the left side of a left or outer join, the right side of a stream-stream outer join. For a
        stream-globaltable join the join key is the lookup key (``key_selector``'s, else the stream key)."""
        if role is not Role.STREAM or not traits(self.shape).stream_result:
            return False
        if side is Side.LEFT:
            return self.kind in (Kind.LEFT, Kind.OUTER)
        return self.shape is Shape.STREAM_STREAM and self.kind is Kind.OUTER

    def _step(self, record: Record, side: Side, role: Role, lookup_key: Any) -> Step:
        if role is Role.GLOBAL_TABLE:
            self._global.apply(record.key, record.value, record.ts)
            return Step()
        task = record.partition
        previous = self.stream_time.get(task)
        now = self.stream_time[task] = record.ts if previous is None else max(previous, record.ts)
        shape, kind, spec = self.shape, self.kind, self.spec
        if shape is Shape.STREAM_GLOBALTABLE:
            return stream_table.step_global_stream(kind, self._global, record, lookup_key)
        if shape is Shape.TABLE_TABLE_FK:
            if side is Side.RIGHT:
                return foreign_key.step_right(self._fk, record, now)
            assert self.foreign_key is not None
            fk = None if record.value is None else self.foreign_key(record.key, record.value)
            return foreign_key.step_left(self._fk, record, now, fk)
        state = self._tasks.get(task)
        if shape is Shape.STREAM_STREAM:
            if state is None:
                window = spec.join.window
                assert window is not None
                state = stream_stream.StreamStreamState(window.before, window.after, spec.join.grace, kind)
            self._tasks[task] = state
            if record.key is None:
                return stream_stream.step_null_key(state, record, side)
            return stream_stream.step(state, record, now, side)
        if shape is Shape.STREAM_TABLE:
            if state is None:
                versioned = spec.right.versioned
                table = stream_table.TableState(versioned.history_retention if versioned else None)
                state = stream_table.StreamTableState(kind, table, spec.join.grace)
            self._tasks[task] = state
            if side is Side.RIGHT:
                return stream_table.step_table(state, record, now)
            if record.key is None:
                return stream_table.step_null_key(state, record)
            return stream_table.step_stream(state, record, now)
        if state is None:
            state = table_table.TableTableState(
                kind,
                table_table.SideTable(_history(spec.left)),
                table_table.SideTable(_history(spec.right)),
            )
        self._tasks[task] = state
        return table_table.step(state, record, now, side)

    # --- output ---------------------------------------------------------------------------------------
    def _dead_letter(self, record: Any, reason: str, source_topic: str | None = None) -> list[Emitted]:
        self.counters["dead_lettered"] += 1
        headers = (("reason", reason), ("source_topic", source_topic or record.topic))
        return [Emitted(self.spec.dead_letter_topic, record.key, record.value, record.ts, headers)]

    def _emit(self, result: Result) -> list[Emitted]:
        value = None if result.tombstone else self.joiner(result.key, result.left, result.right)
        value = output_value(value, self.spec.output.value_format)
        joined = Emitted(self.output_topic, result.key, value, result.ts)
        return [joined, *self._aggregate(joined)]

    def _aggregate(self, joined: Emitted) -> list[Emitted]:
        if self.group_by is None or self.aggregate_topic is None:
            return []
        stream_shaped = traits(self.shape).stream_result
        if joined.value is None:  # a tombstone: only table-shaped results have them
            updates = aggregate.step_table(self._table_agg, joined.key, None, 0, joined.ts)
            return [Emitted(self.aggregate_topic, u.group, u.total, u.ts) for u in updates]
        group = self.group_by(joined.key, joined.value)
        amount: Any = 1 if self.counting else None
        if group is not None and not self.counting:
            assert self.value_of is not None
            amount = self.value_of(joined.key, joined.value)
        reason = "null-group" if group is None else ("null-amount" if amount is None else None)
        out: list[Emitted] = []
        if reason is not None:
            out = self._dead_letter(joined, reason, self.output_topic)
            group = None
        if stream_shaped:
            updates = [] if group is None else aggregate.step_stream(self._stream_agg, group, amount, joined.ts)
        else:
            updates = aggregate.step_table(self._table_agg, joined.key, group, amount, joined.ts)
        return out + [Emitted(self.aggregate_topic, u.group, u.total, u.ts) for u in updates]
