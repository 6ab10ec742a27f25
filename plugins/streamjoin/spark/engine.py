"""One micro-batch through the join: decode, join and aggregate on the kernel, project; state in and state out.

The streaming job (``jobs/stream_join.py``), batch reprocessing and ``streamjoin replay`` all call
:func:`process_batch`; only where the rows come from and where the outputs go differ.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, partial, reduce
from typing import Any, Protocol

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamjoin.core.errors import SpecError
from streamjoin.core.shapes import ROLE_RANK, Shape, traits
from streamjoin.core.spec import Format, Joiner, PipelineSpec, Role, Sink
from streamjoin.spark import chain
from streamjoin.spark.aggregate import rejected_results, staged_results
from streamjoin.spark.events import (
    BatchSummary,
    decode_batch,
    output_key,
    rejected_records,
    summarize,
    summary_from_text,
)
from streamjoin.spark.kernel import KernelResults, committed, kernel_join
from streamjoin.spark.kernel import aggregate as kernel_aggregate
from streamjoin.spark.projection import is_json_text, joined_value
from streamjoin.spark.sinks import encode_key, encode_value
from streamjoin.spark.state import KERNEL_DIR, KernelCheckpoint, KernelCommit
from streamjoin.spark.table_aggregate import kernel_staged_table_results
from streamjoin.spark.templates import templated, templated_over


class Unpersistable(Protocol):
    def unpersist(self) -> Any: ...


@dataclass(frozen=True)
class BatchOutput:
    #: the batch's counts, computed (a Spark job) when first read
    summary_of: Callable[[], BatchSummary]
    #: join results: key, value, ts, matched, tomb_out, src_*, ORDER, __sub
    results: DataFrame
    #: aggregate changelog rows: key, value, ts, ORDER, __sub (None without an aggregate), every group's in one
    #: partition in emission order
    aggregates: DataFrame | None
    #: Kafka-shaped input rows that could not be processed, with ``reason``
    dead_letters: DataFrame
    #: the store files the batch's tasks commit, for the state's manifest
    commit: KernelCommit
    #: every key's results sit in one partition in the Kafka source's order (a stream-table lookup's come from
    #: the task of the stream record that made them): a Kafka sink needs no sort to keep each key's order
    results_in_order: bool
    #: the join's result rows, counted by the kernel's tasks as they emit them (once the batch ran)
    result_count: Callable[[], int]
    #: what this batch cached (first the decoded batch: Kafka is read once); the caller unpersists them
    #: with :meth:`release` once the outputs are written
    cached: tuple[Unpersistable, ...] = ()
    #: a chain's earlier stages that name an ``output``: it, and their results (columns as :attr:`results`;
    #: ``__sub`` their emission order in their task)
    stage_results: tuple[tuple[Sink, DataFrame], ...] = ()

    @cached_property
    def summary(self) -> BatchSummary:
        return self.summary_of()

    def release(self) -> None:
        for frame in self.cached:
            frame.unpersist()


def process_batch(
    raw: DataFrame,
    spec: PipelineSpec,
    checkpoint: KernelCheckpoint,
    *,
    file_order: bool = False,
    aligned: bool = False,
    read_once: bool = False,
) -> BatchOutput:
    """Run one batch of Kafka-shaped rows (``key, value, topic, partition, offset, ts``) through the kernel,
    its stores read at ``checkpoint`` (``KernelCheckpoint(None)``: a fresh state in a temporary folder). A chained
    spec (``joins:``) runs its stages one after the other in the same job (:mod:`~streamjoin.spark.chain`).

    :param file_order: process rows in ``offset`` order as one task (replay: offsets are line numbers)
        instead of the batch ordering rule.
    :param aligned: ``raw`` is :func:`~streamjoin.spark.source.read_task_ranges`' frame: partition t holds
        task t's records (a global table's in every partition), which the join takes without a shuffle
    """
    stages = chain.stage_specs(spec)  # [spec] for one join
    read_once = read_once and spec.aggregate is None
    ran: list[_Ran] = []
    joined: DataFrame | None = None
    written: list[tuple[Sink, DataFrame]] = []
    for index, stage in enumerate(stages):
        last = index == len(stages) - 1
        sink = None if last else stage.join.output
        ran.append(_run_stage(raw, spec, index, stage, joined, checkpoint, file_order=file_order, aligned=aligned,
                              read_once=read_once if last else sink is None))  # fmt: skip
        kernel = ran[-1].kernel
        # a chain's or a self-join's results: one trigger's come from several records of the stage (derived ones,
        # a record's two sides), each numbering its own: ordered by their emission in their task
        numbered = spec.chained or stage.join.left == stage.join.right
        numbering = partial(chain.with_emission_order, last=last)
        frame = templated(kernel.frame, f"numbered {last}", numbering) if numbered else kernel.frame
        fmt = spec.output.value_format if last else Format.JSON
        left_json = index > 0 and stages[index - 1].join.joiner.function is not None
        value = partial(with_joined_value, joiner=stage.join.joiner, fmt=fmt, left_json=left_json)
        joined = templated(frame, f"results {fmt} {ran[-1].spec_json}", value)
        if sink is not None:  # an earlier stage's result written too, in its sink's format
            output = partial(_stage_output, joiner=stage.join.joiner, fmt=sink.value_format, left_json=left_json,
                             spec=spec)  # fmt: skip
            written.append((sink, templated(frame, f"stage output {sink.value_format} {ran[-1].spec_json}", output)))
    assert joined is not None
    last_stage, kernel = stages[-1], ran[-1].kernel
    spec_json = ran[-1].spec_json
    dead_letters = _dead_letters(ran)
    aggregates = None
    cached: tuple[Unpersistable, ...] = tuple(item for r in ran for item in (r.decoded, r.kernel))
    if spec.aggregate is not None:
        if traits(last_stage.join.shape).table_result:
            staged = templated(joined, f"table staged {spec_json}",
                               partial(kernel_staged_table_results, agg=spec.aggregate))  # fmt: skip
            rejected = lambda s: _result_letters(rejected_results(s.filter(F.col("__letter").isNotNull())), spec)  # noqa: E731
        else:
            staged = templated(joined, f"staged {spec_json}", partial(staged_results, agg=spec.aggregate))
            rejected = lambda s: _result_letters(rejected_results(s), spec)  # noqa: E731
        updates = kernel_aggregate(staged, last_stage, kernel, checkpoint.version, file_order=file_order)
        aggregates, cached = updates.frame, (*cached, updates)
        dead_letters = templated_over((dead_letters, staged), f"dead letters and rejected {spec_json}",
                                      lambda letters, s: letters.unionByName(rejected(s)))  # fmt: skip
    join = last_stage.join
    lookup = join.shape in (Shape.STREAM_TABLE, Shape.STREAM_GLOBALTABLE) and last_stage.right.versioned is None
    return BatchOutput(
        summary_of=partial(_kernel_summary, ran),
        results=templated(
            joined, f"keyed {spec_json}", lambda rows: rows.withColumn("key", output_key(F.col("key"), spec))
        ),
        aggregates=aggregates,
        dead_letters=dead_letters,
        commit=KernelCommit(tuple(f for r in ran for f in r.commit.files)),
        results_in_order=lookup and not spec.chained,
        result_count=kernel.result_count,
        cached=cached,
        stage_results=tuple(written),
    )


@dataclass(frozen=True)
class _Ran:
    """One join stage of a batch: its decoded records, its kernel results, the topics it counts and the store
    files it commits."""

    decoded: DataFrame
    #: ``decoded`` with each record once (a global table's at its home task in an aligned batch)
    decoded_once: DataFrame
    kernel: KernelResults
    #: the input topics this stage reads from the batch (a self-join's twice: it reads each record on both sides)
    reads: tuple[str, ...]
    #: those whose records this stage counts (a topic two stages read: the first)
    topics: tuple[str, ...]
    commit: KernelCommit
    spec_json: str


def _stage_output(frame: DataFrame, joiner: Joiner, fmt: Format, left_json: bool, spec: PipelineSpec) -> DataFrame:
    """An earlier stage's results as its own output writes them: ``__sub`` the row's index in its task."""
    out = with_joined_value(frame.withColumn("__sub", chain.index_in_task()), joiner, fmt, left_json=left_json)
    return out.withColumn("key", output_key(F.col("key"), spec))


def _run_stage(
    raw: DataFrame,
    spec: PipelineSpec,
    index: int,
    stage: PipelineSpec,
    previous: DataFrame | None,
    checkpoint: KernelCheckpoint,
    *,
    file_order: bool,
    aligned: bool,
    read_once: bool,
) -> _Ran:
    """Decode stage ``index``'s records and run them through its join on the kernel (lazily)."""
    spec_json = stage.model_dump_json()  # names the stage's batch programs (templated), once a batch
    topics = chain.stage_topics(spec, index)
    if spec.chained:
        rows = templated(raw, f"topics {topics}", lambda frame: frame.filter(F.col("topic").isin(topics)))
    else:
        rows = raw
    global_right = aligned and not file_order and stage.right.role is Role.GLOBAL_TABLE
    self_join = stage.join.left == stage.join.right
    if index == 0:
        decoded = decode_batch(rows, stage, spec_json).persist()
        stage_aligned = aligned and not self_join  # a self-join's batch has each record twice (events._decode)
        decoded_once = _home_copies(decoded, spec.kafka.partitions) if global_right else decoded
        if self_join:
            decoded_once = decoded.filter(F.col("side") == F.lit("L"))
    else:
        assert previous is not None
        build = partial(_stage_input, stage=stage, spec_json=spec_json, home=global_right)
        decoded = templated_over((previous, rows), f"stage input {global_right} {spec_json}", build).persist()
        stage_aligned = False
        decoded_once = decoded
    root = None if checkpoint.root is None else chain.root_of(checkpoint.root, index)
    at = KernelCheckpoint(root, checkpoint.version)
    kernel = kernel_join(decoded, stage, at, file_order=file_order, aligned=stage_aligned, read_once=read_once)
    earlier = {t for i in range(index) for t in chain.stage_topics(spec, i)}
    reported = tuple(t for t in topics if t not in earlier)
    commit = committed(stage, at, chain.root_of(KERNEL_DIR, index))
    reads = (*topics, *topics) if self_join else tuple(topics)
    return _Ran(decoded, decoded_once, kernel, reads, reported, commit, spec_json)


