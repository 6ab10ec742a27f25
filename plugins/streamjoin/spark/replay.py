"""``streamjoin replay``: run a spec over a file of records through the Spark implementation, no Kafka.

Like Kafka Streams' TopologyTestDriver: in the default mode records are processed in file order, each
fully before the next; with ``batch=True`` the whole file is one micro-batch processed in the batch
ordering rule (docs/SEMANTICS.md).

The file's keys and values are JSON. An Avro input's are encoded in the Confluent wire format with its
subject's schema (the reader schema when the registry holds it, else the subject's latest), so that they
enter the batch as a producer's records do and the job's decoding runs unchanged; Avro keys and values
in the output are decoded back to JSON. A Protobuf input's keys and values are encoded so with the message the
spec reads (``record_name``, else the schema's first) of the subject's latest schema; a value that message cannot
hold is a dead letter whose reason names the field (a producer could not have written it), a key an error. A
JSON Schema input's are their JSON text after the latest id's header. Protobuf and JSON Schema keys in the output
are printed as JSON too.
"""

from __future__ import annotations

import json
import struct
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamjoin.core.avro import decode_wire, encode_wire, wire_header
from streamjoin.core.batch_plan import BatchPlan, RecordsIndex, plan_all
from streamjoin.core.codec import decode, encode
from streamjoin.core.errors import SpecError
from streamjoin.core.join_plan import UNDECODABLE, result_topic
from streamjoin.core.ordering import source_orders
from streamjoin.core.spec import Format, Input, PipelineSpec, Serde, Sink
from streamjoin.spark.engine import process_batch
from streamjoin.spark.events import ORDER
from streamjoin.spark.kernel import unload
from streamjoin.spark.state import KERNEL_DIR, KernelCheckpoint, StateStore
from streamjoin.spark.templates import templated

