"""State carried between micro-batches through the StateStore equals processing everything at once; the
store keeps a few versions, carries the partitions' times, and refuses a state of the DataFrame engine."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from streamjoin.core.errors import StateLayoutError
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.spec import load_spec
from streamjoin.demo.sample import EXPECTED_TOTALS, sample_records
from streamjoin.spark.engine import process_batch
from streamjoin.spark.job import JobSettings, StreamJob
from streamjoin.spark.kernel import unload
from streamjoin.spark.replay import raw_frame
from streamjoin.spark.state import StateStore

SPEC = load_spec(PROJECT_HOME / "include/pipelines/clicks_per_region.yaml")
#: a state version the DataFrame engine of the release before this one wrote (the seed's first 10 records)
DATAFRAME_STATE = Path(__file__).parent / "data" / "dataframe_engine_state"


@pytest.mark.spark
def test_micro_batches_with_stored_state_give_the_one_batch_totals(spark, tmp_path: Path) -> None:
    rows = [{"topic": r.topic, "key": r.key, "value": r.value, "ts": 10_000 + r.offset_ms} for r in sample_records()]
    raw = raw_frame(spark, SPEC, rows, batch=True)  # offsets per topic-partition, as Kafka assigns them
    store = StateStore(tmp_path / "state", keep=2, pipeline=SPEC.name)
    totals: dict[str, int] = {}
    cuts = [(0, 10_000), (10_000, 20_000), (20_000, 10**9)]
    for batch_id, (lo, hi) in enumerate(cuts):
        part = raw.filter((raw.ts - 10_000 >= lo) & (raw.ts - 10_000 < hi))
        out = process_batch(part, SPEC, store.load(batch_id))
        assert out.aggregates is not None
        for row in out.aggregates.orderBy("__pos", "__input", "__partition", "__offset").collect():
            totals[row["key"]] = row["value"]
        times = {tp: ts for tp, ts in out.summary.max_ts.items() if ts is not None}
        assert store.save(batch_id, dataclasses.replace(out.commit, partition_time=times)) > 0
        out.release()
    assert totals == EXPECTED_TOTALS
    assert sorted(p.name for p in (tmp_path / "state").iterdir() if p.name.startswith("v=")) == ["v=1", "v=2"]
    assert store.partition_time() == times
    # batch 2 run again starts from batch 1's state: same result, no double counting
    replayed = process_batch(raw.filter(raw.ts - 10_000 >= 20_000), SPEC, store.load(2))
    assert replayed.aggregates is not None
    assert {r["key"]: r["value"] for r in replayed.aggregates.collect()}["asia"] == EXPECTED_TOTALS["asia"]
    replayed.release()
    unload(spark, str(tmp_path / "state" / "kernel"), SPEC.kafka.partitions)


@pytest.mark.spark
def test_a_state_the_dataframe_engine_wrote_is_refused_naming_the_pipeline(spark, tmp_path: Path) -> None:
    """The DataFrame engine of earlier releases kept the seed's table, order and totals as files; this release
    keeps them in Spark's state store. Started from such a checkpoint the kernel would find an empty state:
    the table lost without a word. The job refuses it before its first batch, naming the pipeline and what to
    do; so does a batch's load. A manifest written before manifests listed their states is refused too."""
    import json

    checkpoint = tmp_path / "ck"
    shutil.copytree(DATAFRAME_STATE, checkpoint / "state")
    manifest = checkpoint / "state" / "v=0" / "_COMMITTED"
    for listed in (True, False):
        if not listed:
            unlisted = {k: v for k, v in json.loads(manifest.read_text()).items() if k != "states"}
            manifest.write_text(json.dumps(unlisted))
        with pytest.raises(StateLayoutError) as caught:
            StreamJob(spark, SPEC, JobSettings(bootstrap="127.0.0.1:1", checkpoint_dir=str(checkpoint)))
        error = caught.value
        assert (error.version, error.pipeline, error.found) == (0, SPEC.name, ["agg", "order", "table"])
        assert not error.transient
        message = str(error)
        assert "'clicks_per_region'" in message and "DataFrame engine" in message
        assert "move the checkpoint aside and run the pipeline again from its topics" in message
        with pytest.raises(StateLayoutError):
            StateStore(checkpoint / "state", pipeline=SPEC.name).load(1)
