"""The job's heartbeat: ``status.json`` in the checkpoint after every committed batch, refreshed while idle.

Fields: ``pipeline, query_id, run_id, batch_id, num_input_rows, input_rows_per_second,
processed_rows_per_second, batch_duration_ms, end_offsets ({topic: {partition: next offset}}),
last_batch_time (ISO UTC of the batch's start), written_at (epoch s), pid, watermarks ({stream input: the
event time all its partitions have reached}), watermark_ms (the smallest of them)``; the batch's counts
``dead_letters`` (records not processed: undecodable, null key on a side the join drops; this engine drops no
record as late), ``output_records`` (join results), ``aggregate_updates``, ``state_bytes`` (the state version
the batch wrote, on disk), and ``totals`` ({input_records, dead_letters, output_records, aggregate_updates}
summed over the batches of this query, across restarts), ``spark_ui`` (the driver's Spark UI, if any).
``end_offsets`` are those of the last *committed* batch: lag = latest topic offsets minus these. See
:mod:`streamjoin.core.job_files` and :mod:`streamjoin.core.metrics`.

Each batch also appends an entry to the history (``history.jsonl``, :class:`~streamjoin.core.job_files.History`):
``t, batch_id, run_id, input_records, input_rps, processed_rps, duration_ms, lag`` (records on the inputs
the batch's plan left for later, None if unknown), ``state_bytes, dead_letters, output_records``; while the
job is idle (caught up: lag 0), an entry with ``idle: true`` and no batch every ``HISTORY_IDLE_EVERY``.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from typing import Any

from streamjoin.core.job_files import BatchCounts, Offsets, PipelineFiles

#: while idle, a history entry this often (seconds): the plots show the idle time as such
HISTORY_IDLE_EVERY = 60.0


class Heartbeat:
    def __init__(
        self, files: PipelineFiles, pipeline: str, query_id: str, run_id: str, spark_ui: str | None = None
    ) -> None:
        self.files = files
        self.pipeline, self.query_id, self.run_id, self.spark_ui = pipeline, query_id, run_id, spark_ui
        self.history = files.history
        self._previous_start: float | None = None
        self._last_history = 0.0
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
        counts: BatchCounts | None = None,
        lag: int | None = None,
    ) -> dict[str, Any]:
        """Record a committed batch that started at ``started`` (epoch s) and took ``seconds``.

        :param counts: the batch writer's counts (its ``input_records`` are ``rows``)
        :param lag: records on the input topics the batch's plan left for later batches (None: unknown)
        """
        since = started - self._previous_start if self._previous_start is not None else seconds
        self._previous_start = started
        counts = counts or BatchCounts()
        batch = {
            "input_records": rows, "dead_letters": counts.dead_letters, "output_records": counts.output_records,
            "aggregate_updates": counts.aggregate_updates,
        }  # fmt: skip
        previous = self._last if self._last and self._last.get("query_id") == self.query_id else {}
        before = previous.get("totals") or {}
        totals = {name: int(before.get(name, 0)) + n for name, n in batch.items()}
        written = time.time()
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
            "written_at": written,
            "pid": os.getpid(),
            "watermarks": watermarks or {},
            "watermark_ms": min(watermarks.values()) if watermarks else None,
            **{name: n for name, n in batch.items() if name != "input_records"},
            "state_bytes": counts.state_bytes,
            "totals": totals,
            "spark_ui": self.spark_ui,
        }
        self._last = record
        self.files.write_status(record)
        self._last_history = written
        self.history.append({
            "t": round(written, 3), "batch_id": batch_id, "run_id": self.run_id, "input_records": rows,
            "input_rps": round(rows / since if since > 0 else 0.0, 3),
            "processed_rps": round(rows / seconds if seconds > 0 else 0.0, 3),
            "duration_ms": int(seconds * 1000), "lag": lag, "state_bytes": counts.state_bytes,
            "dead_letters": batch["dead_letters"], "output_records": batch["output_records"],
        })  # fmt: skip
        print(
            f"streamjoin progress batch {batch_id}: {rows} rows, {record['input_rows_per_second']:.1f} in/s, "
            f"{record['processed_rows_per_second']:.1f} processed/s, {record['batch_duration_ms']} ms, "
            f"offsets {json.dumps(record['end_offsets'])}",
            flush=True,
        )
        return record

    def idle(self, every: float = 1.0) -> None:
        """Keep the record fresh while caught up (at most every ``every`` seconds): the job is alive."""
        now = time.time()
        if self._last is not None and now - float(self._last.get("written_at", 0)) >= every:
            self._last = {
                **self._last,
                "run_id": self.run_id,
                "pid": os.getpid(),
                "written_at": now,
                "spark_ui": self.spark_ui,
            }
            self.files.write_status(self._last)
        if now - self._last_history >= HISTORY_IDLE_EVERY:
            self._last_history = now
            self.history.append({"t": round(now, 3), "run_id": self.run_id, "idle": True, "input_records": 0,
                                 "input_rps": 0.0, "lag": 0})  # fmt: skip
