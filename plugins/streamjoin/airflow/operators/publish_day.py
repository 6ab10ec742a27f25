"""Check a staged day and publish it only if it passes: the gate between reprocessing and consumers.

``ReprocessDayOperator`` stages the day in ``<files.path>/daily/_staging/date=D``; this operator validates it
(GX, as :class:`DataQualityOperator`) and then, by :func:`streamjoin.core.publish.decide`:

* passed: swaps it in as ``daily/date=D`` (replacing a published or quarantined day) and succeeds, so the
  day's asset event is recorded (its extra names the day);
* failed, nothing published yet: swaps it in quarantined (``_QUARANTINED``), fails, alerts, no asset event;
* failed, a day already there: that day stays as it is (published, or quarantined), the staged one is
  dropped; fails, alerts, no asset event;
* failed with ``force``: swaps it in anyway with ``_FORCED.json`` (who, which run, what failed), logs a
  warning and succeeds (the asset event's extra says ``forced``).

Every output of the day goes the same way: the aggregate's day is swapped in, kept, quarantined (with the
enriched day's ``_QUARANTINED``) or forced with the enriched one.

Completeness (``left_records_complete``): for a left join of a stream on a table without grace
(:func:`counts_left_records`) it counts the day's left records itself, on Kafka, in the offsets the
reprocessing read (:func:`left_records_of_day`), and the check asks for each of them in the output.

It releases the day's lock that reprocessing took, whatever happens.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from streamjoin.airflow.operators.quality import DataQualityOperator, QualityCheckFailed
from streamjoin.airflow.operators.reprocess import checked_before_publishing, day_lock, emit_day_event, run_identity
from streamjoin.core.backfill import parse_day, partition_location, plan_day
from streamjoin.core.plans import resolve
from streamjoin.core.publish import Action, ForcedRecord, decide, record_forced, staged_location, swap_in
from streamjoin.core.shapes import Kind, Shape
from streamjoin.core.spec import PipelineSpec, load_spec
from streamjoin.core.storage import LocalStorage
from streamjoin.kafka.client_config import KafkaClientConfig, KafkaTarget
from streamjoin.quality.results import (
    QUARANTINE_FILE,
    CheckResult,
    is_quarantined,
    read_check_result,
    release_quarantine,
    write_check_result,
    write_failed_recheck,
)


def _true(value: Any) -> bool:
    return value is True or str(value).strip().lower() in ("true", "1", "yes")


def _reason(value: Any) -> str | None:
    """A rendered free-text field: None when empty or not given."""
    text = "" if value is None else str(value).strip()
    return None if text in ("", "None") else text


def day_targets(spec: PipelineSpec, day: Any) -> list[tuple[str, str]]:
    """(staged, published) locations of the day, the enriched output first, then the aggregate's."""
    sinks = [spec.output.files] + ([spec.aggregate.output.files] if spec.aggregate is not None else [])
    return [
        (staged_location(str(resolve(f.path)), day), partition_location(str(resolve(f.path)), day))
        for f in sinks
        if f is not None
    ]


#: left joins whose every left record has its output at once, when it is processed
COMPLETE_AT_ONCE = frozenset({Shape.STREAM_TABLE, Shape.STREAM_GLOBALTABLE})


def counts_left_records(spec: PipelineSpec) -> bool:
    """Does the day's check count the left input (``left_records_complete``)? For a left join of a stream on
    a table without a grace: each left record with a value has one output, at once. Not for a windowed join,
    nor a grace on a versioned table (a record's result waits for stream time to pass its window or grace,
    which may come after the day's read), nor a table on the left (a delete of an absent row emits nothing),
    nor a repartitioned left input (its output rows name the internal topic, not the left input's)."""
    join = spec.join
    at_once = join.shape in COMPLETE_AT_ONCE and not join.grace
    return at_once and join.kind is not Kind.INNER and not spec.left.repartition


