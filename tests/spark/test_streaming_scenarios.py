"""Conformance scenarios whose file order is already the batch ordering rule, through the real streaming
job on the real broker: inputs produced to Kafka, one available-now micro-batch, outputs read back from the
output topics and compared per key with the scenario's expected changelog.

One scenario (the one with the most records) per shape, kind, aggregate or not and key format: the join
rules themselves are compared on every scenario by ``test_spark_scenarios`` (same engine code, no Kafka);
this module checks what Kafka adds (encoding, sinks, dead-letter topic, headers), at ~10 s a scenario."""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from streamjoin.core.codec import decode, encode
from streamjoin.core.job_files import PipelineFiles
from streamjoin.core.ordering import processing_order
from streamjoin.core.spec import Format, PipelineSpec, parse_spec
from streamjoin.core.topic_plan import plan_topics
from streamjoin.kafka.admin import ensure_topics
from streamjoin.kafka.clients import consume_all, produce_records

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from scenario_loader import Scenario, load_scenarios


def _one_per_family(scenarios: list[Scenario]) -> list[Scenario]:
    chosen: dict[tuple[str, str, bool, str], Scenario] = {}
    for s in scenarios:
        join = s.spec.join
        family = (join.shape.value, join.kind.value, s.spec.aggregate is not None, s.spec.left.key.format.value)
        if family not in chosen or len(s.inputs) > len(chosen[family].inputs):
            chosen[family] = s
    return sorted(chosen.values(), key=lambda s: s.name)


IN_ORDER = _one_per_family([s for s in load_scenarios() if processing_order(s.inputs, s.spec) == list(s.inputs)])


def renamed(spec: PipelineSpec, suffix: str) -> tuple[PipelineSpec, dict[str, str]]:
    """The scenario's spec with unique topic names (inputs, outputs, a chain stage's output, dead letters) and
    single-partition topics, as in the scenario."""
    data = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    names: dict[str, str] = {}
    for spec_input in data["inputs"].values():
        names[spec_input["topic"]] = spec_input["topic"] = spec_input["topic"] + suffix
    stage_outputs = [stage.get("output") for stage in data.get("joins") or []]
    for sink in (data.get("output"), (data.get("aggregate") or {}).get("output"), *stage_outputs):
        if sink and sink.get("topic"):
            names[sink["topic"]] = sink["topic"] = sink["topic"] + suffix
    names[data["dead_letter_topic"]] = data["dead_letter_topic"] = data["dead_letter_topic"] + suffix
    data["kafka"] = {"partitions": 1, "replication_factor": 1}
    return parse_spec(data, "scenario"), names


def per_key(rows: list[tuple[str, Any, Any, int]]) -> dict[tuple[str, Any], list[tuple[Any, int]]]:
    grouped: dict[tuple[str, Any], list[tuple[Any, int]]] = defaultdict(list)
    for topic, key, value, ts in rows:
        grouped[(topic, key)].append((value, ts))
    return dict(grouped)


