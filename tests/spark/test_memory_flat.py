"""The driver's heap over many tiny batches: 200 one-record batches of a versioned stream-table join with
grace, in a fresh JVM with Spark's default 1 GiB driver heap (``bench/memory_flat.py``; 500 there, and the
30-minute streaming run of ``bench/memory_stream.py``: README, Performance; 200 here keeps CI's cost at a
third). The DataFrame engine of earlier releases
filled that heap on this run ("Not enough memory to build and broadcast the table", then full GCs back to
back); the kernel keeps its state in RocksDB, off the heap."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark
HOME = Path(__file__).resolve().parents[2]


def test_200_one_record_batches_in_a_1_gib_driver_keep_the_old_generation_small_and_the_output_exact() -> None:
    run = subprocess.run(
        [sys.executable, str(HOME / "bench" / "memory_flat.py"), "--records", "200"],
        capture_output=True, text=True, timeout=1800, cwd=HOME,
    )  # fmt: skip
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no report (exit {run.returncode}):\n{run.stderr[-3000:]}"
    report = json.loads(lines[-1])
    assert report["batches"] == 200 and report["same_as_reference"], report
    assert run.returncode == 0
    assert report["heap_max"] <= 1 << 30, report  # Spark's default driver heap, not the tests' 3 GiB
    # after a full GC, what the batches left behind: a small part of the heap, however many batches ran
    assert report["old_gen_end"] < report["heap_max"] // 4, report