def left_records_of_day(kafka: KafkaTarget, spec: PipelineSpec, day: date, timeout: float = 300.0) -> int:
    """The left input's records of ``day`` (timestamp within it) with a value, between the offsets the day's
    reprocessing reads (:func:`~streamjoin.core.backfill.plan_day`'s range, found by time), read with a consumer.
    A record without a value is no join input (Kafka Streams skips it; here a dead letter); an undecodable one
    counts: the day's output lacks it.

    :raises TimeoutError: the range was not read within ``timeout`` seconds (names the topic and how far it got)
    """
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    from streamjoin.kafka.clients import offsets_for_time

    plan = plan_day(spec, day)
    read = next(r for r in plan.reads if r.topic == spec.left.topic)
    ending = offsets_for_time(kafka, read.topic, read.to_ms)
    starting = offsets_for_time(kafka, read.topic, read.from_ms) if read.from_ms is not None else {}
    todo = {p: (starting.get(p, 0), end) for p, end in ending.items() if end > starting.get(p, 0)}
    if not todo:
        return 0
    cluster = KafkaClientConfig.of(kafka)
    consumer = Consumer({
        **cluster.librdkafka(), "group.id": f"streamjoin-count-{uuid.uuid4().hex[:12]}", "enable.auto.commit": False,
        "enable.partition.eof": True, "isolation.level": "read_committed",
    })  # fmt: skip
    count, deadline = 0, time.monotonic() + timeout
    try:
        consumer.assign([TopicPartition(read.topic, p, start) for p, (start, _) in todo.items()])
        while todo:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"counting the left records of {spec.name} {day} on {read.topic!r} ({cluster.describe()}): "
                    f"partitions {sorted(todo)} not read to their end offsets {[todo[p][1] for p in sorted(todo)]} "
                    f"in {timeout:.0f}s; {count} counted so far. Is the cluster reachable? Retry the task"
                )
            for message in consumer.consume(num_messages=1000, timeout=1.0):
                partition, error = message.partition() or 0, message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        todo.pop(partition, None)  # (its end offset fell on transaction markers)
                    continue
                offset = message.offset() or 0
                if partition not in todo or offset >= todo[partition][1]:
                    todo.pop(partition, None)
                    continue
                if plan.contains(message.timestamp()[1]) and message.value() is not None:
                    count += 1
                if offset + 1 >= todo[partition][1]:
                    todo.pop(partition)
    finally:
        consumer.close()
    return count