RAW_SCHEMA = T.StructType(
    [
        T.StructField("key", T.BinaryType()),
        T.StructField("value", T.BinaryType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("ts", T.LongType()),
    ]
)
#: the bytes of a value its Protobuf schema cannot hold: not the wire format, so the batch dead-letters it; its
#: dead letter then gets the encoder's reason and the file's value (:func:`raw_rows`' ``refused``)
REFUSED = b"\xff"
#: ``(topic, partition, offset)`` -> (reason, the file's value) of each value written as :data:`REFUSED`
Refused = dict[tuple[str, int, int], tuple[str, Any]]


class _Unfit(ValueError):
    """A records file's value its input's schema cannot hold, as a dead letter's reason."""


def output_value_types(spark: SparkSession, spec: PipelineSpec) -> list[tuple[str, Sink, T.DataType]]:
    """``(spec path, sink, Spark type)`` of the values each Kafka output in a registry format gets: the types of the
    batch program the job builds (:func:`process_batch` over an empty batch, as the job's first batch derives its
    output schemas: nothing runs; the inputs' schemas are asked of the registry)."""
    from streamjoin.kafka.schema_registry import registry_outputs

    sinks = registry_outputs(spec)
    if not sinks:
        return []
    out = process_batch(spark.createDataFrame([], RAW_SCHEMA), spec, KernelCheckpoint(None))
    # process_batch's stage results come in the order of the stages with an output
    stages = [f"{spec.stage_path(i)}.output" for i, stage in enumerate(spec.earlier_joins) if stage.output]
    frames = {path: frame for path, (_, frame) in zip(stages, out.stage_results, strict=True)}
    frames["output"] = out.results
    if out.aggregates is not None:
        frames["aggregate.output"] = out.aggregates
    try:
        return [(path, sink, frames[path].schema["value"].dataType) for path, sink in sinks]
    finally:
        out.release()  # the batch's temporary stores folder


def output_problems(spark: SparkSession, spec: PipelineSpec) -> list[Any]:
    """Each Kafka output in a registry format (the join's, a chain stage's, the aggregate's): the schema the job
    would register (:func:`~streamjoin.spark.serde.output_schema` of the value type of the job's batch program,
    built in ``spark`` over an empty batch) is compatible with its subject's latest version under the subject's
    level as the registry holds it now (the job sets the spec's ``compatibility`` first); a subject without versions
    is fine."""
    from streamjoin.kafka.schema_registry import SubjectProblem, output_incompatibility
    from streamjoin.spark.serde import output_schema

    problems: list[SubjectProblem] = []
    for path, sink, value_type in output_value_types(spark, spec):
        try:
            derived = output_schema(sink, value_type)
        except SpecError as exc:
            problems.append(SubjectProblem(f"{path}.value_format", sink.subject, None, f"{exc.expected}"))
            continue
        refused = output_incompatibility(sink, derived.schema, derived.kind, derived.message)
        if refused is not None:
            problems.append(SubjectProblem(f"{path}.value_format", sink.subject, refused[0], refused[1]))
    return problems


def raw_frame(spark: SparkSession, spec: PipelineSpec, records: Iterable[dict[str, Any]], batch: bool) -> DataFrame:
    """Kafka-shaped rows for the records (:func:`raw_rows`) as a frame."""
    return spark.createDataFrame(raw_rows(spec, records, batch), RAW_SCHEMA)


def raw_rows(
    spec: PipelineSpec, records: Iterable[dict[str, Any]], batch: bool, refused: Refused | None = None
) -> list[tuple[Any, ...]]:
    """Kafka-shaped rows (``RAW_SCHEMA``) for the records. File order: offsets are line numbers in one
    partition; batch: offsets count per topic-partition (partition defaults to 0).

    :param refused: gets the Protobuf values their message cannot hold (written as :data:`REFUSED`)
    """
    counters: dict[tuple[str, int], int] = defaultdict(int)
    encoders: dict[tuple[str, bool], Callable[[Any], bytes | None]] = {}
    rows = []
    for line, record in enumerate(records):
        topic = record["topic"]
        try:
            _, spec_input = spec.input_by_topic(topic)
        except KeyError:
            raise ValueError(f"line {line + 1}: topic {topic!r} is not an input of pipeline {spec.name!r}") from None
        partition = int(record.get("partition", 0))
        offset = counters[(topic, partition)] if batch else line
        counters[(topic, partition)] += 1
        key = _encoded(encoders, spec_input, line, record.get("key"), is_key=True)
        try:
            value = _encoded(encoders, spec_input, line, record.get("value"), is_key=False)
        except _Unfit as unfit:
            value = REFUSED
            if refused is not None:
                refused[(topic, partition, offset)] = (str(unfit), record.get("value"))
        rows.append(
            (
                key,  # None stays None
                value,
                topic,
                partition,
                offset,
                int(record["ts"]),
            )
        )
    return rows


def _encoded(
    encoders: dict[tuple[str, bool], Callable[[Any], bytes | None]],
    spec_input: Input,
    line: int,
    data: Any,
    *,
    is_key: bool,
) -> bytes | None:
    """A records file's JSON key or value as the input's bytes (Avro, Protobuf, JSON Schema: the wire format with
    the schema of :func:`~streamjoin.kafka.schema_registry.encoding_schema`, asked once per topic and part).

    :raises _Unfit: a Protobuf value its message cannot hold (the reason names line, field, id and subject)
    :raises ValueError: a key (or an Avro value) its schema cannot hold, naming line, topic and subject
    """
    serde = spec_input.key if is_key else spec_input.value
    if not serde.format.in_registry:
        return encode(data, serde.format)
    where = (spec_input.topic, is_key)
    if where not in encoders:
        from streamjoin.kafka.schema_registry import encoding_schema

        schema_id, schema = encoding_schema(serde, spec_input.topic, is_key=is_key)
        if serde.format is Format.PROTOBUF:
            subject = serde.subject(spec_input.topic, is_key=is_key)
            encoders[where] = _protobuf_encoder(serde, subject, schema_id, schema)
        elif serde.format is Format.JSON_SCHEMA:  # the compact JSON text after the header, as Confluent's
            # serializers write it (Java's and Python's alike): a key's bytes then match a producer's
            encoders[where] = lambda value: (
                None if value is None else wire_header(schema_id) + (encode(value, Format.JSON) or b"")
            )
        else:
            encoders[where] = partial(encode_wire, schema_id=schema_id, schema=schema)
    try:
        return encoders[where](data)
    except (ValueError, TypeError) as exc:
        if serde.format is Format.PROTOBUF and not is_key:
            raise _Unfit(f"{UNDECODABLE}-value: line {line + 1}: the value does not fit {exc.args[0]}") from None
        part, subject = ("key" if is_key else "value"), serde.subject(spec_input.topic, is_key=is_key)
        fits = (exc.args[0] if serde.format is Format.PROTOBUF
                else f"the {serde.format.label} schema of subject {subject!r} ({exc})")  # fmt: skip
        raise ValueError(
            f"line {line + 1}: {part} {data!r} of topic {spec_input.topic!r} does not fit {fits}: write it as "
            "that schema's JSON"
        ) from None


def _protobuf_encoder(serde: Serde, subject: str, schema_id: int, schema: str) -> Callable[[Any], bytes | None]:
    """JSON keys or values to the wire format of the message the job reads in ``schema`` (``schema_id``, of
    ``subject``); its ValueError's first argument names the field, message, id and subject.

    :raises SpecError: the schema has no such message (terminal: the job would dead-letter every value)
    """
    from streamjoin.kafka import protobuf

    fds = protobuf.descriptor_set(schema, subject)
    name = serde.full_record_name or protobuf.main_message(fds)
    indexes = protobuf.message_indexes(fds, name) if name else None
    if name is None or indexes is None:
        raise SpecError("<schema registry>", f"Protobuf schema id {schema_id} of subject {subject!r}", name,
                        "a message of the schema: set the input's record_name to one")  # fmt: skip

    def encoded(value: Any) -> bytes | None:
        try:
            return protobuf.encode_wire(value, schema_id, fds, name, indexes)
        except ValueError as exc:
            raise ValueError(f"Protobuf message {name!r} of schema id {schema_id} of subject {subject!r}: "
                             f"{exc}") from None  # fmt: skip

    return encoded


def replay(
    spark: SparkSession,
    spec: PipelineSpec,
    records: Iterable[dict[str, Any]],
    *,
    batch: bool = False,
    max_records: int | None = None,
    on_batch: Callable[[int, BatchPlan], None] | None = None,
    sources: bool = False,
) -> list[dict[str, Any]]:
    """What the pipeline emits for ``records``, in emission order, as ``{topic, key, value, ts}`` dicts.

    :param batch: process in the batch ordering rule instead of file order.
    :param max_records: with ``batch``, cut the file into micro-batches of this many records as the
        streaming job does (by event time, :mod:`streamjoin.core.batch_plan`), state carried between them
        through a :class:`StateStore`; the output is the same for every size.
    :param on_batch: called with each batch's id and plan before it runs (progress).
    :param sources: add ``source``: the input record (``topic``, ``partition``, ``offset``) that produced each
        output record (a join result's triggering record of its input; an aggregate update's join result's)
    """
    refused: Refused = {}
    rows = raw_rows(spec, records, batch, refused)
    raw = spark.createDataFrame(rows, RAW_SCHEMA)
    if not batch or max_records is None:
        return _run(spec, raw, KernelCheckpoint(None), file_order=not batch, sources=sources, refused=refused)
    index = RecordsIndex(timestamps(rows))
    plans = plan_all({tp: 0 for tp in index.latest()}, index.latest(), source_orders(spec), index, max_records)
    emitted: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="streamjoin-replay-") as state_dir:
        store = StateStore(state_dir, pipeline=spec.name)
        try:
            for batch_id, plan in enumerate(plans):
                if on_batch is not None:
                    on_batch(batch_id, plan)
                part = raw.filter(_in_plan(plan))
                part.__dict__["schema"] = raw.schema  # a filter keeps it: no Py4J calls to ask for it each batch
                emitted += _run(
                    spec, part, store.load(batch_id), file_order=False, store=store, batch_id=batch_id,
                    sources=sources, refused=refused,
                )  # fmt: skip
        finally:
            unload(spark, f"{state_dir}/{KERNEL_DIR}", spec.kafka.partitions)
    return emitted


