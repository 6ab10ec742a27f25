"""A truncated, corrupt or missing state file stops the streaming job before its first batch, with a message
naming the file: it never starts over from an empty (or an older) state. The files are those of the kernel's
stores in Spark's state store (the FK join's two stages), which each batch's manifest lists with their sizes
and checksums."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from streamjoin.core.errors import CorruptCheckpointError
from streamjoin.core.job_files import PipelineFiles
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.spec import load_spec
from streamjoin.demo.sample import demo_records
from streamjoin.spark.engine import process_batch
from streamjoin.spark.job import JobSettings, StreamJob
from streamjoin.spark.kernel import unload
from streamjoin.spark.replay import raw_frame

#: a foreign-key join: a store per stage
SPEC = load_spec(PROJECT_HOME / "include/pipelines/orders_products.yaml")
pytestmark = pytest.mark.spark


def _refusal(spark: Any, checkpoint: Path) -> str:
    """The error of a job starting on ``checkpoint`` (Kafka is not asked: the check comes first)."""
    with pytest.raises(CorruptCheckpointError) as refused:
        StreamJob(spark, SPEC, JobSettings(bootstrap="127.0.0.1:1", checkpoint_dir=str(checkpoint)))
    return str(refused.value)


def test_a_damaged_state_version_stops_the_job_naming_the_file(spark: Any, tmp_path: Path) -> None:
    checkpoint = tmp_path / "ck"
    job = StreamJob(spark, SPEC, JobSettings(bootstrap="127.0.0.1:1", checkpoint_dir=str(checkpoint)))
    rows = [{"topic": r.topic, "key": r.key, "value": r.value, "ts": 10_000 + r.offset_ms} for r in demo_records(SPEC)]
    raw = raw_frame(spark, SPEC, rows, batch=True)
    store, log = job.writer.store, PipelineFiles(checkpoint).offset_log
    middle = sorted(row["ts"] for row in rows)[len(rows) // 2]
    for batch_id, (lo, hi) in enumerate([(0, middle), (middle, 10**15)]):  # two committed batches
        part = raw.filter((raw.ts >= lo) & (raw.ts < hi))
        out = process_batch(part, SPEC, store.load(batch_id))
        out.results.count()  # the batch's job: its tasks commit their stores
        store.save(batch_id, out.commit)
        out.release()
        log.plan(batch_id, {}, 0)
        log.commit(batch_id)
    StreamJob(spark, SPEC, JobSettings(bootstrap="127.0.0.1:1", checkpoint_dir=str(checkpoint)))  # intact: starts

    unload(spark, str(checkpoint / "state" / "kernel"), SPEC.kafka.partitions)
    version = checkpoint / "state" / "v=1"
    listed = json.loads((version / "_COMMITTED").read_text())["files"]
    assert any("/foreign/" in path for path in listed), "the second stage's store is listed"
    parquet = max((checkpoint / "state" / path for path in listed), key=lambda p: p.stat().st_size)  # batch 1's
    saved = parquet.read_bytes()
    assert len(saved) > 101
    parquet.write_bytes(saved[: len(saved) // 2])  # truncated
    message = _refusal(spark, checkpoint)
    assert str(parquet) in message and "truncated" in message, message

    parquet.write_bytes(saved[:100] + bytes([saved[100] ^ 0xFF]) + saved[101:])  # one byte flipped, same size
    message = _refusal(spark, checkpoint)
    assert str(parquet) in message and "corrupt" in message, message

    parquet.unlink()
    message = _refusal(spark, checkpoint)
    assert str(parquet) in message and "missing" in message, message

    shutil.rmtree(version)  # batch 1 committed, its state gone: refuse rather than start from batch 0's
    message = _refusal(spark, checkpoint)
    assert "v=1" in message and "batch 1 is committed" in message, message
    shutil.rmtree(checkpoint / "state")  # no state at all: refuse rather than start from empty
    assert "batch 1 is committed" in _refusal(spark, checkpoint)
