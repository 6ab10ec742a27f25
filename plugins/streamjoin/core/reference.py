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

A spec of several join stages (``joins:``) or a stream-stream self-join runs each stage with its own state and
clocks, a stage's results feeding the next one (docs/SEMANTICS.md section 11; :class:`Stage`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streamjoin.core.codec import output_value
from streamjoin.core.errors import SpecError
from streamjoin.core.ordering import processing_order
from streamjoin.core.records import Emitted, Record
from streamjoin.core.semantics import aggregate, foreign_key, stream_stream, stream_table, table_table
from streamjoin.core.semantics.common import Result, Side, Step, hashable
from streamjoin.core.semantics.foreign_key import ForeignKeyState
from streamjoin.core.shapes import traits
from streamjoin.core.spec import (
    Input,
    Join,
    Joiner,
    Kind,
    PipelineSpec,
    Projection,
    Reduce,
    Role,
    Shape,
    import_function,
)

JOIN_TOPIC = "<join>"
AGGREGATE_TOPIC = "<aggregate>"


def default_joiner(key: Any, left: Any, right: Any) -> dict[str, Any]:
    return {"left": left, "right": right}


def _history(inp: Input | None) -> int | None:
    """A versioned input's history retention (ms), or None for a plain table (or a stage's result)."""
    return inp.versioned.history_retention if inp is not None and inp.versioned is not None else None


@dataclass
class Stage:
    """One join stage of the engine: its join, resolved projections and state (per task where the shape has
    tasks). Stage 0 joins two inputs; stage ``i > 0`` takes stage ``i - 1``'s results as its left records."""

    index: int
    join: Join
    #: where the spec writes it (``join`` or ``joins[i]``): projection errors name it
    path: str
    joiner: Callable[..., Any]
    key_selector: Callable[..., Any] | None
    foreign_key: Callable[..., Any] | None
    #: the left input (stage 0), else None: the previous stage's results; and the right input
    left_input: Input | None
    right_input: Input
    #: the topic its results carry when they feed the next stage (its dead letters' ``source_topic``)
    topic: str
    #: per task: the max ts of the records this stage processed (Kafka: each join's own time tracker)
    stream_time: dict[int, int] = field(default_factory=dict)
    tasks: dict[int, Any] = field(default_factory=dict)
    global_table: stream_table.TableState = field(default_factory=stream_table.TableState)
    fk: ForeignKeyState | None = None

    @property
    def shape(self) -> Shape:
        return self.join.shape

    @property
    def kind(self) -> Kind:
        return self.join.kind

    def keeps(self, side: Side, role: Role) -> bool:
        """Whether a stream record of this side is joined with null when its join key is null (KIP-962):
        the left side of a left or outer join, the right side of a stream-stream outer join. For a
        stream-globaltable join the join key is the lookup key (``key_selector``'s, else the stream key)."""
        if role is not Role.STREAM or not traits(self.shape).stream_result:
            return False
        if side is Side.LEFT:
            return self.kind in (Kind.LEFT, Kind.OUTER)
        return self.shape is Shape.STREAM_STREAM and self.kind is Kind.OUTER


