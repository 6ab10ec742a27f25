"""Send a pipeline's metrics (:func:`streamjoin.core.metrics.samples`) through Airflow's own metrics client,
so the user's ``[metrics]`` settings apply: StatsD (``statsd_on``, host, port, prefix, allow/block lists,
InfluxDB tags), Datadog, OpenTelemetry (``otel_on``).

Each sample is a gauge ``streamjoin.<name>`` tagged with ``pipeline`` (and ``topic``, ``partition``: OTel
attributes, InfluxDB/Datadog tags); with ``[metrics] legacy_names_on`` (Airflow's default) also, as Airflow
does for its own metrics, under a name carrying the tags for plain StatsD, which drops tags:
``streamjoin.<name>.<pipeline>[.<topic>.<partition>]`` (dots in a topic become ``__``). A new batch's
duration is also a timer, ``streamjoin.batch_duration``, sent once per batch and process.

Called by the owner's trigger (:class:`~streamjoin.airflow.triggers.StreamJobTrigger`) at every poll, in the
triggerer, whose metrics client Airflow set up; a process where Airflow did not (a test) sets it up here
from the same settings.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Mapping
from datetime import timedelta
from types import ModuleType
from typing import Any

from streamjoin.core.job_files import JobStatus
from streamjoin.core.metrics import Sample, samples

log = logging.getLogger(__name__)
PREFIX = "streamjoin"
#: pipeline -> the last batch whose duration this process sent as a timer
_timed: dict[str, int] = {}


def airflow_stats() -> ModuleType:
    """Airflow's metrics front (``airflow.observability.stats``), set up from ``[metrics]`` if this process
    has not done it yet (Airflow's triggerer, scheduler and api-server do at start)."""
    from airflow.observability import stats

    # the module that holds the client (airflow.observability.stats re-exports it): no factory = not set up
    if getattr(sys.modules[stats.initialize.__module__], "_factory", None) is None:
        from airflow.configuration import conf
        from airflow.observability.metrics import stats_utils

        stats.initialize(
            factory=stats_utils.get_stats_factory(),
            export_legacy_names=conf.getboolean("metrics", "legacy_names_on"),
        )
    return stats


def _legacy() -> bool:
    from airflow.configuration import conf

    return conf.getboolean("metrics", "legacy_names_on")


def legacy_name(sample: Sample) -> str:
    """The name with its tags in it, for StatsD without tags."""
    parts = [PREFIX, sample.name, *(value.replace(".", "__") for _, value in sample.labels)]
    return ".".join(parts)


def emit(all_samples: Iterable[Sample], stats: ModuleType | None = None, legacy: bool | None = None) -> int:
    """Send ``all_samples`` as gauges (see the module's doc); returns how many samples were sent."""
    stats = stats or airflow_stats()
    legacy = _legacy() if legacy is None else legacy
    sent = 0
    for sample in all_samples:
        stats.gauge(f"{PREFIX}.{sample.name}", sample.value, tags=sample.tags)
        if legacy:
            stats.gauge(legacy_name(sample), sample.value)
        sent += 1
    return sent


def publish(
    pipeline: str,
    status: JobStatus | None,
    latest: Mapping[str, Mapping[Any, int]] | None = None,
    restarts: int | None = None,
) -> int:
    """Send ``pipeline``'s metrics; never raises (metrics must not disturb supervision): returns how many
    samples were sent, 0 on failure."""
    try:
        stats = airflow_stats()
        count = emit(samples(pipeline, status, latest, restarts), stats)
        batch, duration = (status.batch_id, status.duration_ms) if status else (None, None)
        if batch is not None and duration is not None and _timed.get(pipeline) != batch:
            _timed[pipeline] = batch
            dt = timedelta(milliseconds=duration)
            stats.timing(f"{PREFIX}.batch_duration", dt, tags={"pipeline": pipeline})
            if _legacy():
                stats.timing(f"{PREFIX}.batch_duration.{pipeline}", dt)
        return count
    except Exception as exc:
        log.warning("streamjoin metrics of %s not sent: %s", pipeline, exc)
        return 0