def _stage_input(previous: DataFrame, rows: DataFrame, stage: PipelineSpec, spec_json: str, home: bool) -> DataFrame:
    """A later stage's decoded batch: the previous stage's results and its right input's records (``home``: a
    global table's, each once: the rules' shuffle gives it to every task)."""
    right = decode_batch(rows, stage, spec_json, left_records=False)
    if home:
        right = _home_copies(right, stage.kafka.partitions)
    return chain.stage_input(previous, right, stage)


def _home_copies(decoded: DataFrame, tasks: int) -> DataFrame:
    """An aligned batch's rows with a global table's record once: in partition ``partition mod tasks`` (the
    kernel's ``Routing.home``); every task reads the global table."""
    home = F.spark_partition_id() == F.pmod(F.col("__partition"), F.lit(tasks))
    return decoded.filter((F.col("__rank") != F.lit(ROLE_RANK[Role.GLOBAL_TABLE])) | home)


def _kernel_summary(ran: list[_Ran]) -> BatchSummary:
    """What the kernel's tasks counted as they read the batch (each stage its :attr:`_Ran.topics`); a job over the
    decoded batch if it has not run yet."""
    if len(ran) == 1 and len(ran[0].reads) == len(set(ran[0].reads)):
        return summary_from_text(ran[0].kernel.handle.summary()) or summarize(ran[0].decoded_once)
    lines = []
    for stage in ran:
        text = str(stage.kernel.handle.summary())
        if not text:
            return summarize(reduce(DataFrame.unionByName, [_only(r.decoded_once, r.topics) for r in ran]))
        for line in text.splitlines():
            topic, _partition, side = line.split("\t", 3)[:3]
            # a self-join's record counted once: as its left side's
            if topic in stage.topics and (side == "L" or stage.reads.count(topic) == 1):
                lines.append(line)
    return summary_from_text("\n".join(lines)) or summarize(ran[0].decoded_once.limit(0))


