"""Does a long-running driver's heap stay flat? The streaming job of a versioned stream-table join with grace
(``tests/scenarios/stream_table_left_grace_versioned.yaml``'s spec, default joiner, one partition) runs on the
broker with a 100 ms trigger and Spark's default 1 GiB driver heap while its inputs arrive at ``--rate``
records/s for ``--minutes``; the old generation is measured after a full GC every minute. At the end the
output topic is read back and compared per key with the reference engine over the same records.

Prints one JSON line (batches, records, old generation per minute, whether the output equals the reference);
exits 1 if it does not (a run that is flat but wrong is a failure).

    python bench/memory_stream.py --bootstrap 127.0.0.1:19092 --minutes 30 --rate 200
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import uuid
from pathlib import Path

HOME = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(HOME / "plugins"), str(HOME / "tests"), str(HOME / "tests" / "spark"), str(HOME / "bench")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=int, default=200, help="input records per second")
    parser.add_argument("--trigger-ms", type=int, default=100)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from confluent_kafka import Producer
    from test_streaming_scenarios import per_key, renamed

    from memory_flat import old_generation, records
    from scenario_loader import SCENARIO_DIR, load_scenario
    from streamjoin.core.codec import decode, encode
    from streamjoin.core.job_files import PipelineFiles
    from streamjoin.core.records import Record
    from streamjoin.core.reference import ReferenceEngine
    from streamjoin.core.spec import parse_spec
    from streamjoin.core.topic_plan import plan_topics
    from streamjoin.kafka.admin import ensure_topics
    from streamjoin.kafka.clients import consume_all
    from streamjoin.spark.job import JobSettings, StreamJob
    from streamjoin.spark.session import build_session

    data = load_scenario(SCENARIO_DIR / "stream_table_left_grace_versioned.yaml").spec.model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    data["join"].pop("joiner", None)
    data["trigger"] = {"processing_time": args.trigger_ms}
    spec, names = renamed(parse_spec(data), "-mem-" + uuid.uuid4().hex[:6])
    ensure_topics({"bootstrap.servers": args.bootstrap}, plan_topics(spec))
    spark = build_session(
        "streamjoin-memory-stream", master="local[2]", shuffle_partitions=1,
        extra_conf={"spark.ui.enabled": "false", "spark.driver.memory": "1g"},
    )  # fmt: skip
    checkpoint = HOME / "var" / "memory-stream" / spec.name / uuid.uuid4().hex[:6]
    settings = JobSettings(bootstrap=args.bootstrap, checkpoint_dir=str(checkpoint), home=str(HOME))
    job = StreamJob(spark, spec, settings)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            job.run()
        except BaseException as error:  # reported below
            failure.append(error)

    runner = threading.Thread(target=run, name="streamjoin-memory-stream")
    runner.start()

    total = int(args.minutes * 60 * args.rate)
    inputs = [Record(names[r.topic], r.key, r.value, r.ts) for r in records(total)]
    # the records' times (100 ms apart) end an hour ago: a broker refuses records more than an hour ahead, and
    # its retention would delete 1970's
    base = int(time.time() * 1000) - 3_600_000 - inputs[-1].ts
    producer = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 5})
    samples: dict[str, int] = {}
    started = time.monotonic()
    sent = 0
    while sent < total and not failure:
        due = min(total, int((time.monotonic() - started) * args.rate))
        for record in inputs[sent:due]:
            source = spec.input_by_topic(record.topic)[1]
            producer.produce(record.topic, encode(record.value, source.value.format),
                             encode(record.key, source.key.format), timestamp=base + record.ts)  # fmt: skip
        sent = due
        producer.poll(0)
        minute = int((time.monotonic() - started) // 60)
        if f"minute_{minute}" not in samples:
            samples[f"minute_{minute}"] = old_generation(spark)
            print(f"minute {minute}: {sent} records sent, old generation {samples[f'minute_{minute}']:,} bytes",
                  flush=True)  # fmt: skip
        time.sleep(0.02)
    producer.flush(60)
    files = PipelineFiles(checkpoint)
    deadline = time.monotonic() + 300
    while not failure and time.monotonic() < deadline:  # the job reads what was sent, then stops between batches
        status = files.status()
        if status is not None and status.totals.input_records >= total:
            break
        time.sleep(1)
    samples["end"] = old_generation(spark)
    files.request_stop()
    runner.join(120)
    if failure:
        raise SystemExit(f"the job failed: {failure[0]!r}")

    assert spec.output.topic is not None
    got = [
        (spec.output.topic, decode(r.key, spec.left.key.format), decode(r.value, spec.output.value_format),
         int(dict(r.headers)["ts"]) - base)
        for r in consume_all(args.bootstrap, spec.output.topic, timeout=60)
    ]  # fmt: skip
    expected = [(e.topic, e.key, e.value, e.ts) for e in ReferenceEngine(spec).replay_batch(inputs)
                if e.topic == spec.output.topic]  # fmt: skip
    same = per_key(got) == per_key(expected)
    status = files.status()
    print(json.dumps({
        "minutes": args.minutes, "rate": args.rate, "trigger_ms": args.trigger_ms, "records": total,
        "batches": None if status is None or status.batch_id is None else status.batch_id + 1,
        "heap_max": int(spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory()),
        "old_gen_start": samples.get("minute_1"), "old_gen_end": samples["end"], "old_gen_samples": samples,
        "outputs": len(got), "expected_outputs": len(expected), "same_as_reference": same,
    }))  # fmt: skip
    spark.stop()
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