class ReferenceEngine:
    """Processes records of one pipeline exactly as the semantics say; see the module docstring.

    A chained spec (``joins:``) runs its stages in order per record, as Kafka Streams' topology does: a
    stage's results (their key, timestamp, and tombstones) are the next stage's left records, processed
    depth first before the input record goes on to the next stage that reads it (an input read by several
    stages, or by both sides of a stream-stream self-join, feeds them in stage order, left before right).
    The attributes ``shape``, ``kind``, ``joiner``, ``key_selector``, ``foreign_key`` and the state are the
    last stage's (the only one's for ``join:``); :attr:`stages` has them all.

    :param spec: the pipeline.
    :param functions: optional callables overriding the spec's projections, by role or dotted path (by role:
        every stage's).
    :param trace: keep every stage's results with their joined values in :attr:`traced` (tests, the oracle).
    :raises SpecError: a projection is Spark SQL (no override given) or its function cannot be imported.
    """

    def __init__(
        self, spec: PipelineSpec, functions: Mapping[str, Callable[..., Any]] | None = None, *, trace: bool = False
    ) -> None:
        self.spec = spec
        self.trace = trace
        self._overrides = dict(functions or {})
        self.stages = [self._stage(index, join) for index, join in enumerate(spec.stages)]
        last = self.stages[-1]
        self.shape, self.kind = last.shape, last.kind
        self.joiner, self.key_selector, self.foreign_key = last.joiner, last.key_selector, last.foreign_key
        agg = spec.aggregate
        self.group_by = self._resolve("group_by", "aggregate.group_by", agg.group_by) if agg else None
        self.value_of = self._resolve("value", "aggregate.value", agg.value) if agg else None
        self.counting = agg is not None and agg.reduce is Reduce.COUNT
        self.output_topic = spec.output.topic or JOIN_TOPIC
        self.aggregate_topic = (agg.output.topic or AGGREGATE_TOPIC) if agg else None
        self.counters: dict[str, int] = {"records": 0, "emitted": 0, "late_dropped": 0, "dead_lettered": 0}
        #: input topic -> the (stage, side, role) it feeds, in Kafka's order (stage order, left before right)
        self._routes: dict[str, list[tuple[Stage, Side, Role]]] = {}
        for stage in self.stages:
            sides = [(Side.RIGHT, stage.right_input)] if stage.left_input is None else [
                (Side.LEFT, stage.left_input), (Side.RIGHT, stage.right_input)]  # fmt: skip
            for side, inp in sides:
                self._routes.setdefault(inp.topic, []).append((stage, side, inp.role))
        #: table inputs read by several table-table stage sides: one table per task, updated once per record
        #: before any stage joins it (Kafka's source store), then each stage only joins (``table_table.joined``)
        table_sides = [inp.topic for stage in self.stages if stage.shape is Shape.TABLE_TABLE
                       for inp in (stage.left_input, stage.right_input) if inp is not None]  # fmt: skip
        self._shared_tables = {topic for topic in table_sides if table_sides.count(topic) > 1}
        self._side_tables: dict[tuple[str, int], table_table.SideTable] = {}
        self._source_update: table_table.Applied | None = None
        #: with ``trace``: per stage, its results in order, each with its joined value (None: a tombstone)
        self.traced: list[list[tuple[Result, Any]]] = [[] for _ in self.stages]
        # the last stage's state under the names tests and tools read
        self.stream_time, self._tasks, self._global = last.stream_time, last.tasks, last.global_table
        self._fk = last.fk if last.fk is not None else foreign_key.ForeignKeyState(last.kind)
        self._stream_agg = aggregate.StreamAggregateState()
        self._table_agg = aggregate.TableAggregateState()

    def _stage(self, index: int, join: Join) -> Stage:
        spec = self.spec
        path = spec.stage_path(index)
        stage = Stage(
            index=index,
            join=join,
            path=path,
            joiner=self._resolve_joiner(join.joiner, path),
            key_selector=self._resolve("key_selector", f"{path}.key_selector", join.key_selector),
            foreign_key=self._resolve("foreign_key", f"{path}.foreign_key", join.foreign_key),
            left_input=spec.stage_input(index),
            right_input=spec.inputs[join.right],
            topic=f"<{join.name or 'join'}>",
        )
        if join.shape is Shape.TABLE_TABLE_FK:
            stage.fk = foreign_key.ForeignKeyState(join.kind)
            stage.fk.left_versions.history_retention = _history(stage.left_input)
            stage.fk.right_versions.history_retention = _history(stage.right_input)
        return stage

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
        if projection is None:
            return None
        if role in self._overrides:
            return self._overrides[role]
        if projection.function is None:
            raise self._sql_error(f"{path}.expr", projection.expr, role)
        return self._function(role, f"{path}.function", projection.function)

    def _resolve_joiner(self, joiner: Joiner, path: str = "join") -> Callable[..., Any]:
        if "joiner" in self._overrides:
            return self._overrides["joiner"]
        if joiner.select is not None:
            raise self._sql_error(f"{path}.joiner.select", joiner.select, "joiner")
        if joiner.function is not None:
            return self._function("joiner", f"{path}.joiner.function", joiner.function)
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
        """Process one record fully (through every stage it reaches); returns what it emits, in order."""
        routes = self._routes.get(record.topic)
        if routes is None:
            raise ValueError(f"record on topic {record.topic!r} is not an input of the join of {self.spec.name!r}")
        self.counters["records"] += 1
        self._source_update = None
        if record.topic in self._shared_tables and record.key is not None:
            inp = self.spec.input_by_topic(record.topic)[1]
            self._source_update = table_table.apply(self._side_table(inp, record.partition), record)
            self.counters["late_dropped"] += self._source_update.late
        out: list[Emitted] = []
        own: Emitted | None = None  # this record's dead letter, once: several stages or sides may drop it
        for stage, side, role in routes:
            for row in self._feed(stage, record, side, role):
                if dict(row.headers).get("source_topic") == record.topic and row.topic == self.spec.dead_letter_topic:
                    if own is not None:
                        self.counters["dead_lettered"] -= 1
                        continue
                    own = row
                out.append(row)
        self.counters["emitted"] += sum(row.topic != self.spec.dead_letter_topic for row in out)
        return out

    def _feed(self, stage: Stage, record: Record, side: Side, role: Role) -> list[Emitted]:
        """One record into one side of one stage: its dead letter, or what the stage and the stages after it emit."""
        lookup_key = record.key
        selects = role is Role.STREAM and stage.shape is Shape.STREAM_GLOBALTABLE and stage.key_selector is not None
        if selects and record.value is not None:
            assert stage.key_selector is not None
            lookup_key = stage.key_selector(record.key, record.value)
        # a null join key is dropped (dead letter) unless the record is on a side the join keeps (KIP-962)
        if lookup_key is None and not stage.keeps(side, role):
            return self._dead_letter(record, "null-key")
        if role is Role.STREAM and record.value is None:
            return self._dead_letter(record, "null-value")
        step = self._step(stage, record, side, role, lookup_key)
        if step.late:
            self.counters["late_dropped"] += 1
        out: list[Emitted] = []
        for result in step.results:
            out.extend(self._emit(stage, result, record.partition))
        return out

    def _step(self, stage: Stage, record: Record, side: Side, role: Role, lookup_key: Any) -> Step:
        if role is Role.GLOBAL_TABLE:
            stage.global_table.apply(record.key, record.value, record.ts)
            return Step()
        task = record.partition
        previous = stage.stream_time.get(task)
        now = stage.stream_time[task] = record.ts if previous is None else max(previous, record.ts)
        shape, kind, join = stage.shape, stage.kind, stage.join
        if shape is Shape.STREAM_GLOBALTABLE:
            return stream_table.step_global_stream(kind, stage.global_table, record, lookup_key)
        if shape is Shape.TABLE_TABLE_FK:
            assert stage.fk is not None
            if side is Side.RIGHT:
                return foreign_key.step_right(stage.fk, record, now)
            assert stage.foreign_key is not None
            fk = None if record.value is None else stage.foreign_key(record.key, record.value)
            return foreign_key.step_left(stage.fk, record, now, fk)
        state = stage.tasks.get(task)
        if shape is Shape.STREAM_STREAM:
            if state is None:
                window = join.window
                assert window is not None
                state = stream_stream.StreamStreamState(window.before, window.after, join.grace, kind)
            stage.tasks[task] = state
            if record.key is None:
                return stream_stream.step_null_key(state, record, side)
            return stream_stream.step(state, record, now, side)
        if shape is Shape.STREAM_TABLE:
            if state is None:
                versioned = stage.right_input.versioned
                table = stream_table.TableState(versioned.history_retention if versioned else None)
                state = stream_table.StreamTableState(kind, table, join.grace)
            stage.tasks[task] = state
            if side is Side.RIGHT:
                return stream_table.step_table(state, record, now)
            if record.key is None:
                return stream_table.step_null_key(state, record)
            return stream_table.step_stream(state, record, now)
        if state is None:
            state = table_table.TableTableState(
                kind, self._side_table(stage.left_input, task), self._side_table(stage.right_input, task)
            )
        stage.tasks[task] = state
        update = self._source_update
        if update is not None and record.topic in self._shared_tables:
            return table_table.joined(state, record, side, update.existed) if update.applied else Step()
        return table_table.step(state, record, now, side)

    def _side_table(self, inp: Input | None, task: int) -> table_table.SideTable:
        """A table-table side's table in ``task``: the one table of an input several stages read, else its own."""
        if inp is None or inp.topic not in self._shared_tables:
            return table_table.SideTable(_history(inp))
        return self._side_tables.setdefault((inp.topic, task), table_table.SideTable(_history(inp)))

    # --- output ---------------------------------------------------------------------------------------
    def _dead_letter(self, record: Any, reason: str, source_topic: str | None = None) -> list[Emitted]:
        self.counters["dead_lettered"] += 1
        headers = (("reason", reason), ("source_topic", source_topic or record.topic))
        return [Emitted(self.spec.dead_letter_topic, record.key, record.value, record.ts, headers)]

    def _emit(self, stage: Stage, result: Result, partition: int) -> list[Emitted]:
        value = None if result.tombstone else stage.joiner(result.key, result.left, result.right)
        if self.trace:
            self.traced[stage.index].append((result, value))
        if stage is not self.stages[-1]:
            # the next stage's left record: the joined value as it is (no serde between stages, as in Kafka
            # Streams' topology), the result's key, ts and task (a foreign-key result's: its left key's, also
            # when a right record triggered it); a tombstone deletes its key there
            row = None if stage.fk is None else stage.fk.left.get(hashable(result.key))
            partition = partition if row is None else row.partition
            following = self.stages[stage.index + 1]
            role = Role.TABLE if traits(stage.shape).table_result else Role.STREAM
            sink = stage.join.output
            written = [] if sink is None or sink.topic is None else [  # the stage's own output, then the next stage
                Emitted(sink.topic, result.key, output_value(value, sink.value_format), result.ts)]  # fmt: skip
            return written + self._feed(following, Record(stage.topic, result.key, value, result.ts, partition),
                                        Side.LEFT, role)  # fmt: skip
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
