"""Batch output equals the stream's output for a day, for stream-stream (windowed, left), table-table and a chain
of three inputs."""

from __future__ import annotations

import random
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from backfill_data import DAY

from exactly_once import bag, bag_difference
from streamjoin.core.backfill import DAY_MS, day_start_ms, plan_day
from streamjoin.core.spec import PipelineSpec, load_spec

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

SHAPES = {
    "stream_stream": {
        "inputs": {"views": {"role": "stream"}, "clicks": {"role": "stream"}},
        "join": {"shape": "stream-stream", "kind": "left", "left": "views", "right": "clicks",
                 "window": {"before": "1m", "after": "1m"}, "grace": "30s"},
    },
    "table_table": {
        "inputs": {"views": {"role": "table"}, "clicks": {"role": "table"}},
        "join": {"shape": "table-table", "kind": "outer", "left": "views", "right": "clicks"},
    },
    # a chain of three inputs (issue 38): views left-join a table, then inner-join another (not a global table:
    # read to its end in every batch, its lookups depend on where batches end, docs/SEMANTICS.md)
    "chain": {
        "inputs": {"views": {"role": "stream"}, "users": {"role": "table"}, "pages": {"role": "table"}},
        "joins": [{"shape": "stream-table", "kind": "left", "left": "views", "right": "users"},
                  {"shape": "stream-table", "kind": "inner", "right": "pages"}],
    },
}  # fmt: skip


def _spec(home: Path, shape: str) -> PipelineSpec:
    suffix = uuid.uuid4().hex[:8]
    data: dict[str, Any] = {"name": f"bf_{shape}", **SHAPES[shape]}
    for name, inp in data["inputs"].items():
        inp["topic"] = f"{name}-{suffix}"
    data["output"] = {"topic": f"out-{suffix}", "files": {"path": str(home / "out"), "format": "parquet"}}
    data["dead_letter_topic"] = f"dlq-{suffix}"
    path = home / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_spec(path)


def _events(spec: PipelineSpec, seed: int = 3) -> tuple[list[tuple], list[tuple]]:
    """Phase 1: the day before and the day, out of order by up to 20 s, 5 % arriving 2 min late, and
    tombstones on tables; phase 2: the next day's first hour, each record followed by a late one of the day."""
    rng = random.Random(seed)
    topics = [inp.topic for inp in spec.inputs.values()]
    tables = {inp.topic for inp in spec.inputs.values() if inp.role.value != "stream"}
    start, end = day_start_ms(DAY), day_start_ms(DAY) + DAY_MS
    keys = [f"k{n}" for n in range(8)]

    def record(ts: int) -> tuple:
        topic = rng.choice(topics)
        value = None if topic in tables and rng.random() < 0.1 else f"{topic[:5]}-{ts}".encode()
        return (topic, rng.choice(keys).encode(), value, ts, [])

    timed = []
    for _ in range(600):
        ts = start - 3 * 3_600_000 + rng.randint(0, DAY_MS + 3 * 3_600_000 - 1)
        delay = 120_000 if rng.random() < 0.05 else rng.randint(0, 20_000)
        timed.append((ts + delay, record(ts)))
    phase1 = [r for _, r in sorted(timed, key=lambda e: e[0])]
    phase2 = []
    for n in range(6):
        nxt = record(end + 60_000 * (n + 1))
        late = record(end - 10_000 * (n + 1))
        phase2 += [nxt, (late[0], nxt[1], late[2], late[3], [])]  # same key: after the next day's record
    return phase1, phase2


def _rows(spark: Any, paths: list[Path]) -> Counter[tuple]:
    rows: Counter[tuple] = Counter()
    for path in paths:
        frame = spark.read.parquet(str(path))
        rows += bag(frame.select(*sorted(frame.columns)).collect())
    return rows


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_batch_output_equals_the_streams_for_the_day(spark: Any, kafka_broker: Any, tmp_path: Path, shape: str) -> None:
    from streamjoin.kafka.admin import delete_topics, ensure_topics
    from streamjoin.kafka.clients import produce_records
    from streamjoin.kafka.topics import plan_topics
    from streamjoin.spark.job import JobSettings, run_stream
    from streamjoin.spark.reprocess import reprocess_day

    spec = _spec(tmp_path, shape)
    bootstrap = kafka_broker.bootstrap
    topics = plan_topics(spec)
    ensure_topics({"bootstrap.servers": bootstrap}, topics)
    try:
        for phase in _events(spec):
            produce_records(bootstrap, phase)
            settings = JobSettings(bootstrap, str(tmp_path / "checkpoint"), available_now=True, home=str(tmp_path))
            assert run_stream(spark, spec, settings) >= 1
        stream = _rows(spark, sorted((tmp_path / "out" / "stream").glob(f"batch_id=*/date={DAY}")))
        result = reprocess_day(spark, spec, plan_day(spec, DAY), bootstrap, home=tmp_path)
        batch = _rows(spark, [Path(result.paths["enriched"])])
        assert stream.total() > 100
        assert batch == stream, bag_difference(batch, stream, ("batch", "stream"))
    finally:
        delete_topics({"bootstrap.servers": bootstrap}, [t.name for t in topics.topics], timeout=15)
