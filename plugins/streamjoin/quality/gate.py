"""Check a staged day and publish it only if it passes, inside the reprocessing application (no second JVM or
GX context): the gate between reprocessing and consumers.

``jobs/reprocess_day.py --check`` stages the day in ``<files.path>/daily/_staging/date=D``, then
:func:`check_and_publish` validates it (GX 1.x, :func:`streamjoin.quality.validate.check_partition`, in the
job's own Spark session) and, by :func:`streamjoin.core.publish.decide`:

* passed: swaps it in as ``daily/date=D`` (replacing a published or quarantined day);
* failed, nothing published yet: swaps it in quarantined (``_QUARANTINED``);
* failed, a day already there: that day stays as it is (published, or quarantined), the staged one is
  dropped; a published day gets the failed check beside it (``_FAILED_RECHECK.json``);
* failed with ``force``: swaps it in anyway with ``_FORCED.json`` (who, which run, what failed, why).

Every output of the day goes the same way: the aggregate's day is swapped in, kept, quarantined (with the
enriched day's ``_QUARANTINED``) or forced with the enriched one. What was done is returned as a
:class:`~streamjoin.core.publish.DayOutcome`; the Airflow task that reports it fails the run and alerts on a
failed check (``CheckAndPublishDayOperator``).

Completeness (``left_records_complete``): for a left join of a stream on a table without grace
(:func:`counts_left_records`) the day's left records are counted on Kafka, in the offsets the reprocessing
read (:func:`left_records_of_day`), and the check asks for each of them in the output.

Imports no Airflow: the job ring uses it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from streamjoin.core.backfill import partition_location, plan_day
from streamjoin.core.plans import resolve
from streamjoin.core.publish import (
    Action,
    DayOutcome,
    ForcedRecord,
    decide,
    outcome_location,
    record_forced,
    staged_location,
    swap_in,
    write_outcome,
)
from streamjoin.core.shapes import Kind, Shape
from streamjoin.core.spec import PipelineSpec
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
from streamjoin.quality.suites import Target, build_check_plan, load_settings

#: left joins whose every left record has its output at once, when it is processed
COMPLETE_AT_ONCE = frozenset({Shape.STREAM_TABLE, Shape.STREAM_GLOBALTABLE})
AGAIN = " (reprocess with force to publish it anyway)"


@dataclass(frozen=True)
class GateRequest:
    """Who asks for the day and how it is judged: ``force`` (and ``reason``) publish over a failed check;
    ``dag_id``/``run_id``/``user``: the Airflow run (recorded in ``_FORCED.json`` and the outcome);
    ``check_run``: the check's name (GX run, ``_CHECK_RESULT.json``'s ``run_id``: ``<run_id>-try<n>``);
    ``docs_root``: the Data Docs' root (each check gets ``<pipeline>/<target>/<day>/<check_run>/``);
    ``docs_base_url``: the URL ``docs_root`` is served under (links in alerts and pages), None: ``file://``."""

    dag_id: str
    run_id: str
    check_run: str
    docs_root: Path
    force: bool = False
    reason: str | None = None
    user: str | None = None
    docs_base_url: str | None = None


def counts_left_records(spec: PipelineSpec) -> bool:
    """Does the day's check count the left input (``left_records_complete``)? For a left join of a stream on
    a table without a grace: each left record with a value has one output, at once. Not for a windowed join,
    nor a grace on a versioned table (a record's result waits for stream time to pass its window or grace,
    which may come after the day's read), nor a table on the left (a delete of an absent row emits nothing),
    nor a repartitioned left input (its output rows name the internal topic, not the left input's), nor a chain
    (they name the previous stage's results, and an earlier stage may drop a left record)."""
    join = spec.join
    at_once = join.shape in COMPLETE_AT_ONCE and not join.grace
    return at_once and join.kind is not Kind.INNER and not spec.left.repartition and not spec.chained


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
                    f"in {timeout:.0f}s; {count} counted so far. Is the cluster reachable? Reprocess the day again"
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


def day_targets(spec: PipelineSpec, day: date, home: Path) -> list[tuple[str, str]]:
    """(staged, published) locations of the day, the enriched output first, then the aggregate's."""
    sinks = [spec.output.files] + ([spec.aggregate.output.files] if spec.aggregate is not None else [])
    return [
        (staged_location(str(resolve(f.path, home)), day), partition_location(str(resolve(f.path, home)), day))
        for f in sinks
        if f is not None
    ]


def served_url(url: str, docs_root: Path, base_url: str) -> str:
    """A ``file://`` Data Docs URL under ``docs_root`` as served under ``base_url`` (others unchanged)."""
    root = docs_root.resolve().as_uri()
    return base_url.rstrip("/") + url[len(root) :] if url.startswith(root) else url


