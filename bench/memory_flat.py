"""Does the driver's heap stay flat over many tiny batches? One-record micro-batches of a versioned stream-table
join with grace (``tests/scenarios/stream_table_left_grace_versioned.yaml``'s spec, default joiner) through
``streamjoin replay``'s batch mode, state carried in the kernel's stores, in a fresh JVM with Spark's default
1 GiB driver heap. The old generation is measured after a full GC once the JVM is warm and again at the end.

Prints one JSON line: batches, records, heap max, old generation at the start and the end (bytes), whether the
output equals the reference engine's. Exits 1 if it does not (a run that is flat but wrong is a failure).

    python bench/memory_flat.py --records 500
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

HOME = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(HOME / "plugins"), str(HOME / "tests")]

#: batches run before the first measurement: classes loaded, programs built, caches filled
WARM_UP = 25
#: the old generation is also sampled every this many batches (the trend: growing, or levelled off)
EVERY = 100


def records(count: int, users: int = 40) -> list[Any]:
    """Views and profile changes of ``users`` users, one in five a profile change, ts rising by 100 ms with
    every fourth view 1.5 s late (inside the join's 2 s grace)."""
    from streamjoin.core.records import Record

    out = []
    for i in range(count):
        user = f"user-{(i * 7) % users}"
        if i % 5 == 0:
            out.append(Record("user-profiles", user, f"region-{i % 3}", i * 100))
        else:
            late = 1500 if i % 4 == 0 else 0
            out.append(Record("page-views", user, f"/page/{i % 11}", max(0, i * 100 - late)))
    return out


def old_generation(spark: Any) -> int:
    """Bytes used in the old generation right after a full GC."""
    jvm = spark.sparkContext._jvm
    jvm.java.lang.System.gc()
    for pool in jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans():
        if "Old Gen" in pool.getName() or "Tenured" in pool.getName():
            return int(pool.getUsage().getUsed())
    raise RuntimeError("no old generation memory pool in this JVM")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=500, help="records, one per micro-batch")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    from scenario_loader import SCENARIO_DIR, load_scenario
    from streamjoin.core.reference import ReferenceEngine
    from streamjoin.core.spec import parse_spec
    from streamjoin.spark.replay import replay
    from streamjoin.spark.session import build_session

    data = load_scenario(SCENARIO_DIR / "stream_table_left_grace_versioned.yaml").spec.model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    data["join"].pop("joiner", None)
    spec = parse_spec(data)
    inputs = records(args.records)
    spark = build_session(
        "streamjoin-memory-flat", master="local[2]", shuffle_partitions=2,
        extra_conf={"spark.ui.enabled": "false", "spark.sql.adaptive.enabled": "false", "spark.driver.memory": "1g"},
    )  # fmt: skip
    heap_max = int(spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory())
    samples: dict[str, int] = {}
    batches: list[int] = []

    def on_batch(batch_id: int, _plan: Any) -> None:
        batches.append(batch_id)
        if batch_id == WARM_UP:
            samples["start"] = old_generation(spark)
        elif batch_id % EVERY == 0 and batch_id > 0:
            samples[f"at_{batch_id}"] = old_generation(spark)

    rows = [{"topic": r.topic, "key": r.key, "value": r.value, "ts": r.ts, "partition": 0} for r in inputs]
    got = replay(spark, spec, rows, batch=True, max_records=1, on_batch=on_batch)
    samples["end"] = old_generation(spark)
    expected = ReferenceEngine(spec).replay_batch(inputs)
    same = [(e.topic, e.key, e.value, e.ts) for e in expected] == [
        (r["topic"], r["key"], r["value"], r["ts"]) for r in got
    ]
    print(json.dumps({
        "batches": len(batches), "records": len(inputs), "heap_max": heap_max, "old_gen_start": samples.get("start"),
        "old_gen_end": samples["end"], "old_gen_samples": samples, "outputs": len(got), "same_as_reference": same,
    }))  # fmt: skip
    spark.stop()
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
