"""The job's heartbeat: ``status.json`` in the checkpoint after every committed batch, refreshed while idle.

Fields: ``pipeline, query_id, run_id, batch_id, num_input_rows, input_rows_per_second,
processed_rows_per_second, batch_duration_ms, end_offsets ({topic: {partition: next offset}}),
last_batch_time (ISO UTC of the batch's start), written_at (epoch s), pid, watermarks ({stream input: the
event time all its partitions have reached}), watermark_ms (the smallest of them)``. ``end_offsets`` are those of
the last *committed* batch: lag = latest topic offsets minus these. See :mod:`streamjoin.core.job_files`.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from typing import Any

from streamjoin.core.job_files import Offsets, PipelineFiles


class Heartbeat:
    def __init__(self, files: PipelineFiles, pipeline: str, query_id: str, run_id: str) -> None:
        self.files = files
        self.pipeline, self.query_id, self.run_id = pipeline, query_id, run_id
        self._previous_start: float | None = None
        #: the last record, the previous run's at first (an idle restarted job is alive too)
        self._last: dict[str, Any] | None = files.status()

    def batch(
        self,
        batch_id: int,
        rows: int,
        started: float,
        seconds: float,
        end_offsets: Offsets,
        watermarks: dict[str, int] | None = None,
    ) -> dict[str, Any]:
        """Record a committed batch that started at ``started`` (epoch s) and took ``seconds``."""
        since = started - self._previous_start if self._previous_start is not None else seconds
        self._previous_start = started
        record = {
            "pipeline": self.pipeline,
            "query_id": self.query_id,
            "run_id": self.run_id,
            "batch_id": batch_id,
            "num_input_rows": rows,
            "input_rows_per_second": rows / since if since > 0 else 0.0,
            "processed_rows_per_second": rows / seconds if seconds > 0 else 0.0,
            "batch_duration_ms": int(seconds * 1000),
            "end_offsets": {
                t: {str(p): o for p, o in sorted(parts.items())} for t, parts in sorted(end_offsets.items())
            },
            "last_batch_time": datetime.fromtimestamp(started, UTC).isoformat(timespec="milliseconds"),
            "written_at": time.time(),
            "pid": os.getpid(),
            "watermarks": watermarks or {},
            "watermark_ms": min(watermarks.values()) if watermarks else None,
        }
        self._last = record
        self.files.write_status(record)
        print(
            f"streamjoin progress batch {batch_id}: {rows} rows, {record['input_rows_per_second']:.1f} in/s, "
            f"{record['processed_rows_per_second']:.1f} processed/s, {record['batch_duration_ms']} ms, "
            f"offsets {json.dumps(record['end_offsets'])}",
            flush=True,
        )
        return record

    def idle(self, every: float = 1.0) -> None:
        """Keep the record fresh while caught up (at most every ``every`` seconds): the job is alive."""
        if self._last is not None and time.time() - float(self._last.get("written_at", 0)) >= every:
            self._last = {**self._last, "run_id": self.run_id, "pid": os.getpid(), "written_at": time.time()}
            self.files.write_status(self._last)