def check_and_publish(
    spark: Any, spec: PipelineSpec, day: date, kafka: KafkaTarget, request: GateRequest, *, home: Path,
    reprocessed: Any = None, say: Callable[[str], None] = print,
) -> DayOutcome:  # fmt: skip
    """Check the staged day of ``spec`` in ``spark`` and publish, quarantine, keep or force it (see the module
    docstring); record what was done in ``daily/_staging/date=D.outcome.json`` for the Airflow task that
    reports it. ``reprocessed``: the day's ``DayResult`` (its counts go into the outcome); ``say`` gets what
    a person reads in the task log.

    :raises FileNotFoundError: nothing is staged for the day (names where it was looked for)
    """
    outcome = _check_and_publish(spark, spec, day, kafka, request, home=home, say=say)
    if reprocessed is not None:
        outcome = replace(outcome, input_rows=reprocessed.input_rows, results=reprocessed.results,
                          dead_letters=reprocessed.dead_letters, seconds=round(reprocessed.seconds, 3))  # fmt: skip
    assert spec.output.files is not None  # (_check_and_publish refuses a spec without)
    write_outcome(LocalStorage(), outcome_location(str(resolve(spec.output.files.path, home)), day), outcome)
    return outcome


def _check_and_publish(
    spark: Any, spec: PipelineSpec, day: date, kafka: KafkaTarget, request: GateRequest, *, home: Path,
    say: Callable[[str], None],
) -> DayOutcome:  # fmt: skip
    from streamjoin.quality.validate import check_partition, run_slug  # GX: only here

    started = time.monotonic()
    if spec.output.files is None or spec.quality is None:
        raise ValueError(f"{spec.name} has no quality suite or no file output: its days are not checked")
    targets = day_targets(spec, day, home)
    staged, published = Path(targets[0][0]), Path(targets[0][1])
    if not staged.is_dir():
        raise FileNotFoundError(f"nothing is staged for {spec.name} {day} at {staged}: reprocess the day again")
    suite_file = resolve(spec.quality.suite, home)
    settings = load_settings(suite_file, spec.name)
    left: int | None = None
    if counts_left_records(spec) and "left_records_complete" not in settings.for_target(Target.ENRICHED).disable:
        left = left_records_of_day(kafka, spec, day)
        say(f"{spec.name} {day}: {left} left input records of the day on {spec.left.topic} (each must have its output)")
    plan = build_check_plan(spec, settings, day=day, target=Target.ENRICHED, left_input_count=left,
                            suite_file=str(suite_file))  # fmt: skip
    docs_root = request.docs_root.resolve()
    base_url = request.docs_base_url
    say(f"validating {staged} ({len(plan.checks)} checks from {suite_file})")
    result = check_partition(
        spark, plan, staged,
        docs_dir=docs_root / spec.name / plan.target.value / day.isoformat() / run_slug(request.check_run),
        run_id=request.check_run,
        docs_url=(lambda url: served_url(url, docs_root, base_url)) if base_url else None,
        file_format=spec.output.files.format,
    )  # fmt: skip
    result = replace(result, partition_path=str(published))  # where it ends up
    for failed in result.failed:
        severity = "blocking" if failed.blocking else "warning"
        say(f"{failed.name} failed ({severity}): observed {failed.observed_text()} -- {failed.description}")
    say(f"{result.summary()}; Data Docs: {result.data_docs_url or '(none)'}")
    was_quarantined = published.is_dir() and is_quarantined(published)
    action = decide(result.success, force=request.force, published_exists=published.is_dir())
    consequence, forced_file = _apply(action, request, targets, result, was_quarantined)
    return DayOutcome(
        pipeline=spec.name, day=day.isoformat(), action=action.value, path=str(published), consequence=consequence,
        check=result.to_dict(), forced_file=forced_file, dag_id=request.dag_id, run_id=request.run_id,
        left_records=left, check_seconds=round(time.monotonic() - started, 3),
    )  # fmt: skip


def _apply(
    action: Action, request: GateRequest, targets: list[tuple[str, str]], result: CheckResult, was_quarantined: bool
) -> tuple[str, str | None]:
    """Do what the verdict decided; returns what became of the day, in words, and ``_FORCED.json``'s path."""
    storage = LocalStorage()
    published = Path(targets[0][1])
    if action is Action.KEEP:
        for staged, _ in targets:
            storage.delete(staged)
        if was_quarantined:  # the newest verdict on the day, kept beside its (older) data
            write_check_result(result, published)
            return f"the day stays quarantined at {published}; nothing republished{AGAIN}", None
        # the day keeps its version; its latest check (this one) is recorded beside it for the pages
        kept = read_check_result(published)
        write_failed_recheck(result, published)
        version = f" (the version of run {kept.dag_run_id})" if kept is not None else ""
        return f"the published day {published} stays as it was{version}; the new computation was dropped{AGAIN}", None
    for staged, target in targets:
        swap_in(storage, staged, target)
    write_check_result(result, published)
    if action is Action.PUBLISH:
        return "passed its check and was published" + (" (its quarantine lifted)" if was_quarantined else ""), None
    if action is Action.QUARANTINE:
        marker = (published / QUARANTINE_FILE).read_text()
        for _, target in targets[1:]:
            if Path(target).is_dir():
                (Path(target) / QUARANTINE_FILE).write_text(marker)
        return f"day quarantined at {published} (nothing was published before){AGAIN}", None
    for _, target in targets:
        release_quarantine(target)
    record = ForcedRecord(
        day=result.day, dag_id=request.dag_id, run_id=request.run_id, user=request.user,
        failed=result.blocking_failed, summary=result.summary(), at=datetime.now(UTC).isoformat(timespec="seconds"),
        reason=request.reason,
    )  # fmt: skip
    path = record_forced(storage, str(published), record)
    failed = ", ".join(result.blocking_failed)
    return f"published with force over its failed check ({failed}), recorded in {path}", path
