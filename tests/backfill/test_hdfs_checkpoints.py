"""The seed pipeline with its offsets, lease, state and files on a real HDFS (Hadoop's MiniDFSCluster on
loopback): a crash between a batch's outputs and its commit, a restart from the HDFS checkpoint, the same
answer as without the crash, a reprocessed day published on HDFS equal to the stream's output for the day,
and a damaged state file on HDFS refused by name."""

from __future__ import annotations

import json
import socket
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from backfill_data import DAY, day_events, write_seed_spec

from exactly_once import assert_each_once, bag, bag_difference, file_coordinates, input_coordinates
from job_crash import Crash, crashing_job
from streamjoin.core.backfill import plan_day
from streamjoin.core.errors import CorruptCheckpointError
from streamjoin.core.spec import PipelineSpec, load_spec
from streamjoin.localdev.hdfs import MiniHdfs

pytestmark = [pytest.mark.spark]
COLUMNS = ["key", "value", "ts", "matched", "src_topic", "src_partition", "src_offset"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def hdfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with MiniHdfs(tmp_path_factory.mktemp("minihdfs"), _free_port()) as cluster:
        yield cluster.uri


def _hdfs_spec(home: Path, hdfs: str) -> PipelineSpec:
    suffix = uuid.uuid4().hex[:8]
    path = write_seed_spec(home, lambda base: f"{base}-{suffix}", name=f"hdfs_{suffix}")
    data = yaml.safe_load(path.read_text())
    root = f"{hdfs}/streamjoin/{data['name']}"
    data["checkpoint_location"] = f"{root}/checkpoint"
    data["output"]["files"]["path"] = f"{root}/output/enriched"
    data["aggregate"]["output"]["files"]["path"] = f"{root}/output/per_region"
    data["trigger"] = {"processing_time": 0, "max_offsets_per_trigger": 150}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_spec(path)


def _rows(spark: Any, path: str) -> Counter[tuple]:
    return bag(spark.read.parquet(path).select(*COLUMNS).collect())


@pytest.mark.kafka
def test_checkpoint_state_and_files_on_hdfs_survive_a_crash_and_reprocess_equals_the_stream(
    spark: Any, kafka_broker: Any, tmp_path: Path, hdfs: str
) -> None:
    from streamjoin.kafka.admin import ensure_topics
    from streamjoin.kafka.clients import produce_records
    from streamjoin.kafka.topics import plan_topics
    from streamjoin.spark.hadoop_storage import HadoopStorage
    from streamjoin.spark.job import JobSettings, StreamJob
    from streamjoin.spark.reprocess import reprocess_day

    spec = _hdfs_spec(tmp_path, hdfs)
    assert spec.checkpoint_location and spec.output.files and spec.aggregate and spec.aggregate.output.files
    bootstrap = kafka_broker.bootstrap
    ensure_topics({"bootstrap.servers": bootstrap}, plan_topics(spec))
    phase1, phase2 = day_events(spec)
    produce_records(bootstrap, phase1 + phase2)
    settings = JobSettings(bootstrap, str(tmp_path / "job-files"), available_now=True, home=str(tmp_path))

    with pytest.raises(Crash):  # after batch 2's outputs and state are written, before its commit
        crashing_job(2)(spark, spec, settings).run()
    storage = HadoopStorage(spark, spec.checkpoint_location)
    checkpoint = spec.checkpoint_location
    assert storage.children(f"{checkpoint}/query/commits") == ["0", "1"]
    assert "lease.json" not in storage.children(checkpoint)  # released when the driver stopped
    ran = StreamJob(spark, spec, settings).run()
    commits = sorted(int(n) for n in storage.children(f"{checkpoint}/query/commits"))
    assert commits == list(range(commits[-1] + 1)) and commits[-1] == ran + 1  # batch 2 ran again, then the rest
    # nothing of the checkpoint on the local disk: only the files Airflow reads (status)
    assert not {"query", "state", "lease.json"} & {p.name for p in (tmp_path / "job-files").iterdir()}
    versions = [v for v in storage.children(f"{checkpoint}/state") if v.startswith("v=")]
    assert len(versions) == 3 and all(storage.exists(f"{checkpoint}/state/{v}/_COMMITTED") for v in versions)

    # the stream's files on HDFS: every click once (batch 2 rewritten, not added twice) ...
    clicks = sum(1 for r in phase1 + phase2 if r[0] == spec.left.topic)
    inputs = input_coordinates(bootstrap, spec.left.topic, clicks)
    assert_each_once(file_coordinates(spark, f"{spec.output.files.path}/stream"), inputs, "the stream's files on HDFS")
    day_rows: Counter[tuple] = Counter()
    for batch in storage.children(f"{spec.output.files.path}/stream"):
        part = f"{spec.output.files.path}/stream/{batch}/date={DAY.isoformat()}"
        if storage.exists(part):
            day_rows += _rows(spark, part)
    assert day_rows.total() > 300

    # ... and the reprocessed day published on HDFS equals them, in place on a re-run
    plan = plan_day(spec, DAY)
    first = reprocess_day(spark, spec, plan, bootstrap, home=tmp_path)
    assert first.paths["enriched"].startswith(hdfs)
    reprocessed = _rows(spark, first.paths["enriched"])
    assert reprocessed == day_rows, bag_difference(reprocessed, day_rows, ("the reprocessed day", "the stream"))
    second = reprocess_day(spark, spec, plan, bootstrap, home=tmp_path)
    daily = f"{spec.output.files.path}/daily"
    assert storage.children(daily) == [f"date={DAY.isoformat()}"]  # no staged or old copies
    again = _rows(spark, second.paths["enriched"])
    assert again == day_rows, bag_difference(again, day_rows, ("the day reprocessed again", "the stream"))
    assert not [n for n in storage.children(checkpoint) if n.startswith(".reprocess-")]  # its state is gone

    # a state file damaged on HDFS (same size, other bytes) stops the next start, naming the file: the
    # newest version's manifest lists its files (the kernel's store files of that version among them)
    newest = max(versions, key=lambda v: int(v.split("=")[1]))
    manifest = json.loads(storage.read_text(f"{checkpoint}/state/{newest}/_COMMITTED") or "{}")
    data_files = [f"{checkpoint}/state/{relative}" for relative, (size, _) in manifest["files"].items() if size > 0]
    assert data_files, f"the newest state version lists no file: {manifest}"
    victim = data_files[0]
    size = storage.facts(victim)[0]  # type: ignore[index]
    storage.delete(victim)
    storage.write_text(victim, "x" * size)
    with pytest.raises(CorruptCheckpointError, match="checksum differs") as refused:
        StreamJob(spark, spec, settings)
    assert victim.split("://", 1)[1].split("/", 1)[1] in str(refused.value)


def test_the_lease_on_hdfs_keeps_a_second_driver_out(spark: Any, hdfs: str) -> None:
    """``create(overwrite=false)`` on the NameNode: of two drivers, one holds the lease; the other is refused
    with the holder's name until the lease is released."""
    from streamjoin.core.errors import CheckpointLockedError
    from streamjoin.core.job_files import Lease
    from streamjoin.spark.hadoop_storage import HadoopStorage

    checkpoint = f"{hdfs}/leases/{uuid.uuid4().hex[:8]}"
    storage = HadoopStorage(spark, checkpoint)
    first, second = Lease(checkpoint, storage), Lease(checkpoint, storage)
    first.acquire(settle=0)
    with pytest.raises(CheckpointLockedError, match=first.owner):
        second.acquire(settle=0)
    assert storage.create_new(f"{checkpoint}/lease.json", "{}") is False
    first.release()
    second.acquire(settle=0)
    assert second.held and '"owner": "' + second.owner in (storage.read_text(second.path) or "")
