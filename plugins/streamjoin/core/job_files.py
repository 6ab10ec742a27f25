"""The files the streaming job and Airflow exchange, in one place: readable without Spark or the Airflow DB.

Per pipeline, in its checkpoint folder ``var/checkpoints/<name>/``:

* ``status.json``: the job's heartbeat after every batch (:class:`JobStatus`; :mod:`streamjoin.spark.heartbeat`);
* ``history.jsonl``: one JSON line per committed batch (and one per minute while idle), the last hours of
  them (:class:`History` of :class:`HistoryEntry`): what the status page plots;
* ``stop``: the stop marker, honoured by the job between batches;
* ``driver.json``: pid, process group, start time and spark-submit log of the launched driver
  (:class:`DriverRecord`);
* ``supervisor.json``: the owner's record: restart times, lag alerts, last assessment, whether it gave up, its
  policy (:class:`SupervisorRecord`);
* ``intent``: what the pipeline's owner is asked to do: ``run``, ``stop`` (stay stopped), ``redeploy``
  (start again once stopped), written by the stop/redeploy DAG, read by the owner's trigger;
* ``failure.json``: why the job's last run stopped with an error (:class:`JobFailure`: the error, its message,
  whether a restart can help), written by the job as it exits, read by the owner (restart or alert);
* ``lease.json``: who runs the job on this checkpoint (:class:`Lease`): a second driver refuses to start;
* ``query/``: the job's offset log (:class:`OffsetLog`): ``metadata`` (the query id), ``offsets/N`` (the end
  offsets batch N reads up to, written before it runs) and ``commits/N`` (written once its outputs and state
  are). The layout and the text of the entries are Spark's own, so tools that read Spark checkpoints read it.

Each record has ``to_json``/``from_json`` in one vocabulary (:data:`RENAMED`: the names earlier releases
wrote, still read; unknown keys are ignored, missing ones defaulted); the owner's trigger fires a
:class:`WatchEvent`. Every write goes to a temporary file first and is renamed over the target: a reader
never sees half of it. The history is appended to (one ``write`` per line, by the one driver holding the
lease) and rewritten atomically when trimmed; its reader skips a line a crash tore.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from streamjoin.core.errors import CheckpointLockedError, CorruptCheckpointError, StreamJoinError
from streamjoin.core.storage import LocalStorage, Storage, join, write_text_atomic

STATUS_FILE = "status.json"
STOP_FILE = "stop"
DRIVER_FILE = "driver.json"
LEASE_FILE = "lease.json"
SUPERVISOR_FILE = "supervisor.json"
INTENT_FILE = "intent"
INTENTS = ("run", "stop", "redeploy")
HISTORY_FILE = "history.jsonl"
FAILURE_FILE = "failure.json"
#: the exit codes of a job that recorded its failure: a restart from the checkpoint may help (EX_TEMPFAIL), or
#: a person must act first (EX_CONFIG)
EXIT_TRANSIENT, EXIT_TERMINAL = 75, 78


def _read(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None if it is missing or not one."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write(path: Path, record: dict[str, Any]) -> None:
    write_text_atomic(path, json.dumps(record, default=str, indent=1))


def pid_alive(pid: int, must_contain: str | None = None) -> bool:
    """The process exists and is not a zombie; ``must_contain`` guards against pid reuse (cmdline)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    proc = Path(f"/proc/{pid}")
    try:
        if " Z" in (proc / "stat").read_text().split(")", 1)[1][:3]:
            return False
        if must_contain is not None:
            return must_contain in _cmdline(proc)
    except OSError:
        return proc.exists() if must_contain is None else False
    return True