@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.parametrize("scenario", IN_ORDER, ids=str)
def test_scenario_through_the_streaming_job(
    scenario: Scenario, spark, kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from streamjoin.spark.job import JobSettings, run_stream

    suffix = "-" + uuid.uuid4().hex[:8]
    spec, names = renamed(scenario.spec, suffix)
    ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan_topics(spec))
    base = int(time.time() * 1000) - 3_600_000  # recent: the broker's retention would delete 1970 records
    # a compacted (table) topic refuses records without a key: such records never reach a job
    unwritable = [
        r for r in scenario.inputs if r.key is None and scenario.spec.input_by_topic(r.topic)[1].role != "stream"
    ]
    produce_records(
        kafka_bootstrap,
        [
            (names[r.topic], encode(r.key, spec.input_by_topic(names[r.topic])[1].key.format),
             encode(r.value, spec.input_by_topic(names[r.topic])[1].value.format), base + r.ts, [])
            for r in scenario.inputs
            if r not in unwritable
        ],
    )  # fmt: skip
    settings = JobSettings(bootstrap=kafka_bootstrap, checkpoint_dir=str(tmp_path / "ck"), available_now=True,
                           home=str(tmp_path))  # fmt: skip
    run_stream(spark, spec, settings)

    outputs = {o.topic for o in scenario.expected} | set(scenario.final_table)
    formats = {spec.output.topic: spec.output.value_format}
    if spec.aggregate is not None:
        formats[spec.aggregate.output.topic] = spec.aggregate.output.value_format
    # join results keep the left input's key format (a long key stays a long); aggregate groups are text
    key_formats = {
        t: spec.left.key.format for t in [scenario.spec.output.topic] if spec.left.key.format is not Format.STRING
    }
    got: list[tuple[str, Any, Any, int]] = []
    for topic in sorted(outputs - {scenario.spec.dead_letter_topic}):
        for record in consume_all(kafka_bootstrap, names[topic], timeout=30):
            headers = dict(record.headers)
            value = decode(record.value, formats[names[topic]])
            key = decode(record.key, key_formats.get(topic, Format.STRING))
            got.append((topic, key, value, int(headers["ts"]) - base))
    expected = [
        (e.topic, e.key if e.key is None or e.topic in key_formats else str(e.key), e.value, e.ts)
        for e in scenario.expected
        if e.topic != scenario.spec.dead_letter_topic
    ]
    assert per_key(got) == per_key(expected), f"{scenario.name}: expected {expected}\n   got {got}"
    dead = consume_all(kafka_bootstrap, names[scenario.spec.dead_letter_topic], timeout=30)
    expected_dead = sum(1 for e in scenario.expected if e.topic == scenario.spec.dead_letter_topic)
    assert len(dead) == expected_dead - len(unwritable)
    # the status counts the join results the kernel's tasks emitted: those on the output topic
    status = PipelineFiles(Path(settings.checkpoint_dir)).status()
    assert status is not None
    if scenario.spec.output.topic:
        assert status.totals.output_records == sum(1 for topic, *_ in got if topic == scenario.spec.output.topic)
    # a plain-table lookup or a table-table join with a select (no aggregate, files or function) runs in the
    # kernel's tasks: each batch one Spark job of one stage, a task per partition (reading, decoding, rules,
    # joiner and producer in each); the other shapes keep the SQL stages around the kernel
    jobs = [line.get("spark_job") for line in _batch_lines(capsys.readouterr().out)]
    assert jobs
    assert jobs == [{"jobs": 1, "stages": 1, "tasks": 1} if _in_tasks(spec) else None] * len(jobs)


def _in_tasks(spec: PipelineSpec) -> bool:
    """The specs whose batches run in the kernel's tasks (``spark/in_task.py``)."""
    join = spec.join
    shape = join.shape.value
    lookup = shape in ("stream-table", "stream-globaltable") and spec.right.versioned is None
    return (lookup or shape == "table-table") and spec.aggregate is None and join.joiner.function is None


def _batch_lines(out: str) -> list[dict[str, Any]]:
    """The job's batch lines (``streamjoin batch {...}``) in ``out``."""
    prefix = "streamjoin batch "
    return [json.loads(line.removeprefix(prefix)) for line in out.splitlines() if line.startswith(prefix)]


