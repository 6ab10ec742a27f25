"""The files the streaming job and Airflow exchange, in one place: readable without Spark or the Airflow DB.

Per pipeline, in its checkpoint folder ``var/checkpoints/<name>/``:

* ``status.json``: the job's heartbeat after every batch (see :mod:`streamjoin.spark.heartbeat`);
* ``history.jsonl``: one JSON line per committed batch (and one per minute while idle), the last hours of
  them (:class:`History`): what the status page plots;
* ``stop``: the stop marker, honoured by the job between batches;
* ``driver.json``: pid, process group, start time and spark-submit log of the launched driver;
* ``supervisor.json``: the owner's record: restart times, lag alerts, last assessment, whether it gave up;
* ``intent``: what the pipeline's owner is asked to do: ``run``, ``stop`` (stay stopped), ``redeploy``
  (start again once stopped), written by the stop/redeploy DAG, read by the owner's trigger;
* ``failure.json``: why the job's last run stopped with an error (:class:`JobFailure`: the error, its message,
  whether a restart can help), written by the job as it exits, read by the owner (restart or alert);
* ``lease.json``: who runs the job on this checkpoint (:class:`Lease`): a second driver refuses to start;
* ``query/``: the job's offset log (:class:`OffsetLog`): ``metadata`` (the query id), ``offsets/N`` (the end
  offsets batch N reads up to, written before it runs) and ``commits/N`` (written once its outputs and state
  are). The layout and the text of the entries are Spark's own, so tools that read Spark checkpoints read it.

Every write goes to a temporary file first and is renamed over the target: a reader never sees half of it.
The history is appended to (one ``write`` per line, by the one driver holding the lease) and rewritten
atomically when trimmed; its reader skips a line a crash tore.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
            return must_contain in (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return proc.exists() if must_contain is None else False
    return True


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

    def as_record(self) -> dict[str, int | None]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class JobFailure:
    """Why a job's run stopped with an error. ``transient``: a restart from the checkpoint may help (the
    broker was away, a task died); otherwise a person must act first (a refused password, a corrupt
    checkpoint, a second driver on it, a spec that cannot run). An error that is not a
    :class:`~streamjoin.core.errors.StreamJoinError` is not known to be permanent: transient."""

    error: str
    message: str
    transient: bool
    at: float

    @classmethod
    def of(cls, exc: BaseException, at: float | None = None) -> JobFailure:
        transient = exc.transient if isinstance(exc, StreamJoinError) else True
        message = str(exc).strip() or repr(exc)
        return cls(type(exc).__name__, message[:2000], transient, time.time() if at is None else at)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> JobFailure | None:
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

    def status(self) -> dict[str, Any] | None:
        return _read(self.status_path)

    def watermark(self) -> int | None:
        """The stream's event time as the job last reported it (``watermark_ms`` of the status)."""
        value = (self.status() or {}).get("watermark_ms")
        return None if value is None else int(value)

    def write_status(self, record: dict[str, Any]) -> None:
        _write(self.status_path, record)

    @property
    def offset_log(self) -> OffsetLog:
        """The offset log when the checkpoint keeps it here (a spec without ``checkpoint_location``)."""
        return OffsetLog(self.checkpoint / QUERY_DIR)

    @property
    def history(self) -> History:
        """The job's per-batch history (:class:`History`)."""
        return History(self.checkpoint / HISTORY_FILE)

    def driver(self) -> dict[str, Any] | None:
        return _read(self.checkpoint / DRIVER_FILE)

    def record_driver(self, pid: int, pgid: int, log_path: str, name: str) -> dict[str, Any]:
        record = {"pid": pid, "pgid": pgid, "started_at": time.time(), "log": log_path, "name": name}
        _write(self.checkpoint / DRIVER_FILE, record)
        return record

    def driver_alive(self) -> bool:
        driver = self.driver()
        return driver is not None and pid_alive(int(driver["pid"]), driver.get("name"))

    def record_failure(self, failure: JobFailure) -> None:
        self.checkpoint.mkdir(parents=True, exist_ok=True)
        _write(self.checkpoint / FAILURE_FILE, dataclasses.asdict(failure))

    def failure(self) -> JobFailure | None:
        """The failure the job recorded last (of this run or an earlier one: compare ``at`` with the driver's
        ``started_at``)."""
        record = _read(self.checkpoint / FAILURE_FILE)
        return None if record is None else JobFailure.from_record(record)

    def run_failure(self) -> JobFailure | None:
        """The failure recorded by the driver the owner launched last, if it recorded one."""
        failure, started = self.failure(), (self.driver() or {}).get("started_at")
        return failure if failure is not None and started is not None and failure.at >= float(started) else None

    def supervisor(self) -> dict[str, Any]:
        return _read(self.checkpoint / SUPERVISOR_FILE) or {"restarts": [], "lagging_since": None}

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

    def save_supervisor(self, record: dict[str, Any]) -> None:
        _write(self.checkpoint / SUPERVISOR_FILE, record)

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


