"""Fault soak on loopback, bounded in time: a stream at a fixed rate through the owner of the job
(``SuperviseStreamJoinOperator`` deferring to ``StreamJobTrigger``, driven as the triggerer does) while the
driver is SIGKILLed repeatedly (one kill timed to land while a batch's files are being written) and the broker
is stopped and restarted once; at the end, once the job caught up, the job user's password is revoked on the
running broker (a terminal fault: the owner must fail the task and alert, naming it).

The job reads and writes through the broker's SASL_SSL listener (SCRAM-SHA-512, clients re-authenticate every
``--reauth-ms``); the producer and the checks use its PLAINTEXT listener. Alerts go to the loopback alert
sink (``streamjoin.localdev.alert_sink``) run here, through the project's default alert file.

Then: 0 lost and 0 duplicated records in the file output (exactly once), the Kafka output's duplicates
counted, read committed (at least once; ``--delivery exactly_once``: 0 required), the rate the producer held,
and per fault the time to recover (fault -> the first batch with rows committed by a driver started after it)
or, for the revocation, the seconds to the failed task and to the alert, and the alerts each fault produced. A
line per run goes to ``bench/soak_results.jsonl``.

    python bench/soak.py --minutes 10 --rate 5000 --kills 3 --outage 20 --port 29192

The broker is the soak's own (``.local/soak-kafka-<port>``; ports port..port+2, alert sink port+7): it is
stopped and started here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import sys
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

HOME = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HOME / "plugins"))

import yaml  # noqa: E402

from streamjoin.core.job_files import PipelineFiles, WatchEvent  # noqa: E402
from streamjoin.core.plans import checkpoint_dir  # noqa: E402
from streamjoin.core.spec import load_spec  # noqa: E402
from streamjoin.core.supervision import Policy  # noqa: E402
from streamjoin.localdev.kafka_broker import KafkaBroker  # noqa: E402

RESULTS = HOME / "bench" / "soak_results.jsonl"


def write_spec(directory: Path, name: str, max_batch: int = 2000, delivery: str = "at_least_once") -> Path:
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
            "delivery": delivery,
        },
        "dead_letter_topic": f"soak-dlq-{name}",
        "trigger": {"processing_time": "1s", "max_offsets_per_trigger": max_batch},
    }
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


class Producer(threading.Thread):
    """``rate`` records a second, values 0, 1, 2, ... (each record's id), until stopped: produced in batches every
    ``tick`` seconds, as many as are due; through a broker outage the client buffers (up to 2M records) and
    retries (delivery timeout 10 minutes). ``per_second``: records handed to the client in each second."""

    def __init__(self, bootstrap: str, topic: str, rate: int, tick: float = 0.01) -> None:
        super().__init__(daemon=True, name="soak-producer")
        self.bootstrap, self.topic, self.rate, self.tick = bootstrap, topic, rate, tick
        self.sent = 0
        self.failed: list[str] = []
        self.full = 0  # BufferError: the client's queue was full (the record is produced again)
        self.delivered = 0
        self.nudges, self.nudged_at = 0, 0.0
        self.failed_nudges: list[str] = []
        self.per_second: list[int] = []
        self.started = self.ended = 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Producer as KafkaProducer

        from streamjoin.kafka.clients import producer_config

        producer = KafkaProducer(producer_config(self.bootstrap, **{
            "message.timeout.ms": 600_000, "linger.ms": 20, "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 1_048_576,
        }))  # fmt: skip

        def delivered(error: Any, message: Any) -> None:
            if error is not None:
                self.failed.append(str(error))
            else:
                self.delivered += 1

        self.started = started = time.monotonic()
        progress = (0, started)  # (delivered, when it last moved)
        while not self.stop.is_set():
            now = time.monotonic()
            if self.delivered != progress[0]:
                progress = (self.delivered, now)
            elif len(producer) and now - progress[1] > 5 and now - self.nudged_at > 6:
                self.nudged_at = now  # asked beside, so the rate goes on (produce only queues)
                threading.Thread(target=self._nudge, args=(producer, now), daemon=True).start()
            due = int((time.monotonic() - started) * self.rate)
            while self.sent < due:
                value = self.sent.to_bytes(8, "big", signed=True)
                try:
                    producer.produce(self.topic, key=f"u{self.sent % 100}".encode(), value=value,
                                     on_delivery=delivered)  # fmt: skip
                except BufferError:
                    self.full += 1
                    producer.poll(0.1)
                    continue
                second = int(time.monotonic() - started)
                while len(self.per_second) <= second:
                    self.per_second.append(0)
                self.per_second[second] += 1
                self.sent += 1
            producer.poll(self.tick)
        self.ended = time.monotonic()
        deadline = time.monotonic() + 600
        while len(producer) and time.monotonic() < deadline:
            before = self.delivered
            producer.flush(5)
            if self.delivered == before and len(producer):
                self._nudge(producer, time.monotonic())
        if len(producer):
            self.failed.append(f"{len(producer)} records not delivered at the end")

    def _nudge(self, producer: Any, now: float) -> None:
        """Ask for the topic's metadata: after a broker restart the client once sat with its records queued, no
        connection and the partitions' leader unknown (librdkafka 2.16, soak smoke run 3); a metadata request
        makes it connect and learn the leader again. Counted."""
        self.nudged_at = now
        self.nudges += 1
        try:
            producer.list_topics(self.topic, timeout=5)
        except Exception as exc:  # the broker may still be away: try again later
            self.failed_nudges.append(str(exc)[:200])

    def achieved(self) -> dict[str, Any]:
        """The rate held: records per second over the run, and the slowest and fastest whole second."""
        whole = self.per_second[:-1] or self.per_second
        seconds = (self.ended or time.monotonic()) - self.started
        return {"rate_achieved": round(self.sent / seconds, 1) if seconds > 0 else None,
                "rate_min_1s": min(whole, default=0), "rate_max_1s": max(whole, default=0),
                "producer_queue_full": self.full, "producer_delivered": self.delivered,
                "producer_metadata_nudges": self.nudges}  # fmt: skip


class Owner(threading.Thread):
    """The pipeline's owner as Airflow runs it: execute, defer, run the trigger, resume, defer again..."""

    def __init__(self, spec_path: Path, policy: Policy) -> None:
        super().__init__(daemon=True, name="soak-owner")
        from streamjoin.airflow.operators.supervise import SuperviseStreamJoinOperator

        self.operator = SuperviseStreamJoinOperator(
            task_id="own_job", spec_path=str(spec_path), policy=policy, watch=3600, poll=1
        )
        self.dag_id = f"streamjoin_{load_spec(spec_path).name}"  # pipeline_dag's id, for the alert
        self.events: list[WatchEvent] = []
        self.error: BaseException | None = None
        self.failed_at: float | None = None
        self.alert_error: str | None = None
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
                self.events.append(WatchEvent.from_json(event))
        except BaseException as exc:  # the task failed: Airflow calls the DAG's on_failure_callback
            self.failed_at = time.time()
            self.error = exc
            from streamjoin.airflow.notifiers import PipelineAlertNotifier

            try:  # what pipeline_dag attaches as on_failure_callback (retries=0: the first failure alerts)
                ti = SimpleNamespace(dag_id=self.dag_id, task_id="own_job", run_id="soak", log_url=None)
                PipelineAlertNotifier(spec_path=self.operator.spec_path).notify({"exception": exc, "ti": ti})
            except Exception as alert_error:
                self.alert_error = f"{type(alert_error).__name__}: {alert_error}"


async def _first_event(trigger: Any) -> dict[str, Any]:
    async for event in trigger.run():
        return dict(event.payload)
    raise RuntimeError("trigger ended without an event")


class SoakBroker(KafkaBroker):
    """The soak's broker: its SASL_SSL listener makes clients re-authenticate every ``reauth_ms``
    (``connections.max.reauth.ms``; without it Kafka checks a password only when a connection opens, and a
    revoked one would bite only on the next new connection)."""

    def __init__(self, *args: Any, reauth_ms: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reauth_ms = reauth_ms

    def server_properties(self) -> dict[str, str]:
        return {**super().server_properties(), "connections.max.reauth.ms": str(self.reauth_ms)}


def job_connection(broker: KafkaBroker, user: str) -> str:
    """The job's Kafka connection (``AIRFLOW_CONN_...``): the SASL_SSL listener as ``user``."""
    config = broker.secure_client_config(user)
    extra = {k: v for k, v in config.items() if k not in ("sasl.username", "sasl.password")}
    return json.dumps({"conn_type": "streamjoin_kafka", "login": config["sasl.username"],
                       "password": config["sasl.password"], "extra": extra})  # fmt: skip


def revoke(broker: KafkaBroker, user: str) -> None:
    """Delete ``user``'s SCRAM credential on the running broker (through its PLAINTEXT admin listener)."""
    from confluent_kafka.admin import AdminClient, ScramMechanism, UserScramCredentialDeletion

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    deletion = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)
    for future in admin.alter_user_scram_credentials([deletion], request_timeout=30).values():
        future.result(timeout=30)


class AlertLog(threading.Thread):
    """The loopback alert sink (:mod:`streamjoin.localdev.alert_sink`) on ``port`` and a watcher stamping each
    alert it wrote with the time it arrived (0.1 s resolution)."""

    def __init__(self, port: int, out: Path) -> None:
        super().__init__(daemon=True, name="soak-alerts")
        from streamjoin.localdev.alert_sink import serve

        self.out = out
        self.server = serve(port, out)
        self.received: list[tuple[float, dict[str, Any]]] = []
        threading.Thread(target=self.server.serve_forever, daemon=True, name="soak-alert-sink").start()

    def run(self) -> None:
        seen = 0
        while True:
            lines = self.out.read_text().splitlines() if self.out.exists() else []
            for line in lines[seen:]:
                self.received.append((time.time(), json.loads(line)["alert"]))
            seen = len(lines)
            time.sleep(0.1)

    def between(self, since: float, until: float | None = None) -> list[dict[str, Any]]:
        """The alerts that arrived in [since, until): seconds after ``since``, event and text."""
        return [{"after_s": round(at - since, 1), "event": a.get("event"), "text": str(a.get("text", ""))[:600]}
                for at, a in list(self.received) if at >= since and (until is None or at < until)]  # fmt: skip


def kill_mid_write(files: PipelineFiles, out_root: Path, timeout: float) -> dict[str, Any] | None:
    """SIGKILL the driver while it writes a batch's file output: the batch after the last committed one has
    Spark's ``_temporary`` folder (its write job set up, not committed) under ``stream/batch_id=N``. Returns what
    the kill hit (None: no write seen within ``timeout``)."""
    log = files.offset_log
    deadline = time.time() + timeout
    while time.time() < deadline:
        driver = files.driver()
        last = log.last_committed()
        batch = 0 if last is None else last + 1
        target = out_root / "stream" / f"batch_id={batch}"
        if driver is not None and driver.pgid is not None and (target / "_temporary").is_dir():
            status = files.status()
            at = time.time()
            os.killpg(driver.pgid, signal.SIGKILL)
            time.sleep(0.5)
            return {"at_epoch": at, "pid": driver.pid, "run_id": status.run_id if status else None, "batch": batch,
                    "temporary_left": (target / "_temporary").is_dir(),
                    "success_marker": (target / "_SUCCESS").exists(),
                    "committed": log.last_committed() == batch, "driver_log": driver.log}  # fmt: skip
        time.sleep(0.01)
    return None


def ran_again(files: PipelineFiles, batch: int) -> bool:
    """Whether the driver now recorded logged that it ran ``batch`` again (it was not committed)."""
    driver = files.driver()
    if driver is None or not driver.log or not Path(driver.log).exists():
        return False
    return f"batch {batch} was not committed; it runs again" in Path(driver.log).read_text(errors="replace")


def recovered_after(files: PipelineFiles, fault_at: float, run_id: str | None, timeout: float) -> float | None:
    """Seconds from ``fault_at`` to the first batch with rows committed by another run of the job (a new driver)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        status = files.status()
        if (
            status is not None
            and status.written_at is not None
            and status.written_at > fault_at
            and status.counts.input_records > 0
            and status.run_id != run_id
        ):
            return status.written_at - fault_at
        time.sleep(0.5)
    return None


def resumed_after(files: PipelineFiles, since: float, timeout: float) -> float | None:
    """Seconds from ``since`` to the first batch with rows committed after it (any driver)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        status = files.status()
        if status and status.written_at is not None and status.written_at > since and status.counts.input_records:
            return status.written_at - since
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
    parser.add_argument("--mid-write-kill", type=int, default=2, help="which kill (1-based) waits for a file write")
    parser.add_argument("--outage", type=float, default=20.0, help="seconds the broker stays stopped")
    parser.add_argument("--port", type=int, default=29192,
                        help="the soak broker's port; + 1 controller, + 2 SASL_SSL, + 7 the alert sink")  # fmt: skip
    parser.add_argument("--max-batch", type=int, default=100_000, help="the spec's max_offsets_per_trigger")
    parser.add_argument("--reauth-ms", type=int, default=10_000, help="the broker's connections.max.reauth.ms")
    parser.add_argument("--no-revoke", action="store_true", help="no terminal fault at the end")
    parser.add_argument("--halt-after-commit", type=int, default=None, metavar="N",
                        help="exactly once: the driver's JVM halts right after task 0 of batch N committed "
                             "its transaction, before commits/N (a kill a rerun must not duplicate)")  # fmt: skip
    parser.add_argument(
        "--delivery",
        choices=("at_least_once", "exactly_once"),
        default="at_least_once",
        help="the spec's output.delivery: exactly_once must leave no duplicate on Kafka either",
    )
    parser.add_argument("--catch-up", type=float, default=900.0, help="seconds to wait for the job to catch up")
    args = parser.parse_args(argv)

    user = "soakjob"
    broker = SoakBroker(
        HOME / ".local" / f"soak-kafka-{args.port}", args.port, args.port + 1, secure_port=args.port + 2,
        scram_users={user: f"soak-{secrets.token_urlsafe(12)}"}, reauth_ms=args.reauth_ms,
    )  # fmt: skip
    if broker.is_running():  # a previous run's broker: its settings (reauth) and users are this run's
        broker.stop(timeout=60)
    broker.start(timeout=180)
    bootstrap = broker.bootstrap  # PLAINTEXT: the soak's producer and checks; the job is on SASL_SSL as `user`
    os.environ["AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT"] = job_connection(broker, user)
    os.environ.setdefault("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    alert_port = args.port + 7
    os.environ["AIRFLOW_CONN_STREAMJOIN_ALERTS_WEBHOOK"] = json.dumps({"conn_type": "http", "host": "127.0.0.1",
        "port": alert_port, "schema": "http", "extra": {"endpoint": "/alerts"}})  # fmt: skip
    os.environ.pop("STREAMJOIN_ALERTS_FILE", None)  # the project default, include/alerts.yaml: that webhook
    if args.halt_after_commit is not None:  # every driver's JVM gets the crash point; it fires once (a rerun skips)
        os.environ["JAVA_TOOL_OPTIONS"] = f"-Dstreamjoin.kernel.fault=halt_after_commit:{args.halt_after_commit}:0"

    from streamjoin.airflow.lifecycle import stop_driver
    from streamjoin.core.topic_plan import plan_topics
    from streamjoin.kafka.admin import ensure_topics
    from streamjoin.kafka.clients import consume_all, end_offsets, produce_records

    name = f"soak_{uuid.uuid4().hex[:6]}"
    (HOME / "var" / "soak").mkdir(parents=True, exist_ok=True)
    spec_path = write_spec(HOME / "var" / "soak", name, args.max_batch, args.delivery)
    spec = load_spec(spec_path)
    out_root = HOME / "var" / "soak" / name / "enriched"
    alerts = AlertLog(alert_port, HOME / "var" / "soak" / name / "alerts.jsonl")
    alerts.start()
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
    print(f"soak {name}: {args.rate} records/s for {args.minutes} min, {args.kills} kills (kill "
          f"{args.mid_write_kill} during a write), broker outage {args.outage:.0f}s, then "
          f"{'no revocation' if args.no_revoke else 'the job user password revoked'}; broker {bootstrap} "
          f"(job on SASL_SSL 127.0.0.1:{args.port + 2} as {user}), alerts on 127.0.0.1:{alert_port}",
          flush=True)  # fmt: skip

    duration = args.minutes * 60
    faults: list[dict[str, Any]] = []
    fault_epochs: list[float] = []
    # kills spread over the run; the broker outage between the last two kills
    kill_times = [duration * (i + 1) / (args.kills + 2) for i in range(args.kills)]
    outage_at = duration * (args.kills + 0.5) / (args.kills + 2)
    schedule = sorted([(t, "kill") for t in kill_times] + [(outage_at, "broker")])
    kills = 0
    for at, kind in schedule:
        time.sleep(max(0.0, t0 + at - time.time()))
        if owner.error is not None:
            raise owner.error
        if kind == "kill":
            kills += 1
            if resumed_after(files, t0, 240) is None:
                print("the job never committed a batch", flush=True)
            if kills == args.mid_write_kill:
                hit = kill_mid_write(files, out_root, 120)
                if hit is None:
                    faults.append({"fault": "SIGKILL driver during a write", "at": round(time.time() - t0, 1),
                                   "skipped": "no file write seen within 120 s"})  # fmt: skip
                    fault_epochs.append(time.time())
                    continue
                fault_at = hit.pop("at_epoch")
                fault_epochs.append(fault_at)
                seconds = recovered_after(files, fault_at, hit.pop("run_id"), 300)
                hit.pop("driver_log")
                faults.append({"fault": "SIGKILL driver during a write", "at": round(fault_at - t0, 1), **hit,
                               "mid_write": hit["temporary_left"] and not hit["committed"],
                               "batch_ran_again": ran_again(files, hit["batch"]),
                               "recovered_s": None if seconds is None else round(seconds, 1)})  # fmt: skip
                print(f"fault: {faults[-1]}", flush=True)
                continue
            driver = files.driver()
            pid = driver.pid if driver else None
            if driver is None or pid is None or driver.pgid is None or not files.driver_alive():
                faults.append({"fault": "kill", "at": round(time.time() - t0, 1), "skipped": "no driver alive"})
                fault_epochs.append(time.time())
                continue
            status = files.status()
            run_id = status.run_id if status else None
            fault_at = time.time()
            fault_epochs.append(fault_at)
            os.killpg(driver.pgid, signal.SIGKILL)
            seconds = recovered_after(files, fault_at, run_id, 300)
            faults.append({"fault": "SIGKILL driver", "at": round(fault_at - t0, 1), "pid": pid,
                           "recovered_s": None if seconds is None else round(seconds, 1)})  # fmt: skip
        else:
            fault_at = time.time()
            fault_epochs.append(fault_at)
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
    print(f"stream ended: {producer.sent} records, {producer.achieved()}", flush=True)

    # caught up: the job committed every offset on the input topic
    topic = spec.inputs["clicks"].topic
    ends = end_offsets(bootstrap, topic)
    deadline = time.time() + args.catch_up
    while time.time() < deadline and owner.error is None:
        status = files.status()
        committed = status.end_offsets.get(topic, {}) if status else {}
        if all(int(committed.get(str(p), 0)) >= o for p, o in ends.items()):
            break
        time.sleep(1)
    caught_up_s = round(time.time() - (t0 + duration), 1)
    print(f"caught up {caught_up_s}s after the stream ended", flush=True)

    terminal: dict[str, Any] | None = None
    if not args.no_revoke and owner.error is None:
        # the terminal fault: the job user's password revoked on the running broker
        alive_before = files.driver_alive()
        revoked_at = time.time()
        fault_epochs.append(revoked_at)
        revoke(broker, user)
        print(f"revoked the password of {user}", flush=True)
        owner.join(timeout=600)
        time.sleep(2)  # the alert's POST lands a moment after the task failed
        failure = files.failure()
        terminal = {"fault": "password revoked", "at": round(revoked_at - t0, 1), "driver_alive_before": alive_before,
                    "task_failed_s": None if owner.failed_at is None else round(owner.failed_at - revoked_at, 1),
                    "task_error": None if owner.error is None else f"{type(owner.error).__name__}: {owner.error}"[:600],
                    "job_failure": None if failure is None or failure.at < revoked_at else
                    {"error": failure.error, "transient": failure.transient, "message": failure.message[:300],
                     "after_s": round(failure.at - revoked_at, 1)},
                    "driver_alive_after": files.driver_alive()}  # fmt: skip
    else:
        from streamjoin.airflow.operators.supervise import StopStreamJoinOperator

        StopStreamJoinOperator(task_id="stop", spec_path=str(spec_path), timeout=60).execute({})
        owner.join(timeout=120)
    stop_driver(files, timeout=30)

    # the alerts each fault produced: those that arrived after it and before the next one
    epochs = [*fault_epochs, None]
    for fault, since, until in zip([*faults, *([terminal] if terminal else [])], epochs, epochs[1:], strict=False):
        fault["alerts"] = alerts.between(since, until)
    if terminal:
        first = terminal["alerts"][0] if terminal["alerts"] else None
        terminal["alert_s"] = first["after_s"] if first else None
        faults.append(terminal)

    expected = {(int(p), o) for p, end in ends.items() for o in range(end)}
    # what the job committed (all of it once caught up): records past it were not processed, not lost
    status = files.status()
    done = {int(p): int(o) for p, o in (status.end_offsets.get(topic, {}) if status else {}).items()}
    processed = {(p, o) for p, o in expected if o < done.get(p, 0)}
    rows = file_coordinates(out_root)
    kafka_out = consume_all(bootstrap, spec.output.topic or "", timeout=900)  # read committed
    clicks = [json.loads(r.value)["click"] for r in kafka_out if r.value]
    uncommitted = consume_all(bootstrap, spec.output.topic or "", timeout=900, committed_only=False)
    result = {
        "pipeline": name, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)), "minutes": args.minutes,
        "rate": args.rate, **producer.achieved(), "produced": producer.sent,
        "producer_failures": len(producer.failed), "max_offsets_per_trigger": args.max_batch,
        "reauth_ms": args.reauth_ms, "job_security": "SASL_SSL SCRAM-SHA-512",
        "input_records": len(expected), "not_processed": len(expected) - len(processed), "file_rows": len(rows),
        "file_lost": len(processed - set(rows)), "file_duplicates": len(rows) - len(set(rows)),
        "file_unexpected": len(set(rows) - processed), "kafka_out_records": len(clicks),
        "kafka_out_distinct": len(set(clicks)), "kafka_out_duplicates": len(clicks) - len(set(clicks)),
        "kafka_out_missing": len(processed) - len(set(clicks)), "delivery": args.delivery,
        "halt_after_commit": args.halt_after_commit,
        "kafka_out_records_read_uncommitted": len(uncommitted),
        "restarts": len(files.supervisor().restarts), "owner_events": [e.event for e in owner.events],
        "faults": faults, "caught_up_after_end_s": caught_up_s,
        "owner_error": None if owner.error is None else str(owner.error)[:300], "alert_error": owner.alert_error,
        "alerts_received": len(alerts.received),
    }  # fmt: skip
    with open(RESULTS, "a") as out:
        out.write(json.dumps(result) + "\n")
    print(json.dumps(result, indent=1), flush=True)
    alerts.server.shutdown()
    ok = result["file_lost"] == 0 and result["file_duplicates"] == 0 and result["kafka_out_missing"] == 0
    ok = ok and result["file_unexpected"] == 0 and result["not_processed"] == 0
    if args.delivery == "exactly_once":
        ok = ok and result["kafka_out_duplicates"] == 0
    if terminal:
        ok = ok and terminal["alert_s"] is not None and owner.error is not None
    print("PASS" if ok else "FAIL", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
