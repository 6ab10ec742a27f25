"""Pipeline metrics: status records written by the real heartbeat -> samples -> Prometheus text, and the same
samples through Airflow's own StatsD client (configured from ``[metrics]`` by Airflow's factory) to a UDP
listener on loopback, sent by the owner's trigger at its poll."""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamjoin.core.job_files import BatchCounts, JobStatus, PipelineFiles
from streamjoin.core.metrics import prometheus_text, samples
from streamjoin.spark.heartbeat import Heartbeat

PIPELINE = "clicks_per_region"
OFFSETS = {"clicks": {0: 40, 1: 25}, "regions": {0: 3}}
COUNTS = BatchCounts(dead_letters=2, output_records=30, state_bytes=4096)


def _heartbeat(checkpoint: Path, query: str = "q1") -> Heartbeat:
    return Heartbeat(PipelineFiles(checkpoint), PIPELINE, query, "run-1")


def _two_batches(checkpoint: Path) -> JobStatus:
    beat = _heartbeat(checkpoint)
    beat.batch(0, 30, 1_000.0, 0.5, {"clicks": {0: 20, 1: 10}, "regions": {0: 3}}, {"clicks": 5_000}, COUNTS)
    started = time.time()
    beat.batch(1, 40, started, 0.25, {"clicks": {0: 30, 1: 25}, "regions": {0: 3}}, {"clicks": 9_000}, COUNTS)
    status = PipelineFiles(checkpoint).status()
    assert status is not None
    return status


def test_samples_from_the_heartbeat_and_their_prometheus_text(tmp_path: Path) -> None:
    status = _two_batches(tmp_path)
    latest = {"clicks": {0: 40, 1: 25}, "regions": {0: 3}}
    got = {(s.name, s.labels): (s.value, s.kind) for s in samples(PIPELINE, status, latest, restarts=1)}
    base = (("pipeline", PIPELINE),)
    assert got[("batch_id", base)] == (1, "gauge")
    assert got[("batch_input_records", base)] == (40, "gauge")
    assert got[("processed_records_per_second", base)] == (160.0, "gauge")
    assert got[("batch_duration_seconds", base)] == (0.25, "gauge")
    assert got[("batch_dead_letters", base)] == (2, "gauge")
    assert got[("batch_output_records", base)] == (30, "gauge")
    assert got[("state_bytes", base)] == (4096, "gauge")
    assert got[("input_records_total", base)] == (70, "counter")
    assert got[("dead_letters_total", base)] == (4, "counter")
    assert got[("output_records_total", base)] == (60, "counter")
    assert got[("restarts_total", base)] == (1, "counter")
    assert got[("watermark_timestamp_seconds", base)] == (9.0, "gauge")
    lag = {s.labels[1:]: s.value for s in samples(PIPELINE, status, latest) if s.name == "lag_records"}
    assert lag == {
        (("topic", "clicks"), ("partition", "0")): 10,
        (("topic", "clicks"), ("partition", "1")): 0,
        (("topic", "regions"), ("partition", "0")): 0,
    }

    text = prometheus_text(samples(PIPELINE, status, latest))
    assert text.count("# TYPE streamjoin_lag_records gauge") == 1
    assert 'streamjoin_lag_records{pipeline="clicks_per_region",topic="clicks",partition="0"} 10.0' in text
    assert "# TYPE streamjoin_dead_letters_total counter" in text
    assert 'streamjoin_dead_letters_total{pipeline="clicks_per_region"} 4.0' in text
    assert 'streamjoin_batch_duration_seconds{pipeline="clicks_per_region"} 0.25' in text
    # without a status record or Kafka: no samples, no lag (nothing invented)
    assert samples(PIPELINE, None, None) == [] and prometheus_text([]) == ""


def test_totals_continue_across_a_restart_of_the_same_query_only(tmp_path: Path) -> None:
    _two_batches(tmp_path)
    again = _heartbeat(tmp_path)  # the restarted job reads the previous run's record
    again.batch(2, 5, time.time(), 0.1, {"clicks": {0: 35, 1: 25}}, None, BatchCounts(dead_letters=1))
    status = PipelineFiles(tmp_path).status()
    assert status is not None and status.totals.input_records == 75 and status.totals.dead_letters == 5
    fresh = _heartbeat(tmp_path, query="q2")  # a new checkpoint query: its own totals
    fresh.batch(0, 7, time.time(), 0.1, {"clicks": {0: 7}}, None, BatchCounts())
    status = PipelineFiles(tmp_path).status()
    assert status is not None and status.totals == BatchCounts(input_records=7)
    assert status.to_json()["totals"] == {"input_records": 7, "output_records": 0, "dead_letters": 0,
                                          "aggregate_updates": 0}  # fmt: skip


