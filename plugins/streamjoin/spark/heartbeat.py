"""The job's heartbeat: ``status.json`` in the checkpoint after every committed batch, refreshed while idle
(:class:`~streamjoin.core.job_files.JobStatus`: its fields, in the one vocabulary of the job's records), and an
entry of the history (``history.jsonl``, :class:`~streamjoin.core.job_files.HistoryEntry`) per batch; while
the job is idle (caught up: lag 0), an entry with ``idle`` and no batch every ``HISTORY_IDLE_EVERY``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from datetime import UTC, datetime

from streamjoin.core.job_files import BatchCounts, HistoryEntry, JobStatus, Offsets, PipelineFiles

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
        self._last: JobStatus | None = files.status()

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
    ) -> JobStatus:
        """Record a committed batch that started at ``started`` (epoch s) and took ``seconds``.

        :param counts: the batch writer's counts (its ``input_records`` are ``rows``)
        :param lag: records on the input topics the batch's plan left for later batches (None: unknown)
        """
        since = started - self._previous_start if self._previous_start is not None else seconds
        self._previous_start = started
        counts = dataclasses.replace(counts or BatchCounts(), input_records=rows)
        previous = self._last if self._last is not None and self._last.query_id == self.query_id else None
        written = time.time()
        record = JobStatus(
            pipeline=self.pipeline, query_id=self.query_id, run_id=self.run_id, batch_id=batch_id,
            written_at=written, last_batch_time=datetime.fromtimestamp(started, UTC).isoformat(timespec="milliseconds"),
            pid=os.getpid(), counts=counts, input_rps=rows / since if since > 0 else 0.0,
            processed_rps=rows / seconds if seconds > 0 else 0.0, duration_ms=int(seconds * 1000),
            end_offsets={t: {str(p): o for p, o in sorted(parts.items())} for t, parts in sorted(end_offsets.items())},
            watermarks=dict(watermarks or {}), watermark_ms=min(watermarks.values()) if watermarks else None,
            totals=(previous.totals if previous is not None else BatchCounts()).plus(counts), spark_ui=self.spark_ui,
        )  # fmt: skip
        self._last = record
        self.files.write_status(record)
        self._last_history = written
        self.history.append(HistoryEntry(
            t=round(written, 3), batch_id=batch_id, run_id=self.run_id, input_records=rows,
            input_rps=round(record.input_rps or 0.0, 3), processed_rps=round(record.processed_rps or 0.0, 3),
            duration_ms=record.duration_ms, lag=lag, state_bytes=counts.state_bytes, dead_letters=counts.dead_letters,
            output_records=counts.output_records,
        ))  # fmt: skip
        print(
            f"streamjoin progress batch {batch_id}: {rows} rows, {record.input_rps:.1f} in/s, "
            f"{record.processed_rps:.1f} processed/s, {record.duration_ms} ms, "
            f"offsets {json.dumps(record.end_offsets)}",
            flush=True,
        )
        return record

    def idle(self, every: float = 1.0) -> None:
        """Keep the record fresh while caught up (at most every ``every`` seconds): the job is alive."""
        now = time.time()
        if self._last is not None and now - (self._last.written_at or 0.0) >= every:
            self._last = dataclasses.replace(
                self._last, run_id=self.run_id, pid=os.getpid(), written_at=now, spark_ui=self.spark_ui
            )
            self.files.write_status(self._last)
        if now - self._last_history >= HISTORY_IDLE_EVERY:
            self._last_history = now
            self.history.append(HistoryEntry(t=round(now, 3), run_id=self.run_id, idle=True, input_rps=0.0, lag=0))
