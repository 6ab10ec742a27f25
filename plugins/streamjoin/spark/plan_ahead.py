"""The driver plans batch N+1 while batch N's Spark job runs.

A plan needs only where the batch starts (batch N's planned ends, known before N runs) and the broker's
offsets: partitions, end offsets, offsets-for-time (:func:`streamjoin.core.batch_plan.plan_batch` uses no
partition time). So a thread asks the broker while the job runs; it uses Kafka's admin client only, no
Spark. Nothing is logged there: the main thread logs batch N+1's offsets after ``commits/N``, as without
the overlap, so a crash in between re-runs exactly the logged batch N and plans N+1 again.

A plan made ahead is taken only where planning again after N's commit would cut the batch by the same rule:
an available-now run (its end offsets capped by the ceiling read at the start), or a batch cut at
``max_offsets_per_trigger`` (a backlog: records were left behind). A plan that took everything there was
(caught up) is made again after the commit, so records that arrived while N ran are not held back a batch.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from streamjoin.core.batch_plan import BatchPlan, SourceOrder, TopicPartition

log = logging.getLogger("streamjoin.job")


@dataclass(frozen=True)
class NextBatch:
    """A batch planned: its input partitions, where it starts, its plan, and the end offsets it saw."""

    partitions: list[TopicPartition]
    start: dict[TopicPartition, int]
    plan: BatchPlan
    latest: dict[TopicPartition, int]

    def cut_by_size(self, sources: Mapping[str, SourceOrder]) -> bool:
        """The plan left records of a time-synchronised partition for later (cut at the batch size)."""
        return any(self.latest[tp] > self.plan.end[tp] for tp in self.plan.end if sources[tp[0]].synchronized)


class _Planning(threading.Thread):
    def __init__(self, batch_id: int, plan: Callable[[], NextBatch]) -> None:
        super().__init__(name=f"streamjoin-plan-{batch_id}", daemon=True)
        self.batch_id, self._plan = batch_id, plan
        self.result: NextBatch | None = None
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            self.result = self._plan()
        except Exception as exc:  # the main thread plans again, and raises if it fails too
            self.error = exc


class PlanAhead:
    """At most one batch planned in the background at a time."""

    def __init__(self) -> None:
        self._planning: _Planning | None = None

    def start(self, batch_id: int, plan: Callable[[], NextBatch]) -> None:
        """Plan batch ``batch_id`` with ``plan`` in a thread (a planning not taken is dropped)."""
        self._planning = _Planning(batch_id, plan)
        self._planning.start()

    def take(self, batch_id: int, sources: Mapping[str, SourceOrder], *, bounded: bool) -> NextBatch | None:
        """Batch ``batch_id``'s plan made ahead, waiting for it if need be; None if there is none, it failed,
        or planning now could take more records (see the module's doc).

        :param bounded: an available-now run: the end offsets are capped by its ceiling
        """
        planning, self._planning = self._planning, None
        if planning is None or planning.batch_id != batch_id:
            return None
        planning.join()
        if planning.error is not None:
            log.warning("planning batch %s ahead failed, it is planned again: %s", batch_id, planning.error)
            return None
        ahead = planning.result
        if ahead is None or not (bounded or ahead.cut_by_size(sources)):
            return None
        return ahead


@dataclass(frozen=True)
class DriverClock:
    """The driver's side of one batch, for its batch line: ``since``, when the driver began on it (the end
    of the batch before, idle polls and the trigger's wait left out; ``time.monotonic()``); ``plan_ms``, how
    long the main thread spent getting its plan; ``ahead``, whether that plan was made while the batch
    before ran."""

    since: float
    plan_ms: int
    ahead: bool
