"""The join plan: what the kernel (``java/kernel``) runs for a pipeline, built once from its spec.

It crosses the Python/JVM border as one JSON object (``Kernel.plan``), where the kernel's ``JoinPlan.parse``
checks it against its own registry of shapes, store names, column layouts, summary format and undecodable
dead-letter reasons before the first batch: a shape either side does not have, or any of those facts on which the
two sides disagree, stops the job at its start (a person must act), naming it. The Spark driver
(``spark/kernel.py``) and the rule tests without Spark (``tests/kernel_rules.py``) send the same plan.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from streamjoin.core.errors import StreamJoinError
from streamjoin.core.shapes import SHAPES, Shape, traits
from streamjoin.core.spec import Emit, Format, Input, Join, PipelineSpec, Role, Serde

#: the stores of a task, by name (the kernel's ``StoreAdapter``): the join's, a foreign-key join's second
#: stage's, an aggregate's totals and a table aggregate's last contribution per result key
JOIN_STORE, FOREIGN_STORE, AGGREGATE_STORE, PREVIOUS_STORE = "default", "foreign", "aggregate", "previous"
#: the decoded batch's columns the kernel reads (``spark/events.py`` makes them; ``__lookup`` besides, where set)
DECODED_COLUMNS = ("side", "key", "lval", "rval", "tomb", "ts", "__partition", "__offset", "__rank", "__input",
                   "topic", "reason")  # fmt: skip
#: the kernel's join result columns, in order
RESULT_COLUMNS = ("key", "left", "right", "ts", "matched", "tomb_out", "__sub", "src_topic", "src_partition",
                  "src_offset", "__task", "__pos", "__input", "__partition", "__offset")  # fmt: skip
#: a line of the kernel's batch summary (``spark/events.summary_from_text`` reads it), tab-separated
SUMMARY_COLUMNS = ("topic", "partition", "side", "rows", "rejected", "max_ts")
#: how every undecodable record's dead-letter reason starts (``undecodable-key: ...``): unlike the other dead
#: letters, such a record does not move its partition's time (the kernel's batch order and summary read it)
UNDECODABLE = "undecodable"

#: the shapes the kernel runs, with the stores their join keeps (the kernel's ``Shapes`` is the twin)
KERNEL_SHAPES: dict[Shape, tuple[str, ...]] = {
    Shape.STREAM_TABLE: (JOIN_STORE,),
    Shape.STREAM_GLOBALTABLE: (JOIN_STORE,),
    Shape.TABLE_TABLE: (JOIN_STORE,),
    Shape.STREAM_STREAM: (JOIN_STORE,),
    Shape.TABLE_TABLE_FK: (JOIN_STORE, FOREIGN_STORE),
}


class UnknownShapeError(StreamJoinError):
    """A pipeline's join shape that the kernel's registry does not have (terminal: the build lacks it)."""

    def __init__(self, pipeline: str, shape: str) -> None:
        self.pipeline, self.shape = pipeline, shape
        known = ", ".join(s.value for s in KERNEL_SHAPES)
        super().__init__(
            f"pipeline {pipeline}: the kernel has no join shape {shape!r} (it runs {known}): change join.shape in "
            "the spec, or install a streamjoin release that runs it"
        )


class ReferenceOnlyError(StreamJoinError):
    """A spec the kernel does not run yet (:func:`refusal`): a table two table-table stages join. Terminal: the job
    refuses it at its start rather than run it wrong (issue 38)."""

    def __init__(self, pipeline: str, what: str) -> None:
        self.pipeline, self.what = pipeline, what
        super().__init__(
            f"pipeline {pipeline}: {what}: `streamjoin replay` runs it (the reference engine); to stream it, change "
            "the spec as this says, or split it into pipelines until the kernel runs it"
        )


def refusal(spec: PipelineSpec) -> ReferenceOnlyError | None:
    """Why the kernel cannot run ``spec`` yet (None: it can). It runs chains (``spark/chain.py``: each stage one
    kernel call with its own stores) except where stages must share state: a table input joined by two
    table-table stages (Kafka Streams keeps that table once, updated before either stage joins it)."""
    tables = [inp for stage in spec.stages if stage.shape is Shape.TABLE_TABLE
              for inp in (stage.left, stage.right) if inp in spec.inputs]  # fmt: skip
    shared = sorted({name for name in tables if tables.count(name) > 1})
    if shared:
        return ReferenceOnlyError(
            spec.name, f"input {shared[0]!r} is a table that several table-table stages join; those chains run in "
            "the reference engine only for now",
        )  # fmt: skip
    return None


def stage_specs(spec: PipelineSpec) -> list[PipelineSpec]:
    """One one-join spec per stage (``[spec]`` for ``join:``). Stage N > 1's left input is the previous stage's
    result: topic ``<name>`` (as the reference engine names it), a stream or a table as that stage yields, keyed as
    stage 1's left input. Every stage keeps the spec's inputs in their order (their position is the batch ordering
    rule's tie-breaker); the aggregate goes with the last stage."""
    if not spec.chained:
        return [spec]
    stages = []
    for index, join in enumerate(spec.stages):
        inputs = dict(spec.inputs)
        if index > 0:
            inputs[join.left] = _result_input(spec, spec.stages[index - 1])
        last = index == len(spec.stages) - 1
        stages.append(spec.model_copy(update={
            "inputs": inputs, "join": join, "earlier_joins": (), "aggregate": spec.aggregate if last else None,
        }))  # fmt: skip
    return stages


def _result_input(spec: PipelineSpec, stage: Join) -> Input:
    role = Role.TABLE if traits(stage.shape).table_result else Role.STREAM
    return Input.model_construct(topic=result_topic(stage), role=role, key=spec.left.key,
                                 value=Serde.model_construct(format=Format.JSON))  # fmt: skip


def result_topic(stage: Join) -> str:
    """What a stage's results are called where a topic would be (a dead letter's ``source_topic``)."""
    return f"<{stage.name or 'join'}>"


def stage_label(spec: PipelineSpec, index: int) -> str:
    """Stage ``index`` in a few words: its name where the spec gives one (not a default ``stage<N>``), its left
    side (an input, or the previous stage), kind, shape and right input, e.g. ``with_category: with_region left
    stream-globaltable categories``."""
    stage = spec.stages[index]
    named = stage.name is not None and stage.name != f"stage{index + 1}"
    what = f"{stage.left} {stage.kind.value} {stage.shape.value} {stage.right}"
    return f"{stage.name}: {what}" if named else what


def stage_internal_topics(spec: PipelineSpec, index: int) -> list[str]:
    """The internal topics stage ``index`` reads: the repartition topics of its inputs with ``repartition: true``
    (a chain adds none: every stage's result keeps stage 1's key and partitions)."""
    stage = spec.stages[index]
    sides = (stage.left, stage.right) if index == 0 else (stage.right,)
    return [spec.repartition_topic(name) for name in dict.fromkeys(sides) if spec.inputs[name].repartition]


def describe_stages(spec: PipelineSpec) -> list[str]:
    """One line per join stage (``streamjoin plan`` and ``validate`` print them): its name, sides, kind and
    shape, what it yields and where to, the inputs it needs co-partitioned, the internal topics it reads, the
    stores the kernel keeps for it (a later stage's apart from stage 1's); for a chain, why it needs no internal
    topic of its own; then why the kernel refuses the spec, if it does."""
    root, last = spec.stages[0].left, len(spec.stages) - 1
    lines = []
    for index, stage in enumerate(spec.stages):
        shape = SHAPES[stage.shape]
        stores = list(KERNEL_SHAPES.get(stage.shape, ()))
        if index == last and spec.aggregate is not None:
            stores += [AGGREGATE_STORE, PREVIOUS_STORE] if shape.table_result else [AGGREGATE_STORE]
        named = stage.name is not None and stage.name != f"stage{index + 1}"
        left = stage.left if index == 0 else f"{stage.left}'s result"
        if shape.copartitioned:
            sides = (stage.left, stage.right) if index == 0 else (root, stage.right)
            placement = f"co-partitioned: {' and '.join(dict.fromkeys(sides))}"
        else:
            placement = "no co-partitioning (" + ("a global table" if stage.shape is Shape.STREAM_GLOBALTABLE
                                                  else "the foreign key is re-keyed internally") + ")"  # fmt: skip
        if index == last:
            out = spec.output.topic or ("the aggregate" if spec.aggregate is not None else "files")
            if spec.output.topic and spec.aggregate is not None:
                out += f" and the aggregate ({spec.aggregate.output.topic or 'files'})"
        else:
            out = "the next stage"
            if stage.output is not None:
                out += f" and {stage.output.topic}"
        what = "table" if shape.table_result else "stream"
        internal = ", ".join(stage_internal_topics(spec, index)) or "none"
        # (the job's spark/chain.root_of: a later stage's stores beside stage 1's, in the checkpoint's state)
        where = f" (its own, in the checkpoint's state/kernel/stage{index + 1}/)" if index else ""
        lines.append(f"  stage {index + 1}{f' {stage.name}' if named else ''} ({spec.stage_path(index)}): {left} "
                     f"{stage.kind.value} {stage.shape.value} {stage.right} -> a {what} to {out}; {placement}; "
                     f"internal topics: {internal}; stores: {', '.join(stores)}{where}")  # fmt: skip
    if spec.chained:
        lines.append(f"  the chain adds no internal topic: every stage's result keeps the key and partitions of "
                     f"{root!r} (a global table is looked up by key_selector, a foreign key and the aggregate's "
                     "group are re-keyed inside the job)")  # fmt: skip
    refused = refusal(spec)
    if refused is not None:
        lines.append(f"  the kernel refuses it: {refused}")
    return lines


@dataclass(frozen=True)
class JoinPlan:
    """A pipeline's join as the kernel runs it (see the module docstring); :meth:`to_json` is what crosses."""

    pipeline: str
    shape: str
    kind: str
    partitions: int
    #: a stream-stream join's window (ms): ``{"before": .., "after": ..}``, else None
    window: dict[str, int] | None
    grace: int
    #: a versioned side's history retention (ms); None: a plain table, or a stream
    left_history: int | None
    right_history: int | None
    #: the left key's format (``long``: held results come in the order of its 8 big-endian bytes)
    key_format: str
    #: ``none``, ``every_change`` or ``per_batch``
    aggregate: str
    #: the stores a batch commits, in order (the manifest lists their files)
    stores: tuple[str, ...]
    decoded_columns: tuple[str, ...] = DECODED_COLUMNS
    result_columns: tuple[str, ...] = RESULT_COLUMNS
    summary_columns: tuple[str, ...] = SUMMARY_COLUMNS
    undecodable_prefix: str = UNDECODABLE
    #: this side's registry (:data:`KERNEL_SHAPES`): the kernel's must name the same shapes
    shapes: tuple[str, ...] = tuple(sorted(shape.value for shape in KERNEL_SHAPES))

    @classmethod
    def of(cls, spec: PipelineSpec) -> JoinPlan:
        """The plan of ``spec``'s join and aggregate.

        :raises UnknownShapeError: the spec's shape is not in :data:`KERNEL_SHAPES`.
        :raises ReferenceOnlyError: see :func:`refusal`.
        :raises ValueError: a chained spec: each stage has its plan (``spark/chain.stage_specs``)
        """
        refused = refusal(spec)
        if refused is not None:
            raise refused
        if spec.chained:
            raise ValueError(f"pipeline {spec.name}: a chained spec has a join plan per stage (chain.stage_specs)")
        join = spec.join
        join_stores = KERNEL_SHAPES.get(join.shape)
        if join_stores is None:
            raise UnknownShapeError(spec.name, str(join.shape))
        stores = list(join_stores)
        if spec.aggregate is not None:
            stores.append(AGGREGATE_STORE)
            if SHAPES[join.shape].table_result:
                stores.append(PREVIOUS_STORE)
        window = join.window
        return cls(
            pipeline=spec.name,
            shape=join.shape.value,
            kind=join.kind.value,
            partitions=spec.kafka.partitions,
            window=None if window is None else {"before": window.before, "after": window.after},
            grace=join.grace,
            left_history=None if spec.left.versioned is None else spec.left.versioned.history_retention,
            right_history=None if spec.right.versioned is None else spec.right.versioned.history_retention,
            key_format="long" if spec.left.key.format is Format.LONG else "string",
            aggregate="none" if spec.aggregate is None else Emit(spec.aggregate.emit).value,
            stores=tuple(stores),
        )

    @classmethod
    def stages_of(cls, spec: PipelineSpec) -> list[JoinPlan]:
        """Every stage's plan (one for ``join:``), in order: what the job's start checks with the kernel.

        :raises ReferenceOnlyError: see :func:`refusal`.
        :raises UnknownShapeError: a stage's shape is not in :data:`KERNEL_SHAPES`.
        """
        refused = refusal(spec)
        if refused is not None:
            raise refused
        return [cls.of(stage) for stage in stage_specs(spec)]

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))
