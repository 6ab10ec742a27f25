"""A truncated, corrupt or missing state version stops the streaming job before its first batch, with a
message naming the file: it never starts over from an empty (or an older) state. These are the checks of
streamjoin's own state store (a version's manifest), so the pipeline runs on the DataFrame engine
(``STREAMJOIN_ENGINE=dataframe``): a join on the kernel keeps its state, and its aggregate's, in Spark's state
store, whose committed files the manifest lists (``test_hdfs_checkpoints``)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from streamjoin.core.errors import CorruptCheckpointError
from streamjoin.core.job_files import PipelineFiles
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.spec import load_spec
from streamjoin.demo.sample import demo_records
from streamjoin.spark.engine import process_batch, state_schemas
from streamjoin.spark.job import JobSettings, StreamJob
from streamjoin.spark.kernel import ENGINE_ENV, runs_on_kernel
from streamjoin.spark.replay import raw_frame

#: a foreign-key join: its tables are parquet datasets in each state version
SPEC = load_spec(PROJECT_HOME / "include/pipelines/orders_products.yaml")
pytestmark = pytest.mark.spark


def _refusal(spark: Any, checkpoint: Path) -> str:
    """The error of a job starting on ``checkpoint`` (Kafka is not asked: the check comes first)."""
    with pytest.raises(CorruptCheckpointError) as refused:
        StreamJob(spark, SPEC, JobSettings(bootstrap="127.0.0.1:1", checkpoint_dir=str(checkpoint)))
    return str(refused.value)


def test_a_damaged_state_version_stops_the_job_naming_the_file(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENGINE_ENV, "dataframe")
    assert not runs_on_kernel(SPEC) and "left_table" in state_schemas(SPEC)
    checkpoint = tmp_path / "ck"
    job = StreamJob(spark, SPEC, JobSettings(bootstrap="127.0.0.1:1", checkpoint_dir=str(checkpoint)))
    rows = [{"topic": r.topic, "key": r.key, "value": r.value, "ts": 10_000 + r.offset_ms} for r in demo_records(SPEC)]
    raw = raw_frame(spark, SPEC, rows, batch=True)
    store, log = job.writer.store, PipelineFiles(checkpoint).offset_log
    for batch_id, (lo, hi) in enumerate([(0, 20_000), (20_000, 10**9)]):  # two committed batches
        part = raw.filter((raw.ts - 10_000 >= lo) & (raw.ts - 10_000 < hi))
        store.save(batch_id, process_batch(part, SPEC, store.load(spark, batch_id, state_schemas(SPEC))).state)
        log.plan(batch_id, {}, 0)
        log.commit(batch_id)
    StreamJob(spark, SPEC, JobSettings(bootstrap="127.0.0.1:1", checkpoint_dir=str(checkpoint)))  # intact: starts

    version = checkpoint / "state" / "v=1"
    parquet = sorted(p for p in version.rglob("*.parquet") if p.stat().st_size > 0)[0]
    saved = parquet.read_bytes()
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
