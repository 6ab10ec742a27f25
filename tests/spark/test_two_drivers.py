"""Two drivers launched at once on one checkpoint: one runs, the other refuses to start and names the first
(the checkpoint lease), and the output holds every record once. The one that runs is a live run over a backlog:
it plans each batch cut at the batch size while the batch before runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_stream_job_backlog import CLICKS, USERS, backlog, produce, seed_spec

from exactly_once import assert_each_once, file_coordinates, input_coordinates
from streamjoin.core.job_files import LEASE_FILE, PipelineFiles
from streamjoin.core.plans import PROJECT_HOME, connector_jars
from streamjoin.core.topic_plan import plan_topics
from streamjoin.kafka.admin import ensure_topics

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def test_a_second_driver_on_the_same_checkpoint_refuses_to_start(
    spark: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    spec = seed_spec(tmp_path, max_records=1200)  # the backlog in 3 batches
    ensure_topics({"bootstrap.servers": kafka_bootstrap}, plan_topics(spec))
    records, _ = backlog(int(time.time() * 1000) - 3_600_000)
    produce(kafka_bootstrap, spec, records)
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(spec.model_dump(mode="json", by_alias=True, exclude_none=True)))
    checkpoint = tmp_path / "ck"
    command = [
        str(Path(sys.executable).parent / "spark-submit"), "--master", "local[1]",
        "--jars", ",".join(connector_jars()), "--conf", "spark.ui.enabled=false",
        str(PROJECT_HOME / "jobs" / "stream_join.py"), "--spec", str(spec_file), "--bootstrap", kafka_bootstrap,
        "--checkpoint", str(checkpoint), "--home", str(tmp_path),
    ]  # fmt: skip
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    # each driver's output to a file: an unread pipe fills up and blocks the driver that writes to it
    logs = [tmp_path / f"driver-{n}.log" for n in range(2)]
    drivers = []
    for log in logs:
        with log.open("wb") as out:
            drivers.append(subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env))
    try:
        refused = None
        deadline = time.monotonic() + 240
        while refused is None and time.monotonic() < deadline:
            refused = next((d for d in drivers if d.poll() is not None), None)
            time.sleep(1)
        assert refused is not None, "neither driver refused within 240 s"
        refusal = logs[drivers.index(refused)].read_text(errors="replace")
        assert refused.returncode != 0 and "the checkpoint is held by" in refusal, refusal[-3000:]
        (running,) = [d for d in drivers if d is not refused]
        running_log = logs[drivers.index(running)]
        files = PipelineFiles(checkpoint)
        deadline = time.monotonic() + 300
        while _behind(files):
            tail = running_log.read_text(errors="replace")[-3000:]
            assert running.poll() is None, f"the driver that holds the lease died:\n{tail}"
            assert time.monotonic() < deadline, f"the running driver did not catch up in 300 s: {files.status()}"
            time.sleep(1)
        files.request_stop()
        assert running.wait(timeout=120) == 0, running_log.read_text(errors="replace")[-3000:]
    finally:
        for driver in drivers:
            if driver.poll() is None:
                driver.kill()
    assert not (checkpoint / LEASE_FILE).exists()  # released on a clean stop
    clicks = input_coordinates(kafka_bootstrap, spec.inputs["clicks"].topic, CLICKS)
    outputs = file_coordinates(spark, str(tmp_path / "enriched_clicks" / "stream"))
    assert_each_once(outputs, clicks, "the enriched files of the driver that ran")
    # batch 1 was planned while batch 0 ran (cut at 1200 of the backlog already there); batch 2's plan made
    # while batch 1 ran took the last 1000, all there was: it was planned again after batch 1's commit
    prefix = "streamjoin batch "
    text = running_log.read_text(errors="replace")
    lines = [json.loads(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix)]
    ahead = [(b["batch_id"], b["input_records"], b["planned_ahead"]) for b in lines]
    assert ahead == [(0, 1200, False), (1, 1200, True), (2, 1000, False)], lines


def _behind(files: PipelineFiles) -> bool:
    """The job has not yet committed offsets up to the end of the backlog."""
    ends = status.end_offsets if (status := files.status()) else {}
    return sum(int(o) for parts in ends.values() for o in parts.values()) < USERS + CLICKS
