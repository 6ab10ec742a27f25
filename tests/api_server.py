"""A real Airflow api-server in a subprocess, for the tests of the plugin's routes (page, auth, metrics)."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from streamjoin.core.plans import PROJECT_HOME
from streamjoin.localdev.spark_cluster import free_port


def start_api_server(env: dict[str, str], log_dir: Path, procs: list[subprocess.Popen[bytes]]) -> tuple[str, Path]:
    """Start ``airflow api-server`` on a free loopback port with ``env`` (appended to ``procs``, for
    :func:`stop_api_servers`); returns its base URL and log once ``/api/v2/monitor/health`` answers 200.

    :raises AssertionError: it exited or did not answer within 120 s (with the log's tail)
    """
    port = free_port()
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
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
