"""Fault soak on loopback, bounded in time: a stream at a fixed rate for a few minutes through the owner of
the job (``SuperviseStreamJoinOperator`` deferring to ``StreamJobTrigger``, driven as the triggerer does)
while the driver is SIGKILLed repeatedly and the broker is stopped and restarted once.

Then: 0 lost and 0 duplicated records in the file output (exactly once), the Kafka output's duplicates
counted (at least once), and the time to recover from each fault (fault -> the first batch with rows
committed by a driver started after it). A line per run goes to ``bench/soak_results.jsonl``.

    python bench/soak.py --minutes 4 --rate 50 --kills 3 --outage 20 --port 29192

The broker is the soak's own (``.local/soak-kafka-<port>``): it is stopped and started here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

HOME = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HOME / "plugins"))

import yaml  # noqa: E402

from streamjoin.core.job_files import PipelineFiles  # noqa: E402
from streamjoin.core.plans import checkpoint_dir  # noqa: E402
from streamjoin.core.spec import load_spec  # noqa: E402
from streamjoin.core.supervision import Policy  # noqa: E402
from streamjoin.localdev.kafka_broker import KafkaBroker  # noqa: E402

RESULTS = HOME / "bench" / "soak_results.jsonl"


def write_spec(directory: Path, name: str) -> Path:
    topics = {"clicks": f"soak-clicks-{name}", "regions": f"soak-regions-{name}", "out": f"soak-enriched-{name}"}
    spec = {
        "name": name,
        "kafka": {"partitions": 2, "replication_factor": 1},
        "inputs": {
            "clicks": {
                "topic": topics["clicks"],
                "role": "stream",
                "key": {"format": "string"},
                "value": {"format": "long"},
            },
            "regions": {
                "topic": topics["regions"],
                "role": "table",
                "key": {"format": "string"},
                "value": {"format": "string"},
            },
        },
        "join": {
            "shape": "stream-table",
            "kind": "left",
            "left": "clicks",
            "right": "regions",
            "joiner": {"select": {"region": "coalesce(right, 'UNKNOWN')", "click": "left"}},
        },
        "output": {
            "topic": topics["out"],
            "value_format": "json",
            "files": {"path": f"var/soak/{name}/enriched", "format": "json"},
        },
        "dead_letter_topic": f"soak-dlq-{name}",
        "trigger": {"processing_time": "1s", "max_offsets_per_trigger": 2000},
    }
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


class Producer(threading.Thread):
    """``rate`` records a second, values 0, 1, 2, ... (each record's id), until stopped; through a broker
    outage the client buffers and retries (delivery timeout 10 minutes)."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        super().__init__(daemon=True, name="soak-producer")
        self.bootstrap, self.topic, self.rate = bootstrap, topic, rate
        self.sent = 0
        self.failed: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Producer as KafkaProducer

        from streamjoin.kafka.clients import producer_config

        producer = KafkaProducer(producer_config(self.bootstrap, **{"message.timeout.ms": 600_000}))

        def delivered(error: Any, message: Any) -> None:
            if error is not None:
                self.failed.append(str(error))

        started = time.monotonic()
        while not self.stop.is_set():
            due = int((time.monotonic() - started) * self.rate)
            while self.sent < due:
                value = self.sent.to_bytes(8, "big", signed=True)
                producer.produce(self.topic, key=f"u{self.sent % 100}".encode(), value=value, on_delivery=delivered)
                self.sent += 1
            producer.poll(0.05)
        remaining = producer.flush(600)
        if remaining:
            self.failed.append(f"{remaining} records not delivered at the end")


class Owner(threading.Thread):
    """The pipeline's owner as Airflow runs it: execute, defer, run the trigger, resume, defer again..."""

    def __init__(self, spec_path: Path, policy: Policy) -> None:
        super().__init__(daemon=True, name="soak-owner")
        from streamjoin.airflow.operators.supervise import SuperviseStreamJoinOperator

        self.operator = SuperviseStreamJoinOperator(
            task_id="own_job", spec_path=str(spec_path), policy=policy, watch=3600, poll=1
        )
        self.events: list[dict[str, Any]] = []
        self.error: BaseException | None = None
        self.trigger: Any = None

    def run(self) -> None:
        from airflow.sdk.exceptions import TaskDeferred

        event: dict[str, Any] | None = None
        try:
            while True:
                try:
                    if event is None:
                        self.operator.execute({})
                    else:
                        self.operator.resume({}, event)
                    return  # the owner ended (stopped on purpose)
                except TaskDeferred as deferral:
                    self.trigger = deferral.trigger
                event = asyncio.run(_first_event(self.trigger))
                self.events.append(event)
        except BaseException as exc:  # reported by the main thread
            self.error = exc


async def _first_event(trigger: Any) -> dict[str, Any]:
    async for event in trigger.run():
        return dict(event.payload)
    raise RuntimeError("trigger ended without an event")


def recovered_after(files: PipelineFiles, fault_at: float, run_id: str | None, timeout: float) -> float | None:
    """Seconds from ``fault_at`` to the first batch with rows committed by another run of the job (a new driver)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        status = files.status() or {}
        if (
            status.get("written_at", 0) > fault_at
            and status.get("num_input_rows", 0) > 0
            and status.get("run_id") != run_id
        ):
            return float(status["written_at"]) - fault_at
        time.sleep(0.5)
    return None


def resumed_after(files: PipelineFiles, since: float, timeout: float) -> float | None:
    """Seconds from ``since`` to the first batch with rows committed after it (any driver)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        status = files.status() or {}
        if status.get("written_at", 0) > since and status.get("num_input_rows", 0) > 0:
            return float(status["written_at"]) - since
        time.sleep(0.5)
    return None


def file_coordinates(root: Path) -> list[tuple[int, int]]:
    rows = []
    for part in (root / "stream").glob("batch_id=*/date=*/part-*"):
        for line in part.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                rows.append((int(row["src_partition"]), int(row["src_offset"])))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=4.0, help="how long the stream runs")
    parser.add_argument("--rate", type=int, default=50, help="records per second")
    parser.add_argument("--kills", type=int, default=3, help="driver SIGKILLs, spread over the run")
    parser.add_argument("--outage", type=float, default=20.0, help="seconds the broker stays stopped")
    parser.add_argument("--port", type=int, default=29192, help="the soak broker's port (and port + 1)")
    args = parser.parse_args(argv)

    broker = KafkaBroker(HOME / ".local" / f"soak-kafka-{args.port}", args.port, args.port + 1)
    if not broker.is_running():
        broker.start(timeout=180)
    bootstrap = broker.bootstrap
    os.environ["AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT"] = json.dumps(
        {"conn_type": "streamjoin_kafka", "host": "127.0.0.1", "port": args.port}
    )
    os.environ.setdefault("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))

    from streamjoin.airflow.launcher import stop_driver
    from streamjoin.core.topic_plan import plan_topics
    from streamjoin.kafka.admin import ensure_topics
    from streamjoin.kafka.clients import consume_all, end_offsets, produce_records

    name = f"soak_{uuid.uuid4().hex[:6]}"
    (HOME / "var" / "soak").mkdir(parents=True, exist_ok=True)
    spec_path = write_spec(HOME / "var" / "soak", name)
    spec = load_spec(spec_path)
    ensure_topics({"bootstrap.servers": bootstrap}, plan_topics(spec), timeout=60)
    regions = ["europe", "americas", "asia", "africa"]
    produce_records(bootstrap, [(spec.inputs["regions"].topic, f"u{i}".encode(), regions[i % 4].encode(),
                                 int(time.time() * 1000), None) for i in range(100)])  # fmt: skip
    files = PipelineFiles(checkpoint_dir(spec))
    policy = Policy(stale_after=300, lag_threshold=10**9, max_restarts=args.kills + 8, window=3600)

    owner = Owner(spec_path, policy)
    producer = Producer(bootstrap, spec.inputs["clicks"].topic, args.rate)
    t0 = time.time()
    owner.start()
    producer.start()
    print(f"soak {name}: {args.rate} records/s for {args.minutes} min, {args.kills} kills, broker outage "
          f"{args.outage:.0f}s, broker {bootstrap}", flush=True)  # fmt: skip

    duration = args.minutes * 60
    faults: list[dict[str, Any]] = []
    # kills spread over the run; the broker outage between the last two kills
    kill_times = [duration * (i + 1) / (args.kills + 2) for i in range(args.kills)]
    outage_at = duration * (args.kills + 0.5) / (args.kills + 2)
    schedule = sorted([(t, "kill") for t in kill_times] + [(outage_at, "broker")])
    for at, kind in schedule:
        time.sleep(max(0.0, t0 + at - time.time()))
        if owner.error is not None:
            raise owner.error
        if kind == "kill":
            if resumed_after(files, t0, 240) is None:
                print("the job never committed a batch", flush=True)
            driver = files.driver() or {}
            pid = driver.get("pid")
            if pid is None or not files.driver_alive():
                faults.append({"fault": "kill", "at": round(time.time() - t0, 1), "skipped": "no driver alive"})
                continue
            run_id = (files.status() or {}).get("run_id")
            fault_at = time.time()
            os.killpg(int(driver["pgid"]), signal.SIGKILL)
            seconds = recovered_after(files, fault_at, run_id, 300)
            faults.append({"fault": "SIGKILL driver", "at": round(fault_at - t0, 1), "pid": pid,
                           "recovered_s": None if seconds is None else round(seconds, 1)})  # fmt: skip
        else:
            fault_at = time.time()
            broker.stop(timeout=60)
            time.sleep(args.outage)
            broker.start(timeout=180)
            back = time.time()
            seconds = resumed_after(files, back, 300)
            recovered = None if seconds is None else round(back - fault_at + seconds, 1)
            faults.append({"fault": "broker stop/start", "at": round(fault_at - t0, 1),
                           "outage_s": round(back - fault_at, 1), "recovered_s": recovered})  # fmt: skip
        print(f"fault: {faults[-1]}", flush=True)
    time.sleep(max(0.0, t0 + duration - time.time()))
    producer.stop.set()
    producer.join(timeout=660)

    # caught up: the job committed every offset on the input topic
    topic = spec.inputs["clicks"].topic
    ends = end_offsets(bootstrap, topic)
    deadline = time.time() + 600
    while time.time() < deadline:
        committed = (files.status() or {}).get("end_offsets", {}).get(topic, {})
        if all(int(committed.get(str(p), 0)) >= o for p, o in ends.items()):
            break
        time.sleep(1)
    caught_up_s = round(time.time() - (t0 + duration), 1)
    from streamjoin.airflow.operators.supervise import StopStreamJoinOperator

    StopStreamJoinOperator(task_id="stop", spec_path=str(spec_path), timeout=60).execute({})
    owner.join(timeout=120)

    expected = {(int(p), o) for p, end in ends.items() for o in range(end)}
    rows = file_coordinates(HOME / "var" / "soak" / name / "enriched")
    kafka_out = consume_all(bootstrap, spec.output.topic or "", timeout=120)
    clicks = [json.loads(r.value)["click"] for r in kafka_out if r.value]
    result = {
        "pipeline": name, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)), "minutes": args.minutes,
        "rate": args.rate, "produced": producer.sent, "producer_failures": len(producer.failed),
        "input_records": len(expected), "file_rows": len(rows), "file_lost": len(expected - set(rows)),
        "file_duplicates": len(rows) - len(set(rows)), "file_unexpected": len(set(rows) - expected),
        "kafka_out_records": len(clicks), "kafka_out_distinct": len(set(clicks)),
        "kafka_out_duplicates": len(clicks) - len(set(clicks)), "kafka_out_missing": len(expected) - len(set(clicks)),
        "restarts": len(files.supervisor().get("restarts", [])), "owner_events": [e["event"] for e in owner.events],
        "faults": faults, "caught_up_after_end_s": caught_up_s,
        "owner_error": None if owner.error is None else str(owner.error)[:300],
    }  # fmt: skip
    with open(RESULTS, "a") as out:
        out.write(json.dumps(result) + "\n")
    print(json.dumps(result, indent=1), flush=True)
    stop_driver(files, timeout=30)
    ok = result["file_lost"] == 0 and result["file_duplicates"] == 0 and result["kafka_out_missing"] == 0
    print("PASS" if ok else "FAIL", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