def timestamps(rows: list[tuple[Any, ...]]) -> dict[tuple[str, int], list[int]]:
    """Each topic-partition's timestamps in offset order, from :func:`raw_rows`' rows."""
    logs: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for _key, _value, topic, partition, offset, ts in rows:
        logs[(topic, partition)].append((offset, ts))
    return {tp: [ts for _offset, ts in sorted(log)] for tp, log in logs.items()}


def _in_plan(plan: BatchPlan) -> str:
    """The plan's offset ranges as one SQL condition (one call into Spark, however many ranges)."""
    ranges = [
        f"(topic = '{topic}' AND partition = {partition} AND offset BETWEEN {plan.start[(topic, partition)]} AND "
        f"{end - 1})"
        for (topic, partition), end in plan.end.items()
        if end > plan.start[(topic, partition)]
    ]  # Kafka topic names hold no quote
    return " OR ".join(ranges) or "false"


def _run(
    spec: PipelineSpec,
    raw: DataFrame,
    checkpoint: KernelCheckpoint,
    *,
    file_order: bool,
    store: StateStore | None = None,
    batch_id: int = 0,
    sources: bool = False,
    refused: Refused | None = None,
) -> list[dict[str, Any]]:
    """One batch through :func:`process_batch`: what it emits (dead letters last); saves the state to
    ``store`` when given. A ``refused`` value's dead letter gets its reason and the file's value."""
    out = process_batch(raw, spec, checkpoint, file_order=file_order)
    order = ORDER
    spec_json = spec.model_dump_json()
    emitted = templated(out.results, f"replay results {spec_json}", partial(_emitted_results, spec=spec))
    for sink, stage_rows in out.stage_results:  # a chain's earlier stage's own output
        topic = sink.topic or "<stage>"
        emitted = emitted.unionByName(templated(stage_rows, f"replay stage {topic} {spec_json}",
                                                partial(_emitted_results, spec=spec, topic=topic)))  # fmt: skip
    if out.aggregates is not None and spec.aggregate is not None:
        updates = templated(out.aggregates, f"replay aggregates {spec_json}", partial(_emitted_updates, spec=spec))
        emitted = emitted.unionByName(updates)
    letters = templated(out.dead_letters, f"replay dead letters {spec_json}", _emitted_letters)
    # one action for all of them; sorted here, not by Spark: a replay's records are in the driver's memory
    # already, and a Spark sort costs two jobs (sampling the range bounds, then the sort)
    collected = emitted.unionByName(letters, allowMissingColumns=True).collect()
    rows = sorted((r for r in collected if r["dead_topic"] is None),
                  key=lambda r: (*(r[c] for c in order), r["__stage"], r["__sub"]))  # fmt: skip
    result = [{"topic": r["topic"], "key": _result_key(spec, r["key"], r["__stage"]), "value": _unjson(r["value_json"]),
               "ts": r["ts"]} for r in rows]  # fmt: skip
    if sources:
        for out_row, r in zip(result, rows, strict=True):
            out_row["source"] = {"topic": r["source_topic"], "partition": r["source_partition"],
                                 "offset": r["source_offset"]}  # fmt: skip
    dead = sorted((r for r in collected if r["dead_topic"] is not None),
                  key=lambda r: (r["dead_topic"], r["source_partition"], r["source_offset"]))  # fmt: skip
    for r in dead:
        unfit = (refused or {}).get((r["dead_topic"], r["source_partition"], r["source_offset"]))
        if unfit is not None and r["reason"].startswith(f"{UNDECODABLE}-value"):  # not one found before (null-key)
            reason, value = unfit
        else:
            reason, value = r["reason"], _dead_value(spec, r["dead_topic"], r["dead_value"])
        result.append(
            {
                "topic": spec.dead_letter_topic,
                "key": _dead_key(spec, r["dead_topic"], r["dead_key"]),
                "value": value,
                "ts": r["ts"],
                "headers": {"reason": reason, "source_topic": r["dead_topic"]},
            }
        )
        if sources:
            result[-1]["source"] = {"topic": r["dead_topic"], "partition": r["source_partition"],
                                    "offset": r["source_offset"]}  # fmt: skip
    if store is not None:
        store.save(batch_id, out.commit)
    out.release()
    return result


