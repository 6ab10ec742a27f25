"""The streaming join: micro-batches planned by event time, read from Kafka, run through
:func:`process_batch`, written to Kafka and files; offsets, state and status in the checkpoint. The shapes
:func:`~streamjoin.spark.in_task.in_task` names run each batch as one stage of the kernel's tasks instead
(read, decode, join, project and send in each task).

The job drives its micro-batches itself rather than through Spark's Kafka stream source, because that
source cuts a backlog in proportion to offsets: a table topic whose records are older than the stream's
would be spread over every batch, and early stream records would miss their table rows. Here each batch
is a prefix of Kafka Streams' processing order (:mod:`streamjoin.core.batch_plan`), so the output does not
depend on the batch size. Exactly once across a crash: batch N's offsets are logged before it runs (a
restart runs the very same batch again), its state and files are written under N, and ``commits/N`` marks
it done (:class:`streamjoin.core.job_files.OffsetLog`); the Kafka output is at least once, or exactly once with
``output.delivery: exactly_once`` (:func:`~streamjoin.spark.sinks.write_kafka_transactions`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from pyspark.sql import DataFrame, SparkSession

from streamjoin.core.batch_plan import TopicPartition, by_topic, plan_batch
from streamjoin.core.errors import (
    CheckpointLockedError,
    CorruptCheckpointError,
    KafkaUnavailableError,
    MissingTopicError,
    StreamJoinError,
    TopicProvisionError,
)
from streamjoin.core.job_files import QUERY_DIR, BatchCounts, Lease, OffsetLog, Offsets, PipelineFiles
from streamjoin.core.join_plan import JoinPlan, stage_specs
from streamjoin.core.ordering import source_orders
from streamjoin.core.plans import location
from streamjoin.core.repartition import join_view, repartitioned
from streamjoin.core.spec import PipelineSpec, Role, Sink
from streamjoin.core.storage import Storage, join
from streamjoin.core.topic_plan import TopicRole, plan_topics
from streamjoin.kafka.client_config import KafkaTarget
from streamjoin.kafka.offsets import KafkaOffsets
from streamjoin.spark.engine import BatchOutput, process_batch
from streamjoin.spark.events import BatchSummary
from streamjoin.spark.failures import jvm_error
from streamjoin.spark.hadoop_storage import storage_for
from streamjoin.spark.heartbeat import Heartbeat
from streamjoin.spark.in_task import TaskBatch, in_task, run_in_tasks, task_pipeline
from streamjoin.spark.kernel import StoreTask, jvm_plan, store_tasks
from streamjoin.spark.plan_ahead import DriverClock, NextBatch, PlanAhead
from streamjoin.spark.repartition import Repartitioner, join_partitions
from streamjoin.spark.sinks import (
    close_producers,
    close_transactional_producers,
    dead_letter_rows,
    file_rows,
    kafka_rows,
    write_files,
    write_kafka,
    write_kafka_transactions,
)
from streamjoin.spark.source import read_task_ranges
from streamjoin.spark.state import KernelCheckpoint, PartitionTime, StateStore
from streamjoin.spark.templates import templated

log = logging.getLogger("streamjoin.job")

#: while caught up, look for new records this often at most (seconds)
IDLE_POLL = 0.1


@dataclass(frozen=True)
class JobSettings:
    """What the job needs besides the spec; ``bootstrap`` is the cluster: ``host:port,...`` or a full client
    config (:class:`~streamjoin.kafka.client_config.KafkaClientConfig`, security settings included)."""

    bootstrap: KafkaTarget
    checkpoint_dir: str
    available_now: bool = False
    starting_offsets: str = "earliest"
    home: str = "."

    def path(self, relative: str) -> str:
        """Output paths of the spec are relative to the project home (URIs such as ``hdfs://`` as they are)."""
        return location(relative, Path(self.home))

    def durable_root(self, spec: PipelineSpec) -> str:
        """Where the offset log, the lease and the state live: the spec's ``checkpoint_location`` (any
        Hadoop-compatible filesystem), else the local checkpoint folder beside the job's files."""
        return spec.checkpoint_location or self.checkpoint_dir


class BatchWriter:
    """One micro-batch in, all outputs and the new state out."""

    def __init__(
        self, spark: SparkSession, spec: PipelineSpec, settings: JobSettings, storage: Storage, query_id: str
    ) -> None:
        self.spark, self.spec, self.settings, self.query_id = spark, spec, settings, query_id
        self.store = StateStore(join(settings.durable_root(spec), "state"), storage, pipeline=spec.name)
        #: (topic, partition) -> the largest timestamp processed, as committed (the job's watermarks)
        self.partition_time: PartitionTime = self.store.partition_time()
        #: the counts of the last batch: the heartbeat reports them
        self.last_counts = BatchCounts()
        #: exactly once: the first batch a driver writes may be one an earlier driver wrote before it died
        self._check_markers = True
        #: the batch runs in the kernel's tasks (:mod:`~streamjoin.spark.in_task`) where its spec allows
        self._in_task = in_task(spec)
        self._spec_json = spec.model_dump_json()
        self._preparing: threading.Thread | None = None

    def prepare(self) -> None:
        """Build the kernel's task pipeline in a thread of its own, while the driver checks topics, takes the lease
        and plans batch 0 (seconds of analysis and code generation in a fresh JVM); the first batch waits for it."""
        if self._in_task:
            self._preparing = threading.Thread(target=self._build_pipeline, name="streamjoin-prepare", daemon=True)
            self._preparing.start()

    def _build_pipeline(self) -> None:
        try:
            task_pipeline(self.spark, self.spec, self._spec_json)
        except Exception:  # the batch builds it again on its own thread, and fails there, with the job
            log.warning("building the task pipeline ahead of batch 0 failed", exc_info=True)

    def __call__(
        self, raw: DataFrame, batch_id: int, *, aligned: bool = True, driver: DriverClock | None = None
    ) -> BatchSummary:
        """Run and write batch ``batch_id``; returns its summary (rows, each partition's max timestamp).

        :param aligned: ``raw`` is :func:`~streamjoin.spark.source.read_task_ranges`' (the job's reads)
        :param driver: the streaming job's planning of the batch: the line then gives ``driver_ms``, the
            driver's time on the batch outside its job (from ``driver.since`` to the write, then after it)
        """
        started = time.monotonic()
        checkpoint = self.store.load(batch_id)
        pipeline = None
        if self._preparing is not None:
            self._preparing.join()
            self._preparing = None
        if self._in_task and aligned and checkpoint.root is not None:
            pipeline = task_pipeline(self.spark, self.spec, self._spec_json)
        out: BatchOutput | TaskBatch
        if pipeline is not None:
            planned = time.monotonic()
            out = self._run_in_tasks(pipeline, raw, batch_id, checkpoint)
            written_counts = BatchCounts(output_records=out.result_count, dead_letters=out.summary.rejected)
        else:
            # one write reads the results unless files are written too
            out = process_batch(raw, self.spec, checkpoint, aligned=aligned, read_once=not self.spec.output.files)
            planned = time.monotonic()
            written_counts = self._write(out, batch_id)
        written = time.monotonic()
        times = dict(self.partition_time)
        for tp, ts in out.summary.max_ts.items():
            if ts is not None:
                times[tp] = max(ts, times.get(tp, ts))
        state_bytes = self.store.save(batch_id, dataclasses.replace(out.commit, partition_time=times))
        self.partition_time = times
        out.release()
        # where a batch's time goes (ms): reading it and planning, computing and writing the outputs, the state
        counts = dataclasses.replace(
            written_counts, input_records=out.summary.rows, state_bytes=state_bytes,
            read_ms=round((planned - started) * 1000), write_ms=round((written - planned) * 1000),
            state_ms=round((time.monotonic() - written) * 1000),
        )  # fmt: skip
        tasks = [] if checkpoint.root is None else store_tasks(self.spark, checkpoint.root)
        timing: dict[str, object] = {"spark_job": out.job} if isinstance(out, TaskBatch) else {}
        if driver is not None:
            outside = planned - driver.since + time.monotonic() - written
            timing |= {"driver_ms": round(outside * 1000), "plan_ms": driver.plan_ms, "planned_ahead": driver.ahead}
        self._report(batch_id, counts, time.monotonic() - started, tasks, timing)
        self.last_counts = counts
        return out.summary

    def _run_in_tasks(self, pipeline: Any, raw: DataFrame, batch_id: int, checkpoint: KernelCheckpoint) -> TaskBatch:
        """The batch as one stage of the kernel's tasks (:func:`~streamjoin.spark.in_task.run_in_tasks`)."""
        spec = self.spec
        out = run_in_tasks(pipeline, raw, spec, checkpoint, batch_id, self.settings.bootstrap,
                           query_id=self.query_id, check_markers=self._check_markers)  # fmt: skip
        if spec.exactly_once:
            self._check_markers = False
            log.info("batch %s: Kafka transactions in the kernel's tasks %s", batch_id, out.written)
        else:
            log.info("batch %s: Kafka output from the kernel's tasks %s", batch_id, out.written)
        return out

    def _write(self, out: BatchOutput, batch_id: int) -> BatchCounts:
        """All Kafka-bound rows (join results, aggregate updates, dead letters) go out in one write. Each
        sink's projection is a batch program built once (:func:`templated`)."""
        spec = self.spec
        results = out.results  # the kernel caches its rows when more than one write reads them
        to_kafka: list[DataFrame] = []
        if spec.output.topic:
            to_kafka.append(_to_kafka(results, spec.output, spec.output.topic, sort=not out.results_in_order))
        if spec.output.files:
            write_files(_to_files(results), self.settings.path(spec.output.files.path), spec.output.files.format,
                        batch_id)  # fmt: skip
        for sink, rows in out.stage_results:  # a chain's earlier stage with an output of its own
            if sink.topic:
                to_kafka.append(_to_kafka(rows, sink, sink.topic, sort=True))
            if sink.files:
                write_files(_to_files(rows), self.settings.path(sink.files.path), sink.files.format, batch_id)
        aggregates = None
        if spec.aggregate is not None and out.aggregates is not None:
            aggregates = out.aggregates
            sink = spec.aggregate.output
            if sink.topic:
                to_kafka.append(_to_kafka(aggregates, sink, sink.topic, sort=False))
            if sink.files:
                write_files(_to_files(aggregates), self.settings.path(sink.files.path), sink.files.format, batch_id)
        # without an aggregate (whose null groups are dead letters too), dead letters are the decoder's rejects
        dead = out.dead_letters if spec.aggregate is None else out.dead_letters.persist()
        topic = spec.dead_letter_topic
        to_kafka.append(templated(dead, f"dead letter rows {topic}", lambda rows: dead_letter_rows(rows, topic)))
        rows = to_kafka[0]
        for frame in to_kafka[1:]:
            rows = rows.unionByName(frame)
        if spec.exactly_once:
            written = write_kafka_transactions(rows, self.settings.bootstrap, spec, self.query_id, batch_id,
                                               check_markers=self._check_markers)  # fmt: skip
            self._check_markers = False
            log.info("batch %s: Kafka transactions %s", batch_id, written)
        else:
            log.info("batch %s: Kafka output %s", batch_id, write_kafka(rows, self.settings.bootstrap))
        # counts without a pass over uncached frames (an Observation on the Kafka write never completes)
        counts = BatchCounts(
            output_records=out.result_count(),
            dead_letters=out.summary.rejected if spec.aggregate is None else dead.count(),
            aggregate_updates=0 if aggregates is None else aggregates.count(),
        )
        dead.unpersist()
        return counts

    def close(self) -> None:
        """Close the producers this JVM keeps for the pipeline's Kafka output."""
        if self.spec.exactly_once:
            close_transactional_producers(self.spark, self.spec)
        else:
            close_producers(self.spark)

    def _report(
        self, batch_id: int, counts: BatchCounts, seconds: float, tasks: list[StoreTask], timing: Mapping[str, object]
    ) -> None:
        """The batch's line; ``tasks``: its stateful tasks, as ``"tasks": {store/partition: executor}`` and
        ``"store_loads"``: the stores an executor loaded from the checkpoint's files; ``timing``: the driver's
        (``driver_ms``, ``plan_ms``, ``planned_ahead``) and, for a batch run in the kernel's tasks, ``spark_job``
        (``{"jobs": J, "stages": S, "tasks": T}``)."""
        line = {"pipeline": self.spec.name, "batch_id": batch_id, "seconds": round(seconds, 3), **counts.as_record(),
                "tasks": {t.name: t.executor for t in tasks}, "store_loads": [t.name for t in tasks if t.loaded],
                **timing}  # fmt: skip
        log.warning("batch %s", json.dumps(line))
        print(f"streamjoin batch {json.dumps(line)}", flush=True)


def _to_kafka(rows: DataFrame, sink: Sink, topic: str, *, sort: bool) -> DataFrame:
    """:func:`kafka_rows`, as a batch program built once per sink."""
    name = f"kafka rows {topic} {sink.value_format.value} {sort}"
    return templated(rows, name, lambda frame: kafka_rows(frame, sink, topic, sort=sort))


def _to_files(rows: DataFrame) -> DataFrame:
    return templated(rows, "file rows", file_rows)


class StreamJob:
    """The batch loop of one pipeline; :meth:`run` until caught up (available-now) or stopped."""

    def __init__(self, spark: SparkSession, spec: PipelineSpec, settings: JobSettings) -> None:
        self.kafka = KafkaOffsets(settings.bootstrap)
        # the join reads repartitioned inputs' internal topics, with their partition count
        moved, spec = repartitioned(spec), join_view(spec, join_partitions(spec, self.kafka))
        self.spark, self.spec, self.settings = spark, spec, settings
        self.files = PipelineFiles(Path(settings.checkpoint_dir))
        root = settings.durable_root(spec)
        storage = storage_for(spark, root)
        self.offset_log = OffsetLog(join(root, QUERY_DIR), storage)
        self.sources = source_orders(spec)
        self.repartitioners = [
            Repartitioner(spark, item, settings.bootstrap, OffsetLog(join(root, "repartition", item.input), storage),
                          self.kafka, settings.starting_offsets)
            for item in moved
        ]  # fmt: skip
        self.writer = BatchWriter(spark, spec, settings, storage, self.offset_log.query_id())
        self.heartbeat = Heartbeat(
            self.files, spec.name, self.offset_log.query_id(), str(uuid.uuid4()), spark.sparkContext.uiWebUrl
        )
        #: the inputs' end offsets when the next batch was planned: the lag it leaves (history, status page)
        self._latest_at_plan: dict[TopicPartition, int] | None = None
        #: the next batch, planned while the current one runs
        self._ahead = PlanAhead()
        self.lease = Lease(root, storage)
        # a committed batch's state must be there, whole: never start from an older or empty one
        self.writer.store.verify(at_least=self.offset_log.last_committed())

    def _partitions(self) -> list[TopicPartition]:
        return self.kafka.partitions(self.sources)

    def _start_of(self, batch_id: int, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Where batch ``batch_id`` starts: where the batch before ended; new partitions at their start."""
        if batch_id > 0:
            previous = self.offset_log.planned(batch_id - 1)
            if previous is None:
                raise CorruptCheckpointError(
                    join(self.offset_log.root, "offsets"), f"batch {batch_id - 1} is committed but its entry is missing"
                )
        else:
            previous = self.offset_log.initial()
        if previous is None:
            which = self.kafka.latest if self.settings.starting_offsets == "latest" else self.kafka.earliest
            previous = by_topic(which(partitions))
            self.offset_log.set_initial(previous)
        return self._start_after(previous, partitions)

    def _start_after(self, previous: Offsets, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Where the batch after the one ending at ``previous`` starts; new partitions at their start."""
        start = {tp: previous[tp[0]][tp[1]] for tp in partitions if tp[1] in previous.get(tp[0], {})}
        new = [tp for tp in partitions if tp not in start]
        return start | self.kafka.earliest(new)

    def run(self) -> int:
        """Run batches; returns how many ran. A batch planned before a crash runs again first, unchanged.

        :raises CheckpointLockedError: another driver runs on this checkpoint (or took it over meanwhile).
        :raises KernelMissingError: the kernel's jar is not on the classpath (terminal, before any batch).
        :raises UnknownShapeError: the driver has no plan for the spec's shape (terminal, before any batch).
        :raises ReferenceOnlyError: a chain the kernel does not run yet (terminal, before any batch).
        :raises Py4JJavaError: the kernel refuses the join plan, naming what differs (a ``TerminalKernelException``:
            terminal, before any batch).
        :raises MissingTopicError: a topic the job writes does not exist (terminal, before any batch).
        """
        JoinPlan.stages_of(self.spec)  # a chain the kernel does not run yet is refused first
        for stage in stage_specs(self.spec):  # each stage's plan checked by the kernel
            jvm_plan(self.spark, stage)
        self.writer.prepare()
        check_topics(self.kafka, self.spec)
        self.lease.acquire()
        stop = threading.Event()
        renewer = threading.Thread(target=self._renew, args=(stop,), name="streamjoin-lease", daemon=True)
        renewer.start()
        try:
            return self._loop()
        finally:
            stop.set()
            renewer.join()
            self.lease.release()
            self.writer.close()

    def _renew(self, stop: threading.Event) -> None:
        while not stop.wait(self.lease.ttl / 3):
            self.lease.renew()

    def _loop(self) -> int:
        last = self.offset_log.last_committed()
        batch_id = 0 if last is None else last + 1
        if self.settings.available_now:  # what the inputs hold now reaches the internal topics first
            self._repartition()
        ceiling = self.kafka.latest(self._partitions()) if self.settings.available_now else None
        interval = self.spec.trigger.processing_time / 1000
        ran = 0
        next_start = 0.0
        # plan ahead where the plan can be taken (plan_ahead's doc); not before a live run's repartition steps,
        # Spark jobs the main thread runs before each plan
        bounded = self.spec.trigger.max_offsets_per_trigger is not None and not self.repartitioners
        overlap = ceiling is not None or bounded
        since = time.monotonic()
        while not self._stop_requested():
            ahead = self._ahead.take(batch_id, self.sources, bounded=ceiling is not None)
            ends = self.offset_log.planned(batch_id)
            if ends is None:
                if ahead is None:
                    if ceiling is None:
                        self._repartition()
                    partitions = self._partitions()
                    ahead_or_now = self._plan(self._start_of(batch_id, partitions), partitions, ceiling)
                else:
                    ahead_or_now = ahead
                start, plan = ahead_or_now.start, ahead_or_now.plan
                if plan.empty:
                    if ceiling is not None:
                        break
                    self.heartbeat.idle()
                    time.sleep(IDLE_POLL)
                    since = time.monotonic()
                    continue
                self._latest_at_plan = ahead_or_now.latest
                plan_ms = round((time.monotonic() - since) * 1000)
                slept = time.monotonic()
                time.sleep(max(0.0, next_start - slept))
                since += time.monotonic() - slept
                ends = by_topic(plan.end)
                self.offset_log.plan(batch_id, ends, int(time.time() * 1000))
            else:
                print(f"streamjoin {self.spec.name}: batch {batch_id} was not committed; it runs again", flush=True)
                start = self._start_of(batch_id, self._partitions())
                plan_ms = round((time.monotonic() - since) * 1000)
            next_start = time.monotonic() + interval
            if overlap:
                self._ahead.start(batch_id + 1, functools.partial(self._plan_after, ends, ceiling))
            self._run_batch(batch_id, by_topic(start), ends, DriverClock(since, plan_ms, ahead is not None))
            since = time.monotonic()
            batch_id += 1
            ran += 1
        return ran

    def _repartition(self) -> None:
        """Copy the repartitioned inputs' new records to their internal topics (before a batch is planned)."""
        for repartitioner in self.repartitioners:
            copied = repartitioner.step()
            if copied:
                line = {"pipeline": self.spec.name, "input": repartitioner.item.input, "copied": copied}
                print(f"streamjoin repartition {json.dumps(line)}", flush=True)

    def _plan(
        self, start: dict[TopicPartition, int], partitions: list[TopicPartition], ceiling: Mapping | None
    ) -> NextBatch:
        """The batch starting at ``start``, by the inputs' end offsets now (at most ``ceiling``). Asks the broker
        only (Kafka's admin client): it runs in the planning thread too."""
        latest = self.kafka.latest(partitions)
        if ceiling is not None:
            latest = {tp: min(o, ceiling.get(tp, start[tp])) for tp, o in latest.items()}
        plan = plan_batch(start, latest, self.sources, self.kafka, self.spec.trigger.max_offsets_per_trigger)
        return NextBatch(partitions, start, plan, latest)

    def _plan_after(self, ends: Offsets, ceiling: Mapping | None) -> NextBatch:
        """The batch after the one ending at ``ends`` (planned while that one runs)."""
        partitions = self._partitions()
        return self._plan(self._start_after(ends, partitions), partitions, ceiling)

    def _run_batch(self, batch_id: int, start: Offsets, ends: Offsets, clock: DriverClock | None = None) -> None:
        """Run, write and commit batch ``batch_id``; ``clock``: the driver's side of it (its line's driver_ms)."""
        started = time.time()
        summary = self.writer(self._raw(start, ends), batch_id, driver=clock)
        if not self.lease.held:  # another driver took the checkpoint over while this batch ran: no commit
            raise CheckpointLockedError(self.lease.path, "another driver", self.lease.ttl)
        self.offset_log.commit(batch_id)
        seconds, counts, lag = time.time() - started, self.writer.last_counts, self._lag_left(ends)
        self.heartbeat.batch(batch_id, summary.rows, started, seconds, ends, self._watermarks(), counts, lag)

    def _lag_left(self, ends: Offsets) -> int | None:
        """Records on the inputs when the batch was planned that it left for later (None: a batch planned
        before a restart, whose plan-time offsets are gone)."""
        latest, self._latest_at_plan = self._latest_at_plan, None
        if latest is None:
            return None
        return sum(max(0, o - ends.get(t, {}).get(p, o)) for (t, p), o in latest.items())

    def _watermarks(self) -> dict[str, int]:
        """Per stream input, the event time every one of its partitions has reached (the smallest of their
        largest processed timestamps): what the backfill waits for before it reprocesses a day."""
        marks = {}
        for name, inp in self.spec.inputs.items():
            times = [ts for (topic, _), ts in self.writer.partition_time.items() if topic == inp.topic]
            if inp.role is Role.STREAM and times:
                marks[name] = min(times)
        return marks

    def _raw(self, start: Offsets, ends: Offsets) -> DataFrame:
        """The batch's records, partition t of the frame holding task t's (no shuffle before the join)."""
        return read_task_ranges(self.spark, self.settings.bootstrap, self.spec, start, ends)

    def _stop_requested(self) -> bool:
        if not self.files.stop_requested():
            return False
        print("streamjoin stop marker seen: stopping between batches", flush=True)
        self.files.clear_stop()
        return True


#: the roles of the topics a job writes (``core.topic_plan``: which those are for a spec)
#: the topics the job reads or writes (the repartition topics are the copy's, checked where it runs)
CHECKED_ROLES = frozenset({TopicRole.INPUT_STREAM, TopicRole.INPUT_TABLE, TopicRole.INPUT_GLOBAL_TABLE,
                           TopicRole.OUTPUT, TopicRole.OUTPUT_TABLE, TopicRole.AGGREGATE_OUTPUT,
                           TopicRole.DEAD_LETTER, TopicRole.BATCH_MARKERS})  # fmt: skip


def job_topics(spec: PipelineSpec) -> dict[str, str]:
    """The topics the job reads and writes, each with its role (as :func:`~streamjoin.core.topic_plan.plan_topics`
    plans them)."""
    return {t.name: t.role.value for t in plan_topics(spec).topics if t.role in CHECKED_ROLES}


def check_topics(kafka: KafkaOffsets, spec: PipelineSpec) -> None:
    """Every topic the job reads or writes exists. Without this check a missing input would fail the batch
    plan, and each write task of the first batch would wait for a missing output's metadata (60 s), fail, and
    the job restart forever.

    :raises MissingTopicError: a topic does not exist (terminal: it must be created)
    :raises TopicProvisionError: the connection may not describe it (terminal: grant it)
    :raises KafkaUnavailableError: no answer from the cluster (transient)
    """
    where = kafka.cluster.describe()
    for topic, role in sorted(job_topics(spec).items()):
        try:
            info = kafka.admin.list_topics(topic=topic, timeout=kafka.timeout).topics.get(topic)
        except KafkaException as exc:
            wait = f"{kafka.timeout:g} s"
            raise KafkaUnavailableError(f"no metadata for `{topic}` from {where} within {wait}: {exc}") from exc
        code = None if info is None or info.error is None else info.error.code()
        if info is None or code == KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise MissingTopicError(topic, role, where)
        if code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            raise TopicProvisionError(topic, "describe", f"{info.error}: grant the connection's user access to it")
        if code is not None:
            raise KafkaUnavailableError(f"topic `{topic}` at {where}: {info.error}")


def run_stream(spark: SparkSession, spec: PipelineSpec, settings: JobSettings) -> int:
    """Run the pipeline's streaming join until stopped (or, available-now, until caught up).

    A failure in Spark's JVM is raised as a :class:`~streamjoin.core.errors.JvmError` whose kind (terminal or
    transient) its Java class decides (:func:`~streamjoin.spark.failures.jvm_error`).
    """
    try:
        return StreamJob(spark, spec, settings).run()
    except StreamJoinError:
        raise
    except Exception as exc:
        mapped = jvm_error(exc)
        if mapped is None:
            raise
        raise mapped from exc