def parse_history(text: str) -> list[dict[str, Any]]:
    """The entries of a history file's text, oldest first; a line that is not a whole JSON object (the last
    one, torn by a crash mid-write) is skipped."""
    entries = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("t"), int | float):
            entries.append(entry)
    return entries


def trim_history(
    entries: list[dict[str, Any]], now: float, keep_seconds: float, max_entries: int
) -> list[dict[str, Any]]:
    """The entries of the last ``keep_seconds`` before ``now``, at most the newest ``max_entries``."""
    recent = [e for e in entries if now - float(e["t"]) <= keep_seconds]
    return recent[-max_entries:] if max_entries > 0 else []


class History:
    """The job's per-batch history (``history.jsonl``), bounded to the last ``keep_seconds`` and
    ``max_entries``: appended one line at a time, trimmed (rewritten atomically) every ``trim_every`` appends.

    Each entry has ``t`` (epoch s) and what the heartbeat records (:mod:`streamjoin.spark.heartbeat`).
    """

    def __init__(
        self, path: Path, *, keep_seconds: float = 6 * 3600, max_entries: int = 20_000, trim_every: int = 500
    ) -> None:
        self.path = path
        self.keep_seconds, self.max_entries, self.trim_every = keep_seconds, max_entries, trim_every
        self._appended = 0
        self._checked_tail = False

    def read(self, since: float | None = None) -> list[dict[str, Any]]:
        """The entries (oldest first), those at or after ``since`` (epoch s) if given."""
        try:
            text = self.path.read_text(errors="replace")
        except OSError:
            return []
        entries = parse_history(text)
        return entries if since is None else [e for e in entries if float(e["t"]) >= since]

    def append(self, entry: dict[str, Any]) -> None:
        """Add ``entry`` (``t`` is set to now if missing) as one line; trim the file now and then."""
        entry = {"t": round(time.time(), 3), **entry}
        line = json.dumps(entry, default=str, separators=(",", ":")) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as out:
            if not self._checked_tail:  # a crash may have torn the last line: start ours on a line of its own
                self._checked_tail = True
                if out.tell() > 0 and not self._ends_with_newline():
                    line = "\n" + line
            out.write(line)
        self._appended += 1
        if (self._appended - 1) % self.trim_every == 0:  # at this process's first append, then every trim_every
            self.trim(float(entry["t"]))

    def _ends_with_newline(self) -> bool:
        with self.path.open("rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) == b"\n"

    def trim(self, now: float | None = None) -> None:
        """Keep the last ``keep_seconds`` and ``max_entries`` (a rewrite, atomic, only if something goes)."""
        entries = self.read()
        kept = trim_history(entries, time.time() if now is None else now, self.keep_seconds, self.max_entries)
        if len(kept) < len(entries):
            lines = "".join(json.dumps(e, default=str, separators=(",", ":")) + "\n" for e in kept)
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
