"""Reprocessing plans for past days: pure functions from a spec, days and Kafka facts to a plan or a clear error.

A day ``D`` is the UTC interval ``[D 00:00, D+1 00:00)``. Reprocessing it reads, per input topic, a range of
offsets found by timestamp (``offsets_for_time``):

* table and global-table topics from the beginning (the table as it stood) up to ``day end + grace``;
* stream topics from ``day start`` (minus the join window and grace for stream-stream) to ``day end + grace``;

(``grace`` here is the larger of the join's grace and an allowed lateness, one hour by default)

runs them as one batch through the streaming job's ``process_batch`` and keeps the results whose timestamp
lies in the day. Nothing here touches Kafka, Spark or files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from streamjoin.core.repartition import join_view
from streamjoin.core.spec import PipelineSpec, Role, Shape
from streamjoin.core.storage import join

DAY_MS = 86_400_000
DAILY_DIR = "daily"
#: records arriving up to this long after day end are still taken (at least the join's grace)
DEFAULT_LATENESS_MS = 3_600_000


class BackfillError(ValueError):
    """Invalid reprocessing input: the message names the bad value and what is allowed."""


#: a day from a form: exactly ``YYYY-MM-DD`` in ASCII digits (``date.fromisoformat`` also takes other ISO
#: forms and non-ASCII digits)
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters: a refusal names the bad value without echoing megabytes
    (nothing given: ``(empty)``, never Python's ``None``)."""
    if value is None or value == "":
        return "(empty)"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def parse_day(value: str | date, what: str = "day") -> date:
    """``YYYY-MM-DD`` (or a date) -> date; anything else (other ISO forms, unicode digits, trailing text) is
    refused with the value and the expected form."""
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str) and _DAY.fullmatch(value.strip()):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise BackfillError(f"{what} {shown(value)} is not a date: use YYYY-MM-DD")


def pipeline_spec(name: object, specs: Mapping[str, str]) -> str:
    """The spec path of the pipeline a form names (``specs``: name -> path, built from the project's own
    pipeline folder): the form gives a name, never a path."""
    if not isinstance(name, str) or name not in specs:
        raise BackfillError(f"unknown pipeline {shown(name)}: choose one of {sorted(specs)}")
    return specs[name]


def day_start_ms(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)


def days_in(start: date, end: date) -> list[date]:
    """Every day from ``start`` to ``end``, both included."""
    return [start + timedelta(days=n) for n in range((end - start).days + 1)]


@dataclass(frozen=True)
class TopicRead:
    """One input topic's time range: ``from_ms`` None means from the beginning of the topic."""

    topic: str
    role: Role
    from_ms: int | None
    to_ms: int


@dataclass(frozen=True)
class BackfillPlan:
    pipeline: str
    day: date
    start_ms: int
    end_ms: int
    #: how long after day end late records are still taken (join grace or allowed lateness)
    grace_ms: int
    reads: tuple[TopicRead, ...]

    @property
    def ready_at_ms(self) -> int:
        """The stream's watermark must pass this before the day is final."""
        return self.end_ms + self.grace_ms

    def contains(self, ts_ms: int) -> bool:
        return self.start_ms <= ts_ms < self.end_ms


def lookback_ms(spec: PipelineSpec) -> int:
    """How far before day start stream topics are read: records there can join records of the day (through
    every windowed stage of a chain)."""
    return sum(join.window.before + join.window.after + join.grace for join in spec.stages
               if join.shape is Shape.STREAM_STREAM and join.window is not None)  # fmt: skip


def plan_day(spec: PipelineSpec, day: date | str, *, lateness_ms: int = DEFAULT_LATENESS_MS) -> BackfillPlan:
    """The topic ranges that reprocess ``day`` of ``spec`` (see the module docstring).

    :param lateness_ms: how long after day end late records still count (at least the join's grace);
        a record written to Kafka after a record of ``day end + lateness`` in its partition is left out.
    """
    day = parse_day(day)
    start = day_start_ms(day)
    end = start + DAY_MS
    grace = max(*(join.grace for join in spec.stages), lateness_ms)
    reads = []
    for inp in join_view(spec).inputs.values():  # a repartitioned input: its internal topic, as the stream read it
        if inp.role is Role.STREAM:
            reads.append(TopicRead(inp.topic, inp.role, start - lookback_ms(spec), end + grace))
        else:
            reads.append(TopicRead(inp.topic, inp.role, None, end + grace))
    return BackfillPlan(spec.name, day, start, end, grace, tuple(reads))