def _cmdline(proc: Path) -> str:
    """The process's command line. A driver just launched execs several times (env, bash, spark-class, java),
    and while an exec installs the new image its command line reads empty: read again for up to a second."""
    for _ in range(20):
        if text := (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
            return text
        time.sleep(0.05)
    return ""


_N = TypeVar("_N", int, float)


def _int(value: Any) -> int | None:
    """``value`` as an int (a number, or a string of one); None if it is none."""
    return _number(value, int)


def _float(value: Any) -> float | None:
    return _number(value, float)


def _number(value: Any, kind: Callable[[Any], _N]) -> _N | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return kind(value)
    except (TypeError, ValueError):
        return None


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def _ints(value: Any) -> dict[str, int]:
    """``{name: int}`` of a JSON object; entries that are not numbers left out."""
    return {str(k): n for k, v in _mapping(value).items() if (n := _int(v)) is not None}


def _renamed(data: Mapping[str, Any], renames: Mapping[str, str]) -> dict[str, Any]:
    """``data`` with the previous release's names (``renames``: old -> new) under the current ones; a value
    under the current name wins over one under an old name."""
    out = {renames.get(key, key): value for key, value in data.items() if key in renames}
    out.update({key: value for key, value in data.items() if key not in renames})
    return out


#: how a field of a record is read from JSON, by its declared type (the module's annotations are strings)
_READERS: dict[str, Callable[[Any], Any]] = {
    "int | None": _int, "float | None": _float, "str | None": _str, "dict[str, int]": _ints,
}  # fmt: skip


def _fields(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of dataclass ``cls`` that ``data`` holds, each read by its declared type (:data:`_READERS`;
    a field of another type is the caller's), a value that is not of it as None."""
    return {f.name: _READERS[str(f.type)](data.get(f.name)) for f in dataclasses.fields(cls) if str(f.type) in _READERS}


#: names the previous releases wrote for what :class:`BatchCounts`, :class:`JobStatus` and
#: :class:`HistoryEntry` name now (one name per count, rate and duration)
RENAMED = {
    "dead_lettered": "dead_letters",
    "join_results": "output_records",
    "results": "output_records",
    "num_input_rows": "input_records",
    "input_rows_per_second": "input_rps",
    "processed_rows_per_second": "processed_rps",
    "batch_duration_ms": "duration_ms",
}


@dataclass(frozen=True)
class BatchCounts:
    """What one committed batch did, in the one vocabulary of ``status.json``, the history, the metrics and
    the job's ``streamjoin batch {...}`` log line: records in, join results out, dead letters, aggregate
    updates, the state's size, and where its time went (ms)."""

    input_records: int = 0
    output_records: int = 0
    dead_letters: int = 0
    aggregate_updates: int = 0
    state_bytes: int | None = None
    read_ms: int | None = None
    write_ms: int | None = None
    state_ms: int | None = None

    def to_json(self) -> dict[str, int | None]:
        return dataclasses.asdict(self)

    #: the name the job's batch line uses (:mod:`streamjoin.spark.job`)
    as_record = to_json

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BatchCounts:
        """The counts in ``data`` (a status, a history entry, totals, a batch line), old names mapped."""
        data = _renamed(data, RENAMED)
        counts = {name: _int(data.get(name)) or 0 for name in COUNTS}
        return cls(
            **counts, state_bytes=_int(data.get("state_bytes")), read_ms=_int(data.get("read_ms")),
            write_ms=_int(data.get("write_ms")), state_ms=_int(data.get("state_ms")),
        )  # fmt: skip

    def plus(self, other: BatchCounts) -> BatchCounts:
        """The four counts summed (sizes and times are not: they are this batch's)."""
        return BatchCounts(**{name: getattr(self, name) + getattr(other, name) for name in COUNTS})

    def totals_json(self) -> dict[str, int]:
        """The four counts only (``totals`` of the status)."""
        return {name: getattr(self, name) for name in COUNTS}


#: the counts that add up over batches (the status's ``totals``)
COUNTS = ("input_records", "output_records", "dead_letters", "aggregate_updates")


@dataclass(frozen=True)
class JobStatus:
    """The job's heartbeat (``status.json``), written after every committed batch and refreshed while idle
    (:mod:`streamjoin.spark.heartbeat`).

    ``counts`` are the last batch's, ``totals`` the sums over the batches of this query (across restarts);
    ``end_offsets`` (``{topic: {partition: next offset}}``) those of the last committed batch: lag = latest
    topic offsets minus these; ``last_batch_time`` the ISO UTC start of the last batch, ``written_at`` when the
    record was written (epoch s); ``watermarks`` per stream input the event time all its partitions reached,
    ``watermark_ms`` the smallest of them."""

    pipeline: str = ""
    query_id: str | None = None
    run_id: str | None = None
    batch_id: int | None = None
    written_at: float | None = None
    last_batch_time: str | None = None
    pid: int | None = None
    counts: BatchCounts = BatchCounts()
    input_rps: float | None = None
    processed_rps: float | None = None
    duration_ms: int | None = None
    end_offsets: dict[str, dict[str, int]] = field(default_factory=dict)
    watermarks: dict[str, int] = field(default_factory=dict)
    watermark_ms: int | None = None
    totals: BatchCounts = BatchCounts()
    spark_ui: str | None = None

    def to_json(self) -> dict[str, Any]:
        plain = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("counts", "totals")}
        return {**plain, **self.counts.to_json(), "totals": self.totals.totals_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobStatus:
        data = _renamed(data, RENAMED)
        return cls(**{
            **_fields(cls, data), "pipeline": str(data.get("pipeline") or ""), "counts": BatchCounts.from_json(data),
            "end_offsets": {str(t): _ints(parts) for t, parts in _mapping(data.get("end_offsets")).items()},
            "totals": BatchCounts.from_json(_mapping(data.get("totals"))),
        })  # fmt: skip


@dataclass(frozen=True)
class HistoryEntry:
    """One line of ``history.jsonl``: a committed batch (``batch_id`` set), or, while the job is idle, a mark
    that it was (``idle``). ``t``: when it was written (epoch s); ``lag``: records on the inputs the batch's
    plan left for later (None: unknown). Names as in :class:`JobStatus`."""

    t: float
    run_id: str | None = None
    batch_id: int | None = None
    idle: bool = False
    input_records: int = 0
    input_rps: float | None = None
    processed_rps: float | None = None
    duration_ms: int | None = None
    lag: int | None = None
    state_bytes: int | None = None
    dead_letters: int | None = None
    output_records: int | None = None

    def to_json(self) -> dict[str, Any]:
        """Without the fields that are None (and ``idle`` unless set): a line stays short."""
        record = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {k: v for k, v in record.items() if v is not None and (k != "idle" or v)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HistoryEntry | None:
        """None when it has no time (not an entry)."""
        data = _renamed(data, RENAMED)
        t = _float(data.get("t"))
        if t is None:
            return None
        return cls(**{**_fields(cls, data), "t": t, "idle": data.get("idle") is True,
                      "input_records": _int(data.get("input_records")) or 0})  # fmt: skip

    def value(self, name: str) -> float | None:
        """The number in field ``name`` (None: none, or not a number field)."""
        value = getattr(self, name, None)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class DriverRecord:
    """The driver the owner launched (``driver.json``): its pid and process group (a process of this host:
    client mode), when it started (epoch s), its spark-submit log, the name its command line carries (guards
    against a reused pid); a driver on the cluster (cluster deploy mode) has no pid here but the cluster's id
    of it (``driver_id``), the master that runs it and the Spark connection it was submitted through."""

    pid: int | None = None
    pgid: int | None = None
    started_at: float | None = None
    log: str | None = None
    name: str | None = None
    driver_id: str | None = None
    master: str | None = None
    conn_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DriverRecord:
        """A record without ``pgid`` (an earlier release's): the driver led its own process group."""
        record = cls(**_fields(cls, data))
        return record if record.pgid is not None else dataclasses.replace(record, pgid=record.pid)


@dataclass(frozen=True)
class Assessment:
    """What the owner last found: the job's state (a :class:`~streamjoin.core.supervision.State` value, or
    ``failed``), why, the lag per topic, when (epoch s)."""

    state: str
    reason: str
    lag: dict[str, int] = field(default_factory=dict)
    at: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> Assessment | None:
        if not isinstance(data, dict) or data.get("state") is None:
            return None
        reason, at = str(data.get("reason") or ""), _float(data.get("at")) or 0.0
        return cls(str(data["state"]), reason, _ints(data.get("lag")), at)


@dataclass
class SupervisorRecord:
    """The owner's record (``supervisor.json``): when it restarted the driver (epoch s), since when lag is
    above the threshold, when a backing-off restart is due, when it gave up (a crash loop or a terminal
    failure: the job waits for a redeploy), its last assessment, and the :class:`Policy
    <streamjoin.core.supervision.Policy>` it supervises with (its fields; None: a record of a release that
    did not keep it). Mutable: the owner updates it, then saves it (:meth:`PipelineFiles.save_supervisor`)."""

    restarts: list[float] = field(default_factory=list)
    lagging_since: float | None = None
    restart_after: float | None = None
    gave_up_at: float | None = None
    last: Assessment | None = None
    policy: dict[str, float] | None = None

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "last": None if self.last is None else self.last.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SupervisorRecord:
        restarts = data.get("restarts")
        policy = data.get("policy")
        return cls(**{
            **_fields(cls, data), "last": Assessment.from_json(data.get("last")),
            "restarts": [t for r in restarts if (t := _float(r)) is not None] if isinstance(restarts, list) else [],
            "policy": {str(k): f for k, v in policy.items() if (f := _float(v)) is not None}
            if isinstance(policy, dict) else None,
        })  # fmt: skip


@dataclass(frozen=True)
class WatchEvent:
    """What the owner's trigger fires (the payload of its ``TriggerEvent``): the event (a
    :class:`~streamjoin.core.supervision.Event` value), the job's state, why, the lag per topic, since when lag
    is above the threshold, when (epoch s)."""

    event: str
    state: str
    reason: str
    lag: dict[str, int] = field(default_factory=dict)
    lagging_since: float | None = None
    at: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WatchEvent:
        """:raises ValueError: no ``event`` in it"""
        if data.get("event") is None:
            raise ValueError(f"not a watch event: {dict(data)!r}")
        return cls(**{
            **_fields(cls, data), "event": str(data["event"]), "state": str(data.get("state") or ""),
            "reason": str(data.get("reason") or ""), "at": _float(data.get("at")) or 0.0,
        })  # fmt: skip

    @property
    def total_lag(self) -> int:
        return sum(self.lag.values())

    def assessment(self) -> Assessment:
        return Assessment(self.state, self.reason, dict(self.lag), self.at)


@dataclass(frozen=True)
class JobFailure:
    """Why a job's run stopped with an error. ``transient``: a restart from the checkpoint may help (the
    broker was away, a task died); otherwise a person must act first (a refused password, a corrupt
    checkpoint, a second driver on it, a spec that cannot run, a missing output topic or kernel jar). A
    failure in Spark's JVM reaches here as a :class:`~streamjoin.core.errors.JvmError`, its kind decided by
    its Java class (``streamjoin.spark.failures``: the kernel's ``TerminalKernelException`` is terminal). An
    error that is not a :class:`~streamjoin.core.errors.StreamJoinError` is not known to be permanent:
    transient."""

    error: str
    message: str
    transient: bool
    at: float

    @classmethod
    def of(cls, exc: BaseException, at: float | None = None) -> JobFailure:
        transient = exc.transient if isinstance(exc, StreamJoinError) else True
        message = str(exc).strip() or repr(exc)
        return cls(type(exc).__name__, message[:2000], transient, time.time() if at is None else at)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> JobFailure | None:
        """None for a torn or foreign record (a failure is all four fields or none)."""
        try:
            return cls(str(record["error"]), str(record["message"]), bool(record["transient"]), float(record["at"]))
        except (KeyError, TypeError, ValueError):
            return None

    @property
    def exit_code(self) -> int:
        return EXIT_TRANSIENT if self.transient else EXIT_TERMINAL

    def describe(self) -> str:
        return f"{self.error}: {self.message}"


@dataclass(frozen=True)
class PipelineFiles:
    checkpoint: Path

    @property
    def status_path(self) -> Path:
        return self.checkpoint / STATUS_FILE

    def status(self) -> JobStatus | None:
        """The job's last heartbeat (None: no batch committed yet, or not a status record)."""
        record = _read(self.status_path)
        return None if record is None else JobStatus.from_json(record)

    def watermark(self) -> int | None:
        """The stream's event time as the job last reported it (``watermark_ms`` of the status)."""
        status = self.status()
        return None if status is None else status.watermark_ms

    def write_status(self, status: JobStatus) -> None:
        _write(self.status_path, status.to_json())

    @property
    def offset_log(self) -> OffsetLog:
        """The offset log when the checkpoint keeps it here (a spec without ``checkpoint_location``)."""
        return OffsetLog(self.checkpoint / QUERY_DIR)

    @property
    def history(self) -> History:
        """The job's per-batch history (:class:`History`)."""
        return History(self.checkpoint / HISTORY_FILE)

    def driver(self) -> DriverRecord | None:
        """The driver the owner launched last (None: none yet)."""
        record = _read(self.checkpoint / DRIVER_FILE)
        return None if record is None else DriverRecord.from_json(record)

    def record_driver(
        self,
        pid: int | None,
        pgid: int | None,
        log_path: str | None,
        name: str,
        *,
        driver_id: str | None = None,
        master: str | None = None,
        conn_id: str | None = None,
    ) -> DriverRecord:
        """Record the driver just launched (started now)."""
        record = DriverRecord(pid=pid, pgid=pgid, started_at=time.time(), log=log_path, name=name,
                              driver_id=driver_id, master=master, conn_id=conn_id)  # fmt: skip
        _write(self.checkpoint / DRIVER_FILE, record.to_json())
        return record

    def driver_alive(self) -> bool:
        driver = self.driver()
        return driver is not None and driver.pid is not None and pid_alive(driver.pid, driver.name)

    def record_failure(self, failure: JobFailure) -> None:
        self.checkpoint.mkdir(parents=True, exist_ok=True)
        _write(self.checkpoint / FAILURE_FILE, failure.to_json())

    def failure(self) -> JobFailure | None:
        """The failure the job recorded last (of this run or an earlier one: compare ``at`` with the driver's
        ``started_at``)."""
        record = _read(self.checkpoint / FAILURE_FILE)
        return None if record is None else JobFailure.from_json(record)

    def run_failure(self) -> JobFailure | None:
        """The failure recorded by the driver the owner launched last, if it recorded one."""
        failure, driver = self.failure(), self.driver()
        started = None if driver is None else driver.started_at
        return failure if failure is not None and started is not None and failure.at >= started else None

    def supervisor(self) -> SupervisorRecord:
        """The owner's record (an empty one before the owner wrote any)."""
        return SupervisorRecord.from_json(_read(self.checkpoint / SUPERVISOR_FILE) or {})

    def intent(self) -> str:
        """``run`` (the default), ``stop`` or ``redeploy``: see the module's list."""
        try:
            value = (self.checkpoint / INTENT_FILE).read_text().strip()
        except OSError:
            return "run"
        return value if value in INTENTS else "run"

    def set_intent(self, intent: str) -> None:
        if intent not in INTENTS:
            raise ValueError(f"intent {intent!r}: expected one of {', '.join(INTENTS)}")
        write_text_atomic(self.checkpoint / INTENT_FILE, intent)

    def stopped_on_purpose(self) -> bool:
        """Asked to stop (stop DAG) or to stop after the current batch (stop marker)."""
        return self.intent() == "stop" or self.stop_requested()

    def save_supervisor(self, record: SupervisorRecord) -> None:
        _write(self.checkpoint / SUPERVISOR_FILE, record.to_json())

    def request_stop(self) -> None:
        self.checkpoint.mkdir(parents=True, exist_ok=True)
        (self.checkpoint / STOP_FILE).write_text(str(time.time()))

    def stop_requested(self) -> bool:
        return (self.checkpoint / STOP_FILE).exists()

    def clear_stop(self) -> None:
        (self.checkpoint / STOP_FILE).unlink(missing_ok=True)

    def batch_in_progress(self) -> tuple[int, float] | None:
        """(batch id, when it was planned) of the newest batch of the offset log here that is not committed
        yet; None when every planned batch is done or the offset log lives elsewhere (``checkpoint_location``)."""
        query = self.checkpoint / QUERY_DIR
        try:
            planned = max((int(p.name) for p in (query / "offsets").iterdir() if p.name.isdigit()), default=None)
            if planned is None or (query / "commits" / str(planned)).exists():
                return None
            return planned, (query / "offsets" / str(planned)).stat().st_mtime
        except OSError:  # no offset log here, or pruned between the listing and the look
            return None


def parse_history(text: str) -> list[HistoryEntry]:
    """The entries of a history file's text, oldest first; a line that is not a whole JSON object with a time
    (the last one, torn by a crash mid-write) is skipped."""
    entries = []
    for line in text.splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        entry = HistoryEntry.from_json(data) if isinstance(data, dict) else None
        if entry is not None:
            entries.append(entry)
    return entries


def _history_line(entry: HistoryEntry) -> str:
    return json.dumps(entry.to_json(), default=str, separators=(",", ":")) + "\n"


def trim_history(entries: list[HistoryEntry], now: float, keep_seconds: float, max_entries: int) -> list[HistoryEntry]:
    """The entries of the last ``keep_seconds`` before ``now``, at most the newest ``max_entries``."""
    recent = [e for e in entries if now - e.t <= keep_seconds]
    return recent[-max_entries:] if max_entries > 0 else []


class History:
    """The job's per-batch history (``history.jsonl``), bounded to the last ``keep_seconds`` and
    ``max_entries``: appended one line at a time, trimmed (rewritten atomically) every ``trim_every`` appends.

    Each entry is a :class:`HistoryEntry` (what the heartbeat records: :mod:`streamjoin.spark.heartbeat`).
    """

    def __init__(
        self, path: Path, *, keep_seconds: float = 6 * 3600, max_entries: int = 20_000, trim_every: int = 500
    ) -> None:
        self.path = path
        self.keep_seconds, self.max_entries, self.trim_every = keep_seconds, max_entries, trim_every
        self._appended = 0
        self._checked_tail = False

    def read(self, since: float | None = None) -> list[HistoryEntry]:
        """The entries (oldest first), those at or after ``since`` (epoch s) if given."""
        try:
            text = self.path.read_text(errors="replace")
        except OSError:
            return []
        entries = parse_history(text)
        return entries if since is None else [e for e in entries if e.t >= since]

    def append(self, entry: HistoryEntry) -> None:
        """Add ``entry`` as one line; trim the file now and then."""
        line = _history_line(entry)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as out:
            if not self._checked_tail:  # a crash may have torn the last line: start ours on a line of its own
                self._checked_tail = True
                if out.tell() > 0 and not self._ends_with_newline():
                    line = "\n" + line
            out.write(line)
        self._appended += 1
        if (self._appended - 1) % self.trim_every == 0:  # at this process's first append, then every trim_every
            self.trim(entry.t)

    def _ends_with_newline(self) -> bool:
        with self.path.open("rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) == b"\n"

    def trim(self, now: float | None = None) -> None:
        """Keep the last ``keep_seconds`` and ``max_entries`` (a rewrite, atomic, only if something goes)."""
        entries = self.read()
        kept = trim_history(entries, time.time() if now is None else now, self.keep_seconds, self.max_entries)
        if len(kept) < len(entries):
            lines = "".join(_history_line(e) for e in kept)
            write_text_atomic(self.path, lines)


#: The offset log's folder in the checkpoint.
QUERY_DIR = "query"
Offsets = dict[str, dict[int, int]]


class OffsetLog:
    """Which offsets each batch reads, and which batches are done (exactly once across a crash).

    Batch N's entry ``offsets/N`` holds the end offsets it reads up to; it starts where batch N-1 ended.
    The entry is written before the batch runs and never changed, so a batch run again after a crash reads
    the very same records. ``commits/N`` marks it done. Old entries are pruned, the newest ``keep`` kept.
    """

    def __init__(self, root: str | Path, storage: Storage | None = None, keep: int = 100) -> None:
        self.root = str(root)
        self.storage: Storage = storage or LocalStorage()
        self.keep = keep

    def _batches(self, folder: str) -> list[int]:
        return sorted(int(name) for name in self.storage.children(join(self.root, folder)) if name.isdigit())

    def _metadata(self) -> dict[str, Any]:
        path = join(self.root, "metadata")
        text = self.storage.read_text(path)
        if text is None:
            text = json.dumps({"id": str(uuid.uuid4())}) + "\n"
            self.storage.write_text(path, text)
        try:
            data = json.loads(text)
            str(data["id"])
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptCheckpointError(path, f"not a query metadata file ({exc}); move it aside") from exc
        return dict(data)

    def query_id(self) -> str:
        """The id of this checkpoint's query, created on first use."""
        return str(self._metadata()["id"])

    def initial(self) -> Offsets | None:
        """Where batch 0 started (None: not chosen yet)."""
        start = self._metadata().get("start")
        return None if start is None else {t: {int(p): int(o) for p, o in parts.items()} for t, parts in start.items()}

    def set_initial(self, start: Offsets) -> None:
        data = self._metadata() | {"start": {t: {str(p): o for p, o in parts.items()} for t, parts in start.items()}}
        self.storage.write_text(join(self.root, "metadata"), json.dumps(data) + "\n")

    def last_committed(self) -> int | None:
        done = self._batches("commits")
        return done[-1] if done else None

    def planned(self, batch_id: int) -> Offsets | None:
        """The end offsets batch ``batch_id`` reads up to (None: not planned)."""
        path = join(self.root, "offsets", str(batch_id))
        text = self.storage.read_text(path)
        if text is None:
            return None
        try:
            data = json.loads(text.splitlines()[2])
            return {topic: {int(p): int(o) for p, o in parts.items()} for topic, parts in data.items()}
        except (IndexError, ValueError, AttributeError) as exc:
            raise CorruptCheckpointError(path, f"not an offsets entry ({exc}); move the checkpoint aside") from exc

    def plan(self, batch_id: int, ends: Offsets, timestamp_ms: int) -> None:
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": timestamp_ms}
        offsets = {t: {str(p): o for p, o in sorted(parts.items())} for t, parts in sorted(ends.items())}
        entry = f"v1\n{json.dumps(meta)}\n{json.dumps(offsets)}"
        self.storage.write_text(join(self.root, "offsets", str(batch_id)), entry)

    def commit(self, batch_id: int) -> None:
        self.storage.write_text(join(self.root, "commits", str(batch_id)), 'v1\n{"nextBatchWatermarkMs":0}')
        self._prune(batch_id)

    def committed_offsets(self) -> Offsets | None:
        """The end offsets of the newest committed batch (where the next one starts)."""
        for batch in reversed(self._batches("commits")):
            planned = self.planned(batch)
            if planned is not None:
                return planned
        return None

    def _prune(self, newest: int) -> None:
        for folder in ("offsets", "commits"):
            for batch in self._batches(folder):
                if batch <= newest - self.keep:
                    self.storage.delete(join(self.root, folder, str(batch)))


def _dead_here(owner: str) -> bool:
    """The lease's holder was a process on this host that is gone (killed): no need to wait for expiry."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    return host == socket.gethostname() and pid.isdigit() and not pid_alive(int(pid))


class Lease:
    """The checkpoint's lease: one driver at a time runs batches on a checkpoint, whatever launched it.

    :meth:`acquire` creates ``lease.json`` atomically (:meth:`Storage.create_new`: of two drivers starting
    at once, one wins) or takes over a lease whose driver died without releasing it (at once when that
    driver was a process of this host, else once the lease expired); the holder renews it
    (:meth:`renew`) well before it expires and checks that it still holds it before committing a batch
    (:attr:`held`); :meth:`release` removes it on a clean stop.
    """

    def __init__(self, checkpoint: str | Path, storage: Storage | None = None, *, ttl: float = 30.0) -> None:
        self.path = join(str(checkpoint), LEASE_FILE)
        self.storage: Storage = storage or LocalStorage()
        self.ttl = ttl
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.held = False

    def _record(self) -> str:
        return json.dumps({"owner": self.owner, "expires_at": time.time() + self.ttl})

    def _current(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.storage.read_text(self.path) or "null")
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def _refuse_unless_mine(self, current: dict[str, Any] | None) -> None:
        if current is None or current.get("owner") == self.owner:
            return
        owner = str(current.get("owner"))
        expires_in = float(current.get("expires_at", 0)) - time.time()
        if expires_in > 0 and not _dead_here(owner):
            raise CheckpointLockedError(self.path, owner, expires_in)

    def acquire(self, settle: float = 0.5) -> None:
        """Hold the lease or raise :class:`CheckpointLockedError` naming its holder."""
        if not self.storage.create_new(self.path, self._record()):
            self._refuse_unless_mine(self._current())
            self.storage.write_text(self.path, self._record())  # the holder's lease expired: take it over
        time.sleep(settle)  # two takeovers of one expired lease: the last write wins, the other sees it here
        self._refuse_unless_mine(self._current())
        self.held = True

    def renew(self) -> None:
        """Extend the lease; if another driver took it over, :attr:`held` turns false."""
        current = self._current()
        if current is not None and current.get("owner") != self.owner:
            self.held = False
            return
        self.storage.write_text(self.path, self._record())

    def release(self) -> None:
        if self.held and (self._current() or {}).get("owner") == self.owner:
            self.storage.delete(self.path)
        self.held = False
