"""Where supervision state lives, readable without Spark or the Airflow DB.

Per pipeline, next to its checkpoint ``var/checkpoints/<name>/``: ``status.json`` (the job's heartbeat,
see :mod:`streamjoin.spark.heartbeat`), ``stop`` (stop marker), ``driver.json`` (pid, process group,
start time, spark-submit log of the launched driver) and ``supervisor.json`` (restart times, since when
lag is above the threshold, last assessment).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STATUS_FILE = "status.json"
STOP_FILE = "stop"
DRIVER_FILE = "driver.json"
SUPERVISOR_FILE = "supervisor.json"


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(json.dumps(record, default=str, indent=1))
    partial.replace(path)


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
class PipelineFiles:
    checkpoint: Path

    @property
    def status_path(self) -> Path:
        return self.checkpoint / STATUS_FILE

    def status(self) -> dict[str, Any] | None:
        return _read(self.status_path)

    def driver(self) -> dict[str, Any] | None:
        return _read(self.checkpoint / DRIVER_FILE)

    def record_driver(self, pid: int, pgid: int, log_path: str, name: str) -> dict[str, Any]:
        record = {"pid": pid, "pgid": pgid, "started_at": time.time(), "log": log_path, "name": name}
        _write(self.checkpoint / DRIVER_FILE, record)
        return record

    def driver_alive(self) -> bool:
        driver = self.driver()
        return driver is not None and pid_alive(int(driver["pid"]), driver.get("name"))

    def supervisor(self) -> dict[str, Any]:
        return _read(self.checkpoint / SUPERVISOR_FILE) or {"restarts": [], "lagging_since": None}

    def save_supervisor(self, record: dict[str, Any]) -> None:
        _write(self.checkpoint / SUPERVISOR_FILE, record)

    def request_stop(self) -> None:
        self.checkpoint.mkdir(parents=True, exist_ok=True)
        (self.checkpoint / STOP_FILE).write_text(str(time.time()))

    def stop_requested(self) -> bool:
        return (self.checkpoint / STOP_FILE).exists()

    def clear_stop(self) -> None:
        (self.checkpoint / STOP_FILE).unlink(missing_ok=True)