def _emitted_results(results: DataFrame, spec: PipelineSpec, topic: str | None = None) -> DataFrame:
    """The join results as replay lists them: topic (``topic``, else the output's), key, JSON value, ts, order
    and source columns."""
    source = [F.col("src_topic").alias("source_topic"), F.col("src_partition").alias("source_partition"),
              F.col("src_offset").alias("source_offset")]  # fmt: skip
    # a long key as text: the aggregate's groups are text, and a union with them would cast each group to a long
    key = F.col("key").cast("string").alias("key") if spec.left.key.format is Format.LONG else F.col("key")
    return results.select(
        F.lit(topic or spec.output.topic or "<join>").alias("topic"), key, _json("value"), "ts", *ORDER,
        F.lit(0).alias("__stage"), "__sub", *source,
    )  # fmt: skip


def _emitted_letters(letters: DataFrame) -> DataFrame:
    """The dead letters in columns beside :func:`_emitted_results`' (``dead_topic``: the record's own topic)."""
    return letters.select(
        F.col("topic").alias("dead_topic"), F.col("key").alias("dead_key"), F.col("value").alias("dead_value"),
        F.col("partition").alias("source_partition"), F.col("offset").alias("source_offset"), "ts", "reason",
    )  # fmt: skip


def _emitted_updates(aggregates: DataFrame, spec: PipelineSpec) -> DataFrame:
    """The aggregate's updates as replay lists them (columns as :func:`_emitted_results`)."""
    assert spec.aggregate is not None
    return aggregates.select(
        F.lit(spec.aggregate.output.topic or "<aggregate>").alias("topic"), "key", _json("value"), "ts", *ORDER,
        F.lit(1).alias("__stage"), "__sub", *_trigger(spec),
    )  # fmt: skip


