"""The trigger that watches a pipeline's streaming job for its owning task, in the triggerer.

Each poll reads the job files (driver pid, status heartbeat, intent) and the input topics' end offsets in
a thread (``asyncio.to_thread``: the triggerer's event loop never blocks), sends the job's metrics through
Airflow's ``[metrics]`` (:mod:`streamjoin.airflow.metrics`), and fires one event when the
owner must act (:class:`~streamjoin.core.supervision.Event`). The trigger only reads: two copies of it
(a triggerer handing it over) fire the same event, and the task acts once. ``on_kill`` (a user marks the
task failed, or clears it) stops the job; ``cleanup`` does not (a triggerer restart must not stop it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from streamjoin.airflow.metrics import publish
from streamjoin.core.job_files import PipelineFiles, WatchEvent
from streamjoin.core.supervision import Health, Policy, observe, watch_step


class StreamJobTrigger(BaseTrigger):
    """Fires once the job died, was stopped or redeployed, lags beyond the policy's grace, or ``watch_until``
    (epoch s) passed; the event's payload is a :class:`~streamjoin.core.job_files.WatchEvent`.

    :param checkpoint: the pipeline's checkpoint folder (its job files)
    :param topics: the input topics (lag)
    :param kafka_conn_id: the Kafka connection (read in the triggerer: no secret is serialized here)
    :param policy: :class:`Policy` fields
    :param waiting: the job is meant to be down (see :func:`~streamjoin.core.supervision.watch_step`)
    :param lagging_since: carried over from the previous deferral
    :param restart_after: a dead driver's restart backs off until then (epoch s)
    """

    def __init__(
        self,
        *,
        checkpoint: str,
        topics: list[str],
        kafka_conn_id: str,
        policy: dict[str, Any],
        watch_until: float,
        poll: float = 10.0,
        waiting: bool = False,
        lagging_since: float | None = None,
        restart_after: float | None = None,
    ) -> None:
        super().__init__()
        self.checkpoint, self.topics, self.kafka_conn_id = checkpoint, list(topics), kafka_conn_id
        self.policy, self.watch_until, self.poll = dict(policy), float(watch_until), float(poll)
        self.waiting, self.lagging_since, self.restart_after = bool(waiting), lagging_since, restart_after

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"checkpoint": self.checkpoint, "topics": self.topics, "kafka_conn_id": self.kafka_conn_id,
             "policy": self.policy, "watch_until": self.watch_until, "poll": self.poll, "waiting": self.waiting,
             "lagging_since": self.lagging_since, "restart_after": self.restart_after},
        )  # fmt: skip

    @property
    def files(self) -> PipelineFiles:
        return PipelineFiles(Path(self.checkpoint))

    def _latest(self) -> dict[str, dict[int, int]]:
        """The input topics' end offsets; ``{}`` when Kafka does not answer (no lag known, no lag alert)."""
        from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook
        from streamjoin.kafka.clients import end_offsets

        try:
            kafka = StreamJoinKafkaHook(self.kafka_conn_id).kafka_config()
            return {t: end_offsets(kafka, t, timeout=5) for t in self.topics}
        except Exception as exc:  # the broker may be down: the job's own state still counts
            self.log.warning("end offsets unavailable: %s", exc)
            return {}

    def _observe(self) -> tuple[Health, str]:
        from streamjoin.airflow.lifecycle import driver_alive

        files = self.files
        alive = driver_alive(files)  # a local pid, or the cluster manager asked (cluster deploy mode)
        latest = self._latest() if alive else {}
        publish(Path(self.checkpoint).name, files.status(), latest, len(files.supervisor().restarts))
        return observe(files, latest, time.time(), Policy(**self.policy), alive=alive), files.intent()

    async def run(self) -> AsyncIterator[TriggerEvent]:
        policy = Policy(**self.policy)
        lagging_since = self.lagging_since
        while True:
            health, intent = await asyncio.to_thread(self._observe)
            now = time.time()
            event, lagging_since = watch_step(
                health, intent, waiting=self.waiting, lagging_since=lagging_since, now=now,
                watch_until=self.watch_until, policy=policy, restart_after=self.restart_after,
            )  # fmt: skip
            if event is not None:
                self.log.info("%s: %s (%s)", self.checkpoint, event.value, health.reason)
                watched = WatchEvent(event.value, health.state.value, health.reason, health.lag, lagging_since, now)
                yield TriggerEvent(watched.to_json())
                return
            await asyncio.sleep(self.poll)

    async def on_kill(self) -> None:
        from streamjoin.airflow.lifecycle import stop_driver

        await asyncio.to_thread(stop_driver, self.files, self.log, 60.0)


def policy_kwargs(policy: Policy) -> dict[str, Any]:
    return asdict(policy)
