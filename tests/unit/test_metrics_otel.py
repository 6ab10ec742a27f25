"""Pipeline metrics through Airflow's OpenTelemetry metrics client to a real OTLP/HTTP receiver on loopback.

Airflow 3.3's ``[metrics] otel_on`` turns the client on; its endpoint comes from the standard OpenTelemetry
variables (``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``, ``OTEL_EXPORTER_OTLP_PROTOCOL``; Airflow's ``otel_host``
and ``otel_port`` are deprecated since 3.2). The receiver decodes each POST to ``/v1/metrics`` as an
``ExportMetricsServiceRequest`` (opentelemetry-proto), as a collector's OTLP/HTTP receiver does."""

from __future__ import annotations

import gzip
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)

from streamjoin.core.job_files import BatchCounts, JobStatus, PipelineFiles
from streamjoin.spark.heartbeat import Heartbeat

PIPELINE = "clicks_per_region"


@dataclass
class Receiver:
    """What the OTLP/HTTP receiver got: per metric name, its kind and data points (value, attributes)."""

    url: str
    requests: list[ExportMetricsServiceRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def points(self) -> dict[str, list[tuple[str, Any, dict[str, str]]]]:
        """metric name -> [(kind, value, attributes)] over every request received so far."""
        found: dict[str, list[tuple[str, Any, dict[str, str]]]] = {}
        with self.lock:
            requests = list(self.requests)
        for request in requests:
            for resource_metrics in request.resource_metrics:
                for scope in resource_metrics.scope_metrics:
                    for metric in scope.metrics:
                        kind = metric.WhichOneof("data")
                        data = getattr(metric, kind)
                        for point in data.data_points:
                            attributes = {a.key: a.value.string_value for a in point.attributes}
                            if kind == "histogram" or kind == "exponential_histogram":
                                value: Any = (point.count, point.sum)
                            else:
                                value = point.as_double if point.HasField("as_double") else point.as_int
                            found.setdefault(metric.name, []).append((kind, value, attributes))
        return found

    def services(self) -> set[str]:
        with self.lock:
            return {
                a.value.string_value
                for r in self.requests
                for rm in r.resource_metrics
                for a in rm.resource.attributes
                if a.key == "service.name"
            }


@pytest.fixture
def otlp_receiver() -> Iterator[Receiver]:
    """An OTLP/HTTP metrics receiver on a free loopback port (protobuf, optionally gzip)."""
    receiver = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/metrics" or self.headers.get("Content-Type") != "application/x-protobuf":
                self.send_response(404)
                self.end_headers()
                return
            request = ExportMetricsServiceRequest()
            request.ParseFromString(body)
            with receiver.lock:
                receiver.requests.append(request)
            answer = ExportMetricsServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, name="otlp-receiver", daemon=True)
    thread.start()
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/v1/metrics"
    yield receiver
    server.shutdown()
    server.server_close()


@pytest.fixture
def airflow_otel(otlp_receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    """Airflow's ``[metrics]`` with OpenTelemetry on (StatsD off), exporting to the receiver; Airflow's metrics
    client is set up again from those settings at first use, and put back afterwards."""
    from airflow.observability import stats as front

    stats = sys.modules[front.initialize.__module__]  # the module that holds Airflow's metrics client
    for name, value in {
        "AIRFLOW__METRICS__OTEL_ON": "True", "AIRFLOW__METRICS__STATSD_ON": "False",
        "AIRFLOW__METRICS__STATSD_DATADOG_ENABLED": "False", "AIRFLOW__METRICS__OTEL_PREFIX": "airflow",
        "AIRFLOW__METRICS__LEGACY_NAMES_ON": "False",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": otlp_receiver.url, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_SERVICE_NAME": "streamjoin-test", "OTEL_METRIC_EXPORT_INTERVAL": "60000",
    }.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    for attr in ("_factory", "_backend", "_export_legacy_names"):
        monkeypatch.setattr(stats, attr, getattr(stats, attr))  # restored after the test
    monkeypatch.setattr(stats, "_factory", None)
    monkeypatch.setattr(stats, "_backend", None)
    monkeypatch.setattr("streamjoin.airflow.metrics._timed", {})  # which batches' timers this process sent
    yield otlp_receiver
    import atexit

    from airflow._shared.observability.metrics import otel_logger
    from opentelemetry import metrics

    metrics.get_meter_provider().shutdown()  # type: ignore[attr-defined]  # while the receiver still answers
    atexit.unregister(otel_logger.flush_otel_metrics)  # Airflow's flush at exit: nothing is left to send


def _status(checkpoint: Path) -> JobStatus:
    beat = Heartbeat(PipelineFiles(checkpoint), PIPELINE, "q1", "run-1")
    counts = BatchCounts(dead_letters=2, output_records=30, state_bytes=4096)
    beat.batch(0, 30, 1_000.0, 0.5, {"clicks": {0: 20, 1: 10}, "regions": {0: 3}}, {"clicks": 5_000}, counts)
    beat.batch(1, 40, time.time(), 0.25, {"clicks": {0: 30, 1: 25}, "regions": {0: 3}}, {"clicks": 9_000}, counts)
    status = PipelineFiles(checkpoint).status()
    assert status is not None
    return status


def _flushed(receiver: Receiver, names: set[str]) -> dict[str, list[tuple[str, Any, dict[str, str]]]]:
    """Export now (as the periodic reader would) and wait until the receiver holds ``names`` (60 s at most)."""
    from opentelemetry import metrics

    deadline = time.monotonic() + 60
    while True:
        metrics.get_meter_provider().force_flush()  # type: ignore[attr-defined]
        points = receiver.points()
        if names <= points.keys() or time.monotonic() > deadline:
            return points
        time.sleep(0.2)


def test_the_pipeline_metrics_reach_an_otlp_receiver(tmp_path: Path, airflow_otel: Receiver) -> None:
    from streamjoin.airflow.metrics import publish

    status = _status(tmp_path / PIPELINE)
    sent = publish(PIPELINE, status, {"clicks": {0: 40, 1: 25}, "regions": {0: 3}}, restarts=2)
    assert sent > 0
    name = "airflow.streamjoin.%s"
    want = {name % n for n in ("batch_id", "lag_records", "dead_letters_total", "batch_duration")}
    points = _flushed(airflow_otel, want)
    assert want <= points.keys(), sorted(points)
    assert airflow_otel.services() == {"streamjoin-test"}

    def last(metric: str, **attributes: str) -> tuple[str, Any]:
        matching = [(k, v) for k, v, a in points[name % metric] if a == {"pipeline": PIPELINE, **attributes}]
        assert matching, points[name % metric]
        return matching[-1]

    assert last("batch_id") == ("gauge", 1)
    assert last("batch_input_records") == ("gauge", 40)
    assert last("batch_duration_seconds") == ("gauge", 0.25)
    assert last("batch_dead_letters") == ("gauge", 2)
    assert last("dead_letters_total") == ("gauge", 4)
    assert last("input_records_total") == ("gauge", 70)
    assert last("state_bytes") == ("gauge", 4096)
    assert last("restarts_total") == ("gauge", 2)
    assert last("lag_records", topic="clicks", partition="0") == ("gauge", 10)
    assert last("lag_records", topic="clicks", partition="1") == ("gauge", 0)
    assert last("lag_records", topic="regions", partition="0") == ("gauge", 0)
    # the batch's duration as a timer: one observation of 250 ms in a histogram
    kind, (count, total) = last("batch_duration")
    assert kind == "exponential_histogram" and count == 1 and total == 250.0