def _only(decoded: DataFrame, topics: tuple[str, ...]) -> DataFrame:
    return decoded.filter(F.col("topic").isin(list(topics))).select("topic", "__partition", "side", "reason", "ts")


def _dead_letters(ran: list[_Ran]) -> DataFrame:
    """The records the stages could not process (:func:`rejected_records`); a record of an input two stages read,
    once: the first stage's that rejected it (the reference engine's rule)."""
    topics = [t for r in ran for t in r.reads]
    if len(ran) == 1 and len(topics) == len(set(topics)):
        return templated(ran[0].decoded_once, f"dead letters {ran[0].spec_json}", rejected_records)
    self_joins = tuple(len(r.reads) != len(set(r.reads)) for r in ran)
    frames = tuple(r.decoded if self_join else r.decoded_once for r, self_join in zip(ran, self_joins, strict=True))
    shared = sorted({t for t in topics if topics.count(t) > 1})
    name = f"chain dead letters {shared} {self_joins} {' '.join(r.spec_json for r in ran)}"
    return templated_over(frames, name, partial(_first_letters, self_joins=self_joins, shared=shared))


def _first_letters(*frames: DataFrame, self_joins: tuple[bool, ...], shared: list[str]) -> DataFrame:
    """:func:`_dead_letters` of the stages' decoded batches (a self-join's: its left copies before its right ones)."""
    letters = []
    for i, (frame, self_join) in enumerate(zip(frames, self_joins, strict=True)):
        copies = [frame.filter(F.col("side") == F.lit(side)) for side in "LR"] if self_join else [frame]
        letters += [rejected_records(copy).withColumn("__stage", F.lit(2 * i + n)) for n, copy in enumerate(copies)]
    every = reduce(DataFrame.unionByName, letters)
    if not shared:
        return every.drop("__stage")
    keys = ("topic", "partition", "offset")
    once = (
        every.filter(F.col("topic").isin(shared))
        .groupBy(*keys)
        .agg(F.min_by(F.struct(*[c for c in every.columns if c not in keys]), "__stage").alias("first"))
        .select(*keys, "first.*")
    )
    return every.filter(~F.col("topic").isin(shared)).unionByName(once).drop("__stage")