def partition_location(files_location: str, day: date) -> str:
    """Where a reprocessed day is published: ``<files.path>/daily/date=YYYY-MM-DD`` (a path or a URI)."""
    return join(files_location, DAILY_DIR, f"date={day.isoformat()}")


def partition_path(files_path: str | Path, day: date) -> Path:
    """:func:`partition_location` of a local output."""
    return Path(partition_location(str(files_path), day))


@dataclass(frozen=True)
class RetentionFact:
    """What Kafka still holds of a topic: whether records were deleted (log start offset > 0 in some
    partition) and the earliest available record timestamp (None: the topic is empty)."""

    truncated: bool
    earliest_ts: int | None


def check_retention(plan: BackfillPlan, facts: Mapping[str, RetentionFact]) -> None:
    """Fail if Kafka no longer holds part of the plan's ranges (deleted by retention).

    :raises BackfillError: naming the topic, the earliest available time and the range start.
    """
    for read in plan.reads:
        fact = facts.get(read.topic)
        if fact is None or not fact.truncated or fact.earliest_ts is None:
            continue
        needed = read.from_ms
        if needed is None:
            raise BackfillError(
                f"{plan.day}: table topic {read.topic!r} was truncated by retention (earliest record "
                f"{_iso(fact.earliest_ts)}): the table cannot be rebuilt from it; use a compacted topic"
            )
        if fact.earliest_ts > needed:
            raise BackfillError(
                f"{plan.day}: beyond Kafka retention: topic {read.topic!r} holds records from "
                f"{_iso(fact.earliest_ts)} only, the day needs them from {_iso(needed)}"
            )


def validate_request(
    pipeline: str,
    start: str | date,
    end: str | date,
    *,
    pipelines: Iterable[str],
    today: date,
    existing: Iterable[date] = (),
    overwrite: bool = True,
    max_days: int = 366,
) -> list[date]:
    """Check a reprocessing request (the trigger form) and return its days.

    :param today: the current UTC day: it and later days are not over yet, so they cannot be reprocessed.
    :param existing: days already published; with ``overwrite`` False they are refused.
    :raises BackfillError: unknown pipeline, a non-date, end before start, a future day, too many days.
    """
    known = sorted(pipelines)
    if pipeline not in known:
        raise BackfillError(f"unknown pipeline {shown(pipeline)}: choose one of {known}")
    first, last = parse_day(start, "start"), parse_day(end, "end")
    if last < first:
        raise BackfillError(f"end {last} is before start {first}")
    if last >= today:
        raise BackfillError(f"end {last} is not over yet (today is {today} UTC): reprocess days before {today}")
    days = days_in(first, last)
    if len(days) > max_days:
        raise BackfillError(f"{len(days)} days from {first} to {last}: at most {max_days} per run")
    clash = sorted(set(days) & set(existing))
    if clash and not overwrite:
        raise BackfillError(f"already published: {[d.isoformat() for d in clash]}; set overwrite to replace them")
    return days


def nondeterminism_warnings(spec: PipelineSpec) -> list[str]:
    """Where a reprocessed day may differ from what the stream produced back then."""
    warnings = []
    for name, inp in spec.inputs.items():
        if inp.role is Role.GLOBAL_TABLE:
            warnings.append(
                f"input {name!r} is a global table ({inp.topic}): the stream joined against whatever the table "
                "held when each record arrived; if the topic changed since (updates, compaction), the "
                "reprocessed day uses the table as now rebuilt up to day end and is not deterministic"
            )
    return warnings


def _iso(ts_ms: int) -> str:
    return datetime.fromtimestamp(ts_ms / 1000, UTC).isoformat(timespec="seconds")
