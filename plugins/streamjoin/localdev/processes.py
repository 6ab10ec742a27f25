"""What the local services (the Kafka broker, the schema registry) share: their JVM found by its pid file,
stopped with SIGTERM then SIGKILL, a port probe, the tail of their logs and their ``start|stop|status`` CLI."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
from collections import deque
from pathlib import Path
from typing import Protocol

LOG_TAIL_LINES = 30


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts connections on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a text file, or a note that it does not exist."""
    if not path.exists():
        return f"<{path} does not exist>"
    with path.open(errors="replace") as handle:
        return "".join(deque(handle, maxlen=lines)).rstrip() or f"<{path} is empty>"


def live_pid(pid_file: Path, *markers: bytes) -> int | None:
    """The pid in ``pid_file`` if that process is alive, not a zombie, and its command line holds every one of
    ``markers`` (a reused pid is not ours); None otherwise. Without /proc: any live process with that pid."""
    try:
        pid = int(pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[-1]
    except FileNotFoundError:
        return None
    except OSError:  # no /proc: fall back to "a process with this pid exists"
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        return pid
    if all(marker in cmdline for marker in markers) and not state.startswith("Z"):
        return pid
    return None


def stop_pid(pid_file: Path, *markers: bytes, timeout: float) -> bool:
    """SIGTERM the process of :func:`live_pid`, SIGKILL it if it is still alive after ``timeout`` seconds, and
    remove ``pid_file``; ``True`` if it was running."""
    pid = live_pid(pid_file, *markers)
    if pid is None:
        pid_file.unlink(missing_ok=True)
        return False
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while live_pid(pid_file, *markers) is not None and time.monotonic() < deadline:
            reap(pid)
            time.sleep(0.1)
        if live_pid(pid_file, *markers) is None:
            break
    reap(pid)
    pid_file.unlink(missing_ok=True)
    return True


def reap(pid: int) -> None:
    """Collect the exit status if the process is our child, so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


class LocalService(Protocol):
    """A local service as its CLI drives it."""

    @property
    def log_file(self) -> Path: ...

    def start(self, timeout: float) -> bool: ...

    def stop(self, timeout: float) -> bool: ...

    def status(self) -> str: ...

    def is_running(self) -> bool: ...


def run_command(
    service: LocalService, command: str, timeout: float, name: str, address: str, errors: tuple[type[Exception], ...]
) -> int:
    """A CLI's ``start``, ``stop`` or ``status`` of ``service`` (``name`` and ``address`` for its lines): exit 0,
    3 for ``status`` of a stopped service, 1 with the error on stderr for one of ``errors``."""
    try:
        if command == "start":
            started = time.monotonic()
            if service.start(timeout):
                print(f"{name} started in {time.monotonic() - started:.1f} s: {address}")
            else:
                print(f"{name} already running: {address}")
            print(f"log: {service.log_file}")
        elif command == "stop":
            print(f"{name} stopped: {address}" if service.stop(timeout) else f"{name} not running")
        else:
            print(service.status())
            return 0 if service.is_running() else 3
    except errors as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
