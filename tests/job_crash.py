"""A streaming job that dies between a batch's outputs and its commit, as a killed driver would."""

from __future__ import annotations

from typing import Any


class Crash(RuntimeError):
    pass


def crashing_job(at_batch: int) -> type:
    """A :class:`~streamjoin.spark.job.StreamJob` that writes batch ``at_batch``'s outputs and state, then
    raises :class:`Crash` before committing it."""
    from streamjoin.spark.job import StreamJob

    class CrashingJob(StreamJob):
        def _run_batch(self, batch_id: int, start: Any, ends: Any, clock: Any = None) -> None:
            if batch_id == at_batch:
                self.writer(self._raw(start, ends), batch_id)
                raise Crash("driver died")
            super()._run_batch(batch_id, start, ends, clock)

    return CrashingJob