def _trigger(spec: PipelineSpec) -> list[Column]:
    """An aggregate update's source columns: the input record whose join result it counts (its order's
    input, partition and offset)."""
    topics = F.array(*[F.lit(spec.inputs[name].topic) for name in spec.inputs])
    return [topics[F.col("__input")].alias("source_topic"), F.col("__partition").alias("source_partition"),
            F.col("__offset").alias("source_offset")]  # fmt: skip


def _json(column: str) -> Any:
    return F.to_json(F.struct(F.col(column).alias("v")), {"ignoreNullFields": "false"}).alias("value_json")


def _unjson(text: str) -> Any:
    value = json.loads(text).get("v")
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)  # function joiners return JSON text
        except ValueError:
            return value
    return value


def _result_key(spec: PipelineSpec, key: Any, stage: int) -> Any:
    """A join result's key as the records file writes it: a registry key (Avro, Protobuf, JSON Schema: its
    serialized bytes) decoded to JSON; an aggregate's key (``stage`` 1) is its group (binary in the union with
    those keys: its UTF-8 text); a long key (text in the union) a long again."""
    if key is not None and stage == 0 and spec.left.key.format is Format.LONG:
        return int(key)
    if key is None or not spec.left.key.format.in_registry:
        return key
    return _decoded(key, spec.left.key) if stage == 0 else bytes(key).decode()


def _dead_key(spec: PipelineSpec, topic: str, key: Any) -> Any:
    """A dead letter's key as the records file writes it: decoded with its source's key format (an input
    topic's, else the join result's: the left input's); bytes that do not decode stay text (a registry
    format's: hex)."""
    try:
        serde = spec.input_by_topic(topic)[1].key
    except KeyError:
        serde = spec.left.key
    return _decoded(key, serde)


def _dead_value(spec: PipelineSpec, topic: str, value: Any) -> Any:
    """A dead letter's value decoded with its input's value format; a rejected join result (from the join's
    output topic) is JSON text and stays text, as do bytes that do not decode; a chained stage's result a later
    stage rejected (topic ``<stage name>``) is the JSON of its value, decoded."""
    if value is not None and topic in {result_topic(stage) for stage in spec.earlier_joins}:
        return json.loads(bytes(value))
    try:
        return _decoded(value, spec.input_by_topic(topic)[1].value)
    except KeyError:
        return _decoded(value, Serde(format=Format.STRING))


def _decoded(data: Any, serde: Serde) -> Any:
    if data is None:
        return None
    try:
        if serde.format is Format.AVRO:
            return decode_wire(bytes(data), partial(_writer_schema, serde.registry_conn_id))
        if serde.format is Format.JSON_SCHEMA:
            return json.loads(bytes(data)[5:])
        if serde.format is Format.PROTOBUF:
            from streamjoin.kafka import protobuf

            writer = partial(_writer_schema, serde.registry_conn_id)
            return protobuf.decode_wire(bytes(data), writer, serde.full_record_name, "<dead letter>")
        return decode(bytes(data), serde.format)
    except (ValueError, struct.error, EOFError):
        return (
            bytes(data).hex()
            if serde.format in (Format.AVRO, Format.JSON_SCHEMA, Format.PROTOBUF)
            else bytes(data).decode(errors="replace")
        )


def _writer_schema(conn_id: str, schema_id: int) -> str:
    from streamjoin.kafka.schema_registry import registry_config, writer_schema

    return writer_schema(registry_config(conn_id), schema_id)
