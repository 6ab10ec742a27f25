"""The job's heartbeat: a small JSON status record at ``<checkpoint>/status.json`` after every batch,
readable without Spark, and a stop marker (``<checkpoint>/stop``) the job honours between batches.

Status record fields: ``pipeline, query_id, run_id, batch_id, num_input_rows, input_rows_per_second,
processed_rows_per_second, batch_duration_ms, end_offsets ({topic: {partition: next offset}}),
last_batch_time (ISO UTC of the batch trigger), written_at (epoch s), pid``. It is written to a temp
file and renamed, so a reader never sees half a record. ``end_offsets`` are the source end offsets of
the last *committed* batch: lag = latest topic offsets minus these.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery, StreamingQueryListener

STATUS_FILE = "status.json"
STOP_FILE = "stop"


def write_json_atomic(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    partial.write_text(json.dumps(record, default=str))
    partial.replace(path)


def status_record(pipeline: str, progress: Any) -> dict[str, Any]:
    """The record from a ``StreamingQueryProgress`` (PySpark 4 listener event)."""
    ends: dict[str, dict[str, int]] = {}
    for source in progress.sources:
        raw = source.endOffset
        data = json.loads(raw) if isinstance(raw, str) and raw.startswith("{") else {}
        for topic, parts in data.items():
            ends.setdefault(topic, {}).update({str(p): int(o) for p, o in parts.items()})
    return {
        "pipeline": pipeline,
        "query_id": str(progress.id),
        "run_id": str(progress.runId),
        "batch_id": int(progress.batchId),
        "num_input_rows": int(progress.numInputRows),
        "input_rows_per_second": float(progress.inputRowsPerSecond or 0.0),
        "processed_rows_per_second": float(progress.processedRowsPerSecond or 0.0),
        "batch_duration_ms": int(progress.batchDuration),
        "end_offsets": ends,
        "last_batch_time": progress.timestamp,
        "written_at": time.time(),
        "pid": os.getpid(),
    }


class StatusListener(StreamingQueryListener):
    """Writes the status record of the pipeline's query after each progress event (committed batch)."""

    def __init__(self, pipeline: str, checkpoint_dir: str) -> None:
        self.pipeline = pipeline
        self.path = Path(checkpoint_dir) / STATUS_FILE

    def onQueryStarted(self, event: Any) -> None:
        print(f"streamjoin query started {self.pipeline} (id {event.id})", flush=True)

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        if progress.name != self.pipeline:
            return
        record = status_record(self.pipeline, progress)
        write_json_atomic(self.path, record)
        print(
            f"streamjoin progress batch {record['batch_id']}: {record['num_input_rows']} rows, "
            f"{record['input_rows_per_second']:.1f} in/s, {record['processed_rows_per_second']:.1f} processed/s, "
            f"{record['batch_duration_ms']} ms, offsets {json.dumps(record['end_offsets'])}",
            flush=True,
        )

    def onQueryIdle(self, event: Any) -> None:
        path = self.path
        if path.exists():  # keep freshness while idle: the job is alive and caught up
            try:
                record = json.loads(path.read_text())
                record["written_at"] = time.time()
                write_json_atomic(path, record)
            except (OSError, ValueError):
                pass

    def onQueryTerminated(self, event: Any) -> None:
        print(f"streamjoin query terminated {self.pipeline}: {event.exception or 'stopped'}", flush=True)


def attach(spark: SparkSession, pipeline: str, checkpoint_dir: str) -> StatusListener:
    listener = StatusListener(pipeline, checkpoint_dir)
    spark.streams.addListener(listener)
    return listener


def watch_stop_marker(query: StreamingQuery, checkpoint_dir: str, poll: float = 0.5) -> threading.Thread:
    """Stop ``query`` once ``<checkpoint>/stop`` exists, waiting for the running batch to finish first
    (the marker is removed when the job stops, so the next start runs)."""
    marker = Path(checkpoint_dir) / STOP_FILE

    def loop() -> None:
        while query.isActive:
            if marker.exists() and not query.status.get("isTriggerActive", False):
                print("streamjoin stop marker seen: stopping after the current batch", flush=True)
                query.stop()
                marker.unlink(missing_ok=True)
                return
            time.sleep(poll)

    thread = threading.Thread(target=loop, name="streamjoin-stop-marker", daemon=True)
    thread.start()
    return thread
