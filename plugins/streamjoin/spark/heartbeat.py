"""The job's heartbeat: ``status.json`` in the checkpoint after every committed batch, refreshed while idle.

Fields: ``pipeline, query_id, run_id, batch_id, num_input_rows, input_rows_per_second,
processed_rows_per_second, batch_duration_ms, end_offsets ({topic: {partition: next offset}}),
last_batch_time (ISO UTC of the batch's start), written_at (epoch s), pid, watermarks ({stream input: the
event time all its partitions have reached}), watermark_ms (the smallest of them)``; the batch's counts
``dead_letters`` (records not processed: undecodable, null key on a side the join drops; this engine drops no
record as late), ``output_records`` (join results), ``aggregate_updates``, ``state_bytes`` (the state version
the batch wrote, on disk), and ``totals`` ({input_records, dead_letters, output_records, aggregate_updates}
summed over the batches of this query, across restarts). ``end_offsets`` are those of the last *committed*
batch: lag = latest topic offsets minus these. See :mod:`streamjoin.core.job_files` and
:mod:`streamjoin.core.metrics`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
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
        counts: Mapping[str, int] | None = None,
    ) -> dict[str, Any]:
        """Record a committed batch that started at ``started`` (epoch s) and took ``seconds``.

        :param counts: the batch writer's counts (``dead_lettered``, ``join_results``, ``aggregate_updates``,
            ``state_bytes``)
        """
        since = started - self._previous_start if self._previous_start is not None else seconds
        self._previous_start = started
        counts = counts or {}
        batch = {
            "input_records": rows, "dead_letters": int(counts.get("dead_lettered", 0)),
            "output_records": int(counts.get("join_results", 0)),
            "aggregate_updates": int(counts.get("aggregate_updates", 0)),
        }  # fmt: skip
        previous = self._last if self._last and self._last.get("query_id") == self.query_id else {}
        before = previous.get("totals") or {}
        totals = {name: int(before.get(name, 0)) + n for name, n in batch.items()}
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
            **{name: n for name, n in batch.items() if name != "input_records"},
            "state_bytes": counts.get("state_bytes"),
            "totals": totals,
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