def with_joined_value(
    results: DataFrame, joiner: Joiner, fmt: Format = Format.JSON, *, left_json: bool = False
) -> DataFrame:
    """Add ``value``: the joiner's value, null for tombstones (``tomb_out``). A function joiner is only
    called for the rows that are not tombstones.

    :param fmt: the output's ``value_format``
    :param left_json: ``left`` holds JSON documents (:func:`~streamjoin.spark.projection.joined_value`)
    :raises SpecError: a ``select`` of one expression whose type the format cannot hold
    """
    if joiner.function is None:
        value = joined_value(joiner, fmt)
        out = results.withColumn("value", F.when(~F.col("tomb_out"), value))
        _check_scalar_type(out.schema["value"].dataType, joiner, fmt)
        return out
    values = results.filter(~F.col("tomb_out")).withColumn("value", joined_value(joiner, fmt, left_json=left_json))
    field = values.schema["value"]
    tombstones = results.filter(F.col("tomb_out")).withColumn(
        "value", F.lit(None).cast(field.dataType).alias("value", metadata=field.metadata)
    )
    return values.unionByName(tombstones)


def _check_scalar_type(data_type: T.DataType, joiner: Joiner, fmt: Format) -> None:
    if fmt is Format.LONG and not isinstance(data_type, T.IntegralType):
        raise SpecError(
            "<spec>", "join.joiner.select", joiner.select,
            f"an integer expression for value_format 'long' (this one is {data_type.simpleString()})",
        )  # fmt: skip


def _result_letters(rejected: DataFrame, spec: PipelineSpec) -> DataFrame:
    """Dead letters for join results the aggregation rejects (``reason`` null-group/null-amount): the
    result's key and JSON value, from the join's output topic."""
    value_type = rejected.schema["value"].dataType
    return rejected.select(
        encode_key(F.col("key"), spec.left.key.format).alias("key"),
        encode_value(F.col("value"), value_type, Format.JSON, json_text=is_json_text(rejected)).alias("value"),
        F.lit(spec.output.topic or "<join>").alias("topic"),
        F.col("__partition").alias("partition"),
        F.col("__offset").alias("offset"),
        F.col("ts"),
        F.col("reason"),
    )
