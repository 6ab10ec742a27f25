"""A real Airflow api-server in a subprocess, for the tests of the plugin's routes (page, auth, metrics,
actions): :func:`start_api_server`, its metadata DB a copy of the test DB (:func:`copy_test_db`), users with
passwords and a client (:class:`ApiServer`)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from streamjoin.core.plans import PROJECT_HOME
from streamjoin.localdev.spark_cluster import free_port

#: the test Airflow DB that scripts/test.sh migrates; each api-server of a test gets a copy of it
TEST_AIRFLOW_DB = PROJECT_HOME / "var" / "test-airflow" / "airflow.db"


def copy_test_db(home: Path) -> Path:
    """A consistent copy of :data:`TEST_AIRFLOW_DB` as ``home/airflow.db`` (even while other tests write it)."""
    assert TEST_AIRFLOW_DB.exists(), f"{TEST_AIRFLOW_DB} is missing: scripts/test.sh migrates it"
    source = sqlite3.connect(f"file:{TEST_AIRFLOW_DB}?mode=ro", uri=True)
    target = sqlite3.connect(home / "airflow.db")
    source.backup(target)
    source.close()
    target.close()
    return home / "airflow.db"


def tracebacks(log: Path, home: Path = PROJECT_HOME) -> tuple[list[str], list[str]]:
    """The tracebacks in an api-server's log, each as its lines up to the exception's: (those with a frame in
    the project's code under ``home``, the rest). The rest is Airflow's own (say SQLite's "database is locked"
    while a scheduler writes), not a defect of the plugin's routes. A frame is matched by its file's path, not
    by the word "streamjoin": a clone named so holds the venv, and so every one of Airflow's frames, too."""
    roots = {str(path) for path in (home, home.resolve())}
    ours_marks = tuple(f'File "{root}/{part}/' for root in roots for part in ("plugins", "dags", "jobs"))
    ours: list[str] = []
    others: list[str] = []
    block: list[str] | None = None
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("Traceback (most recent call last)"):
            block = [line]
        elif block is not None:
            block.append(line)
            if line and not line.startswith((" ", "\t", "Traceback", "During handling", "The above exception")):
                text = "\n".join(block)
                (ours if any(mark in text for mark in ours_marks) else others).append(text)
                block = None
    return ours, others


@dataclass
class ApiServer:
    """A running api-server: its URL, users' passwords and log."""

    url: str
    passwords: dict[str, str]
    log: Path
    _tokens: dict[str, str] = field(default_factory=dict)

    def token(self, user: str) -> str:
        if user not in self._tokens:
            body = json.dumps({"username": user, "password": self.passwords[user]}).encode()
            request = urllib.request.Request(
                f"{self.url}/auth/token", body, {"Content-Type": "application/json"}, method="POST"
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                self._tokens[user] = json.loads(response.read())["access_token"]
        return self._tokens[user]

    def get(self, path: str, user: str | None = None) -> tuple[int, str]:
        """(status, body) of ``GET path`` as ``user`` (a bearer token), or anonymously."""
        return self.request("GET", path, user)

    def request(
        self,
        method: str,
        path: str,
        user: str | None = None,
        form: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        json_body: object | None = None,
    ) -> tuple[int, str]:
        """(status, body) of a request as ``user`` (a bearer token) or anonymously, with a form or JSON body."""
        all_headers = {"Authorization": f"Bearer {self.token(user)}"} if user else {}
        data = None
        if form is not None:
            data = urllib.parse.urlencode(form).encode()
            all_headers["Content-Type"] = "application/x-www-form-urlencoded"
        if json_body is not None:
            data = json.dumps(json_body).encode()
            all_headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.url + path, data, {**all_headers, **(headers or {})}, method=method)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()


def start_api_server(
    env: dict[str, str], log_dir: Path, procs: list[subprocess.Popen[bytes]], port: int | None = None
) -> tuple[str, Path]:
    """Start ``airflow api-server`` on ``port`` (default: a free loopback port) with ``env`` (appended to
    ``procs``, for :func:`stop_api_servers`); returns its base URL and log once ``/api/v2/monitor/health``
    answers 200. (A caller that sets ``[api] base_url`` picks the port first.)

    :raises AssertionError: it exited or did not answer within 120 s (with the log's tail)
    """
    port = port or free_port()
    log = log_dir / f"api-server-{port}.log"
    with log.open("wb") as out:
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "airflow", "api-server", "-H", "127.0.0.1", "-p", str(port), "-w", "1"],
            env=env, stdout=out, stderr=subprocess.STDOUT, cwd=PROJECT_HOME, start_new_session=True,
        ))  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/v2/monitor/health", timeout=2) as response:
                if response.status == 200:
                    return url, log
        except OSError:
            pass
        if procs[-1].poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"the api-server did not start:\n{log.read_text()[-3000:]}")
        time.sleep(1)


def stop_api_servers(procs: list[subprocess.Popen[bytes]]) -> None:
    """Stop each process and what it started (its session's process group: a scheduler's workers too)."""
    for proc in procs:
        _signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            proc.wait(10)


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # started with start_new_session: the group is its own
        os.killpg(proc.pid, sig)