@pytest.mark.spark
@pytest.mark.kafka
def test_a_global_table_over_several_partitions_is_read_by_every_task_and_counted_once(
    spark, kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three partitions: each task of the job reads its views' partition and every partition of the global
    table (a replica per task) with no shuffle before the join, yet a table record is one input record and its
    dead letter is written once."""
    from pyspark.sql import functions as F

    from streamjoin.core.batch_plan import by_topic
    from streamjoin.kafka.offsets import KafkaOffsets
    from streamjoin.spark.engine import process_batch
    from streamjoin.spark.job import JobSettings, StreamJob
    from streamjoin.spark.sinks import dead_letter_rows, kafka_rows
    from streamjoin.spark.source import read_task_ranges
    from streamjoin.spark.state import KernelCheckpoint

    suffix = uuid.uuid4().hex[:8]
    spec = parse_spec({
        "name": f"global_parts_{suffix}",
        "inputs": {
            "views": {"topic": f"views-{suffix}", "role": "stream",
                      "value": {"format": "json", "schema": {"page": "string"}}},
            "users": {"topic": f"users-{suffix}", "role": "global_table",
                      "value": {"format": "json", "schema": {"region": "string"}}},
        },
        "join": {"shape": "stream-globaltable", "kind": "left", "left": "views", "right": "users"},
        "output": {"topic": f"views-regions-{suffix}"},
        "dead_letter_topic": f"views-dlq-{suffix}",
        "kafka": {"partitions": 3, "replication_factor": 1},
    }, "test")  # fmt: skip
    ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan_topics(spec))
    base = int(time.time() * 1000) - 3_600_000
    users = [f"user{i}" for i in range(9)]
    table = [(spec.right.topic, u.encode(), encode({"region": f"r{i}"}, Format.JSON), base, []) for i, u in
             enumerate(users)] + [(spec.right.topic, b"bad-user", b"{not json", base, [])]  # fmt: skip
    views = [(spec.left.topic, u.encode(), encode({"page": f"/{u}"}, Format.JSON), base + 1000, []) for u in users]
    views.append((spec.left.topic, b"user0", b"{not json", base + 2000, []))
    produce_records(kafka_bootstrap, table)
    produce_records(kafka_bootstrap, views)
    on_table = {r.partition for r in consume_all(kafka_bootstrap, spec.right.topic, timeout=30)}
    assert len(on_table) > 1, "the global table should span partitions: the test would not see its replicas"
    on_views = {r.partition for r in consume_all(kafka_bootstrap, spec.left.topic, timeout=30)}

    # the kernel's tasks read Kafka themselves: task t its views' partition t, every task the whole table, and
    # the join takes them where they are (no shuffle before the rules); from the earliest offsets (-2)
    kafka = KafkaOffsets(kafka_bootstrap)
    ends = by_topic(kafka.latest(kafka.partitions([spec.left.topic, spec.right.topic])))
    raw = read_task_ranges(spark, kafka_bootstrap, spec, {}, ends)
    placed = {tuple(r) for r in raw.select(F.spark_partition_id(), "topic", "partition").distinct().collect()}
    assert placed == {(p, spec.left.topic, p) for p in on_views} | {
        (t, spec.right.topic, p) for t in range(3) for p in on_table
    }
    batch = process_batch(raw, spec, KernelCheckpoint(None), aligned=True)
    assert "ShuffledRDD" not in batch.results._jdf.queryExecution().toRdd().toDebugString()
    # the Kafka rows of the Spark SQL path (the kernel's rows through the sinks' programs), to compare the bytes
    # the job's tasks send with
    sql_rows = kafka_rows(batch.results, spec.output, spec.output.topic, sort=False).unionByName(
        dead_letter_rows(batch.dead_letters, spec.dead_letter_topic)
    )
    expected_bytes = sorted(_kafka_bytes(r["topic"], r["key"], r["value"], r["headers"]) for r in sql_rows.collect())
    batch.release()

    job = StreamJob(spark, spec, JobSettings(bootstrap=kafka_bootstrap, checkpoint_dir=str(tmp_path / "ck"),
                                             available_now=True, home=str(tmp_path)))  # fmt: skip
    capsys.readouterr()
    assert job.run() == 1
    # one Spark job of one stage: task t reads, decodes, joins against its replica and writes
    assert [line.get("spark_job") for line in _batch_lines(capsys.readouterr().out)] == [
        {"jobs": 1, "stages": 1, "tasks": 3}
    ]
    counts = job.writer.last_counts
    assert (counts.input_records, counts.output_records, counts.dead_letters) == (20, 9, 2)
    got = {r.key.decode(): decode(r.value, Format.JSON) for r in consume_all(kafka_bootstrap, spec.output.topic)}
    assert got == {u: {"left": {"page": f"/{u}"}, "right": {"region": f"r{i}"}} for i, u in enumerate(users)}
    dead = consume_all(kafka_bootstrap, spec.dead_letter_topic, timeout=30)
    assert sorted((r.key, r.value) for r in dead) == [(b"bad-user", b"{not json"), (b"user0", b"{not json")]
    # byte for byte what the Spark SQL path makes of the same batch: keys, values, headers
    sent = [*consume_all(kafka_bootstrap, spec.output.topic), *dead]
    assert sorted(_kafka_bytes(r.topic, r.key, r.value, r.headers) for r in sent) == expected_bytes


def _kafka_bytes(topic: str, key: Any, value: Any, headers: Any) -> tuple[Any, ...]:
    """A Kafka record's bytes, comparable: a sink row's (``headers`` as Spark rows) or a consumed record's."""
    pairs = tuple((h[0], None if h[1] is None else bytes(h[1])) for h in headers or ())
    return topic, None if key is None else bytes(key), None if value is None else bytes(value), pairs


# --- a chain of joins (issue 38) through the streaming job -------------------------------------------------------
#: (input, key, value, ts) of ``chained_cases.ENRICHMENT_SPEC``: clicks left-join regions (a table, its results
#: also written to a stage output), left-join products (a global table, by the click's product), summed per
#: region and category; a click of a user before and after their region, a deleted region, a null key, a null
#: value and a deleted product. ``BAD_CLICK`` is not JSON (a dead letter before the join).
CHAIN_RECORDS: list[tuple[str, str | None, Any, int]] = [
    ("products", "p1", "books", 0), ("products", "p2", "games", 0), ("products", "p3", "toys", 0),
    ("regions", "alice", "eu", 1), ("clicks", "alice", {"product": "p1", "amount": 3}, 2),
    ("clicks", "bob", {"product": "p2", "amount": 5}, 3), ("regions", "bob", "us", 4),
    ("regions", "carol", "asia", 6), ("clicks", "carol", {"product": "p3", "amount": 1}, 7),
    ("clicks", "bob", {"product": "p2", "amount": 7}, 8), ("regions", "alice", "asia", 12),
    ("clicks", "alice", {"product": "p2", "amount": 2}, 13), ("clicks", None, {"product": "p1", "amount": 9}, 14),
    ("regions", "bob", None, 16), ("clicks", "bob", {"product": "p1", "amount": 6}, 17),
    ("clicks", "bob", None, 18), ("products", "p3", None, 24),
]  # fmt: skip
BAD_CLICK = ("clicks", "alice", b"{not json", 15)


@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.parametrize("max_records", [3, None], ids=["batches of 3", "one batch"])
def test_a_chain_of_three_inputs_through_the_streaming_job_equals_the_reference_at_any_batch_size(
    spark: Any, kafka_bootstrap: str, tmp_path: Path, max_records: int | None
) -> None:
    """Three partitions (the global table replicated into every task; each of its records reaches stage 2
    once), the first stage's output written (topic and files) beside the last's and the aggregate's: each output
    topic holds, per key, the reference engine's changelog over the records as they lie on the broker, and the
    dead-letter topic its dead letters plus the undecodable click's, whether the job takes three records a batch
    (at least once) or all at once (exactly once: read committed)."""
    import chained_cases
    from streamjoin.core.records import Record
    from streamjoin.core.reference import ReferenceEngine
    from streamjoin.spark.job import JobSettings, run_stream

    spark.sparkContext.addPyFile(str(Path(chained_cases.__file__)))  # the stages' functions, on the workers
    suffix = uuid.uuid4().hex[:8]
    spec, _ = renamed(chained_cases.ENRICHMENT_SPEC, "-" + suffix)
    data = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["name"] = f"{data['name']}_{suffix}"
    data["kafka"]["partitions"] = 3
    if max_records is None:  # every topic, the stage output's too, in the write tasks' transactions
        data["output"]["delivery"] = "exactly_once"
    data["trigger"] = {"processing_time": 0, "max_offsets_per_trigger": max_records}
    data["joins"][0]["output"]["files"] = {"path": str(tmp_path / "with_region"), "format": "json"}
    spec = parse_spec(data, "test")
    stage_output = spec.stages[0].output
    assert stage_output is not None and stage_output.topic and spec.output.topic
    assert spec.aggregate is not None and spec.aggregate.output.topic and spec.dead_letter_topic
    ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan_topics(spec))
    base = int(time.time() * 1000) - 3_600_000
    values = {name: spec_input.value.format for name, spec_input in spec.inputs.items()}
    produce_records(
        kafka_bootstrap,
        [(spec.inputs[name].topic, None if key is None else key.encode(),
          value if isinstance(value, bytes) else encode(value, values[name]), base + ts, [])
         for name, key, value, ts in [*CHAIN_RECORDS, BAD_CLICK]],
    )  # fmt: skip
    # the reference engine reads the records where the producer put them (partition, offset), the bad one left out
    on_broker: list[Record] = []
    for spec_input in spec.inputs.values():
        for r in consume_all(kafka_bootstrap, spec_input.topic, timeout=30):
            if r.value != BAD_CLICK[2]:
                value = None if r.value is None else decode(r.value, spec_input.value.format)
                key = None if r.key is None else r.key.decode()
                on_broker.append(Record(spec_input.topic, key, value, r.timestamp - base, r.partition, r.offset))
    assert len(on_broker) == len(CHAIN_RECORDS)
    assert len({r.partition for r in on_broker if r.topic == spec.inputs["clicks"].topic}) > 1
    on_broker.sort(key=lambda r: (r.topic, r.partition, r.offset))
    expected = ReferenceEngine(spec).replay_batch(on_broker)

    settings = JobSettings(bootstrap=kafka_bootstrap, checkpoint_dir=str(tmp_path / "ck"), available_now=True,
                           home=str(tmp_path))  # fmt: skip
    batches = run_stream(spark, spec, settings)
    assert batches > 1 if max_records else batches == 1

    formats = {stage_output.topic: Format.JSON, spec.output.topic: Format.JSON}
    formats[spec.aggregate.output.topic] = Format.LONG
    got: list[tuple[str, Any, Any, int]] = []
    for topic, fmt in formats.items():
        for record in consume_all(kafka_bootstrap, topic, timeout=30):
            key = None if record.key is None else record.key.decode()
            ts = dict(record.headers)["ts"]
            assert ts is not None
            got.append((topic, key, decode(record.value, fmt), int(ts) - base))
    want = [(e.topic, e.key, e.value, e.ts) for e in expected if e.topic != spec.dead_letter_topic]
    assert {t for t, *_ in want} == set(formats)
    assert per_key(got) == per_key(want), f"expected {want}\n   got {got}"
    # the stage output's files hold what its topic holds
    in_files = [
        (r["key"], json.loads(r["value"]) if isinstance(r["value"], str) else r["value"].asDict(True), r["ts"] - base)
        for r in spark.read.json(str(tmp_path / "with_region" / "stream")).collect()
    ]
    on_topic = [(key, value, ts) for topic, key, value, ts in got if topic == stage_output.topic]
    assert sorted(map(repr, in_files)) == sorted(map(repr, on_topic))
    dead = consume_all(kafka_bootstrap, spec.dead_letter_topic, timeout=30)
    got_dead = sorted(((r.key, bytes(dict(r.headers)["reason"] or b"").decode()[:11]) for r in dead), key=str)
    want_dead = [(None if e.key is None else e.key.encode(), dict(e.headers)["reason"]) for e in expected
                 if e.topic == spec.dead_letter_topic]  # fmt: skip
    assert got_dead == sorted([*want_dead, (b"alice", "undecodable")], key=str)
    # each record counted once (a global table's too, though every task reads it), each result of the last stage
    status = PipelineFiles(Path(settings.checkpoint_dir)).status()
    assert status is not None
    totals = status.totals
    assert (totals.input_records, totals.dead_letters) == (len(CHAIN_RECORDS) + 1, len(dead))
    assert totals.output_records == sum(1 for topic, *_ in got if topic == spec.output.topic)