@pytest.fixture
def statsd_listener(monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    """A UDP socket on loopback, and Airflow's ``[metrics]`` pointing StatsD at it; Airflow's metrics client is
    set up again from those settings at first use (and put back afterwards)."""
    from airflow.observability import stats as front

    stats = sys.modules[front.initialize.__module__]  # the module that holds Airflow's metrics client
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(30)
    for name, value in {
        "STATSD_ON": "True", "OTEL_ON": "False", "STATSD_DATADOG_ENABLED": "False", "STATSD_HOST": "127.0.0.1",
        "STATSD_PORT": str(sock.getsockname()[1]), "STATSD_PREFIX": "airflow", "LEGACY_NAMES_ON": "True",
    }.items():  # fmt: skip
        monkeypatch.setenv(f"AIRFLOW__METRICS__{name}", value)
    for attr in ("_factory", "_backend", "_export_legacy_names"):
        monkeypatch.setattr(stats, attr, getattr(stats, attr))  # restored after the test
    monkeypatch.setattr(stats, "_factory", None)
    monkeypatch.setattr(stats, "_backend", None)
    yield sock
    sock.close()


def _received(sock: socket.socket, until: set[str]) -> dict[str, str]:
    """``name -> value|type`` of the StatsD lines received until every name of ``until`` came (30 s at most)."""
    lines: dict[str, str] = {}
    deadline = time.monotonic() + 30
    while not until <= lines.keys() and time.monotonic() < deadline:
        try:
            packet = sock.recv(65536).decode()
        except TimeoutError:
            break
        for line in packet.splitlines():
            name, _, rest = line.partition(":")
            lines[name] = rest
    return lines


def test_the_trigger_sends_the_metrics_through_airflow_statsd(tmp_path: Path, statsd_listener: socket.socket) -> None:
    from streamjoin.airflow.metrics import publish
    from streamjoin.airflow.triggers import StreamJobTrigger

    checkpoint = tmp_path / PIPELINE
    status = _two_batches(checkpoint)
    # the owner's trigger at one poll (no driver alive: no Kafka asked, no lag)
    trigger = StreamJobTrigger(checkpoint=str(checkpoint), topics=["clicks"], kafka_conn_id="none", policy={},
                               watch_until=time.time() + 60)  # fmt: skip
    health, intent = trigger._observe()
    assert health.state.value == "dead" and intent == "run"
    p = f"airflow.streamjoin.%s.{PIPELINE}"
    want = {p % "batch_id", p % "dead_letters_total", p % "batch_duration_seconds", "airflow.streamjoin.batch_id",
            f"airflow.streamjoin.batch_duration.{PIPELINE}", "airflow.streamjoin.batch_duration"}  # fmt: skip
    got = _received(statsd_listener, want)
    assert want <= got.keys(), sorted(got)
    assert got[p % "batch_id"] == "1|g" and got[p % "dead_letters_total"] == "4|g"
    assert got[p % "batch_input_records"] == "40|g" and got[p % "state_bytes"] == "4096|g"
    assert got[p % "batch_duration_seconds"] == "0.25|g"
    value, kind = got[f"airflow.streamjoin.batch_duration.{PIPELINE}"].split("|")
    assert float(value) == 250 and kind == "ms"
    assert not any(".lag_records" in name for name in got)

    # with the topics' end offsets: lag per topic-partition; the batch's timer is not sent twice
    assert publish(PIPELINE, status, OFFSETS) > 0
    lag = f"airflow.streamjoin.lag_records.{PIPELINE}.clicks.%d"
    got = _received(statsd_listener, {lag % 0, lag % 1, f"airflow.streamjoin.lag_records.{PIPELINE}.regions.0"})
    assert got[lag % 0] == "10|g" and got[lag % 1] == "0|g"
    assert "airflow.streamjoin.batch_duration" not in got