class CheckAndPublishDayOperator(DataQualityOperator):
    """Validate the staged day of a pipeline's enriched output and publish it only if it passes (or with
    ``force``); see the module docstring. Alerts through ``on_failure_callback``.

    :param spec_path: pipeline spec (templated)
    :param day: ``YYYY-MM-DD`` (templated)
    :param data_docs_dir: root of the Data Docs (templated)
    :param force: publish even if a blocking check fails (recorded in ``_FORCED.json``) (templated)
    :param force_reason: why, in the user's words (recorded with ``force``) (templated)
    :param dry_run: the reprocessing was a dry run: nothing staged, this task is skipped (templated)
    :param kafka_conn_id: the cluster whose left input records of the day the completeness check counts
        (:func:`counts_left_records`) (templated)
    """

    template_fields: Sequence[str] = (
        *DataQualityOperator.template_fields, "force", "force_reason", "count_only", "kafka_conn_id",
    )  # fmt: skip

    def __init__(
        self, *, spec_path: str, day: str, data_docs_dir: str, force: bool | str = False,
        dry_run: bool | str = False, kafka_conn_id: str = "streamjoin_kafka_default", force_reason: str | None = None,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(spec_path=spec_path, day=day, partition_path="", data_docs_dir=data_docs_dir, **kwargs)
        self.force, self.count_only, self.kafka_conn_id = force, dry_run, kafka_conn_id
        self.force_reason = force_reason

    def execute(self, context: Any) -> dict[str, Any]:

        if _true(self.count_only):
            raise AirflowSkipException("dry run: nothing was staged, nothing to check or publish")
        spec = load_spec(resolve(self.spec_path))
        if not checked_before_publishing(spec):
            raise AirflowSkipException(f"{spec.name} has no quality suite: reprocess_day published the day itself")
        day = parse_day(str(self.day))
        if spec.output.files is None:
            raise AirflowFailException(f"{spec.name} writes no files: there is no day to check")
        targets = day_targets(spec, day)
        staged, published = Path(targets[0][0]), Path(targets[0][1])
        lock = day_lock(spec, day)
        run = run_identity(context)
        try:
            if not staged.is_dir():
                raise AirflowFailException(
                    f"nothing is staged for {spec.name} {day} at {staged}: the reprocess_day task stages it"
                )
            if self.left_input_count is None and counts_left_records(spec):
                self.left_input_count = self._left_records(spec, day)
            result = replace(self.check(context, staged), partition_path=str(published))  # where it ends up
            was_quarantined = published.is_dir() and is_quarantined(published)
            action = decide(result.success, force=_true(self.force), published_exists=published.is_dir())
            consequence = self._apply(action, context, spec, targets, result, was_quarantined)
        finally:
            if lock is not None:
                lock.release(*run)
        if action in (Action.QUARANTINE, Action.KEEP):
            raise QualityCheckFailed(result, consequence)
        outcome = {"pipeline": spec.name, "day": day.isoformat(), "path": str(published),
                   "forced": action is Action.FORCE, "warnings": result.warnings,
                   "data_docs_url": result.data_docs_url}  # fmt: skip
        emit_day_event(context, self.outlets, spec, {k: outcome[k] for k in ("pipeline", "day", "path", "forced")})
        self.log.info("progress: %s %s %s at %s", spec.name, day, consequence, published)
        return outcome

    def _left_records(self, spec: PipelineSpec, day: date) -> int | None:
        """The day's left input records for ``left_records_complete`` (None: the suite disables the check)."""
        from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook
        from streamjoin.quality.suites import Target, load_settings

        suite = self.suite_path or (spec.quality.suite if spec.quality else None)
        settings = load_settings(resolve(suite), spec.name) if suite else None
        if settings is not None and "left_records_complete" in settings.for_target(Target.ENRICHED).disable:
            return None
        count = left_records_of_day(StreamJoinKafkaHook(self.kafka_conn_id).checked_config(), spec, day)
        self.log.info("%s %s: %d left input records of the day on %s (each must have its output)",
                      spec.name, day, count, spec.left.topic)  # fmt: skip
        return count

    def _apply(
        self, action: Action, context: Any, spec: PipelineSpec, targets: list[tuple[str, str]],
        result: CheckResult, was_quarantined: bool,
    ) -> str:  # fmt: skip
        """Do what the verdict decided; returns what became of the day, in words."""
        storage = LocalStorage()
        published = Path(targets[0][1])
        again = " (reprocess with force to publish it anyway)"
        if action is Action.KEEP:
            for staged, _ in targets:
                storage.delete(staged)
            if was_quarantined:  # the newest verdict on the day, kept beside its (older) data
                write_check_result(result, published)
                return f"the day stays quarantined at {published}; nothing republished{again}"
            # the day keeps its version; its latest check (this one) is recorded beside it for the pages
            kept = read_check_result(published)
            write_failed_recheck(result, published)
            version = f" (the version of run {kept.dag_run_id})" if kept is not None else ""
            return f"the published day {published} stays as it was{version}; the new computation was dropped{again}"
        for staged, target in targets:
            swap_in(storage, staged, target)
        write_check_result(result, published)
        if action is Action.PUBLISH:
            return "passed its check and was published" + (" (its quarantine lifted)" if was_quarantined else "")
        if action is Action.QUARANTINE:
            marker = (published / QUARANTINE_FILE).read_text()
            for _, target in targets[1:]:
                if Path(target).is_dir():
                    (Path(target) / QUARANTINE_FILE).write_text(marker)
            return f"day quarantined at {published} (nothing was published before){again}"
        for _, target in targets:
            release_quarantine(target)
        dag_run = context.get("dag_run")
        dag_id, run_id = run_identity(context)
        record = ForcedRecord(
            day=result.day, dag_id=dag_id, run_id=run_id,
            user=getattr(dag_run, "triggering_user_name", None), failed=result.blocking_failed,
            summary=result.summary(), at=datetime.now(UTC).isoformat(timespec="seconds"),
            reason=_reason(self.force_reason),
        )  # fmt: skip
        path = record_forced(storage, str(published), record)
        self.log.warning("%s %s published with force over a failed check (%s); recorded in %s",
                         spec.name, result.day, ", ".join(result.blocking_failed), path)  # fmt: skip
        return f"published with force over its failed check ({', '.join(result.blocking_failed)}), recorded in {path}"
