"""One JVM for many test cases: the cases go to a Java ``main`` as one JSON file, the results come back as another
(the Kafka Streams oracle and the kernel's rules without Spark both run this way)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any


def java() -> str:
    """The JDK's ``java`` (``JAVA_HOME`` first)."""
    home = os.environ.get("JAVA_HOME")
    found = Path(home, "bin", "java") if home else None
    command = str(found) if found is not None and found.exists() else shutil.which("java")
    if command is None:
        raise RuntimeError("no java: install a JDK 17 or set JAVA_HOME")
    return command


def run_cases(
    what: str, classpath: list[str], main_class: str, cases: list[dict[str, Any]], *, timeout_s: float,
    error: type[Exception], jvm_options: tuple[str, ...] = (),
) -> list[dict[str, Any]]:  # fmt: skip
    """``main_class cases.json results.json`` over ``cases``; its ``results``, one per case.

    :raises error: the JVM did not finish in ``timeout_s``, failed, or answered another number of cases; the
        message names ``what`` ran and shows the JVM's last words.
    """
    with tempfile.TemporaryDirectory(prefix="jvm-cases-") as tmp:
        cases_file, results_file = Path(tmp, "cases.json"), Path(tmp, "results.json")
        cases_file.write_text(json.dumps({"cases": cases}))
        # C1 only: C2 compiles cost more than they save on a run this short
        command = [java(), "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *jvm_options, "-cp",
                   os.pathsep.join(classpath), main_class, str(cases_file), str(results_file)]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise error(f"{what} did not finish {len(cases)} cases in {timeout_s:g} s") from None
        if done.returncode != 0:
            raise error(f"{what} exited {done.returncode}:\n{done.stderr[-4000:]}")
        results: list[dict[str, Any]] = json.loads(results_file.read_text())["results"]
    if len(results) != len(cases):
        raise error(f"{what} answered {len(results)} of {len(cases)} cases")
    return results
