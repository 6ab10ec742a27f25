"""A pipeline's metrics, in one place: its status record (:mod:`streamjoin.spark.heartbeat`) and the input
topics' end offsets -> named samples, which the plugin serves as Prometheus text
(:func:`prometheus_text`) and :mod:`streamjoin.airflow.metrics` sends through Airflow's ``[metrics]``
(StatsD, OpenTelemetry). Pure: no Airflow, no Spark.

Per pipeline: the last batch's id, input records, rates, duration, dead letters, output records and state
size; the totals of the query (Prometheus counters); the lag per topic-partition; the last progress and
the watermark. The engine drops no record as late (an out-of-order record is processed at its partition's
time): the records it drops are its dead letters.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from streamjoin.core.job_files import JobStatus
from streamjoin.core.supervision import partition_lag

PROMETHEUS_PREFIX = "streamjoin_"


@dataclass(frozen=True)
class Sample:
    """One value: ``name`` (without a prefix), its labels (``pipeline`` first), gauge or counter."""

    name: str
    value: float
    labels: tuple[tuple[str, str], ...]
    kind: Literal["gauge", "counter"] = "gauge"

    @property
    def tags(self) -> dict[str, str]:
        return dict(self.labels)


#: name -> (:class:`~streamjoin.core.job_files.JobStatus` field, ``counts.<field>`` or ``totals.<field>``, kind,
#: scale, help)
FIELDS: dict[str, tuple[str, Literal["gauge", "counter"], float, str]] = {
    "batch_id": ("batch_id", "gauge", 1, "Id of the last committed batch"),
    "batch_input_records": ("counts.input_records", "gauge", 1, "Records read by the last batch"),
    "input_records_per_second": ("input_rps", "gauge", 1, "Input rate of the last batch"),
    "processed_records_per_second": ("processed_rps", "gauge", 1, "Processing rate of the last batch"),
    "batch_duration_seconds": ("duration_ms", "gauge", 0.001, "Duration of the last batch"),
    "batch_dead_letters": ("counts.dead_letters", "gauge", 1, "Records of the last batch sent to dead letters"),
    "batch_output_records": ("counts.output_records", "gauge", 1, "Join results of the last batch"),
    "state_bytes": ("counts.state_bytes", "gauge", 1, "Size on disk of the join state the last batch wrote"),
    "input_records_total": ("totals.input_records", "counter", 1, "Records read by the query"),
    "dead_letters_total": ("totals.dead_letters", "counter", 1, "Records dropped (dead letters) by the query"),
    "output_records_total": ("totals.output_records", "counter", 1, "Join results written by the query"),
    "aggregate_updates_total": ("totals.aggregate_updates", "counter", 1, "Aggregate updates written"),
    "last_progress_timestamp_seconds": ("written_at", "gauge", 1, "When the job last reported (epoch s)"),
    "watermark_timestamp_seconds": ("watermark_ms", "gauge", 0.001, "Event time every stream partition reached"),
}
HELP = {name: text for name, (_, _, _, text) in FIELDS.items()} | {
    "lag_records": "Records on the input topic-partition not yet committed by the job",
    "restarts_total": "Restarts of the job by its owner",
}


def _field(status: JobStatus, path: str) -> Any:
    value: Any = status
    for part in path.split("."):
        value = getattr(value, part, None)
    return value


def samples(
    pipeline: str,
    status: JobStatus | None,
    latest: Mapping[str, Mapping[Any, int]] | None = None,
    restarts: int | None = None,
) -> list[Sample]:
    """The samples of ``pipeline`` from its status record (None: no batch yet), the input topics' end
    offsets (``{topic: {partition: offset}}``; lag is left out without them) and its owner's restart count."""
    base = (("pipeline", pipeline),)
    out = []
    for name, (path, kind, scale, _) in FIELDS.items():
        value = None if status is None else _field(status, path)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        out.append(Sample(name, value * scale if scale != 1 else value, base, kind))
    for (topic, partition), n in sorted(partition_lag(latest or {}, status.end_offsets if status else {}).items()):
        out.append(Sample("lag_records", n, (*base, ("topic", topic), ("partition", str(partition)))))
    if restarts is not None:
        out.append(Sample("restarts_total", restarts, base, "counter"))
    return out


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def prometheus_text(all_samples: Iterable[Sample]) -> str:
    """The Prometheus text exposition format (0.0.4): ``# HELP``/``# TYPE`` once per metric, then its samples."""
    by_name: dict[str, list[Sample]] = {}
    for sample in all_samples:
        by_name.setdefault(sample.name, []).append(sample)
    lines = []
    for name, group in by_name.items():
        full = PROMETHEUS_PREFIX + name
        lines += [f"# HELP {full} {HELP.get(name, name)}", f"# TYPE {full} {group[0].kind}"]
        for s in group:
            labels = ",".join(f'{k}="{_escape(v)}"' for k, v in s.labels)
            lines.append(f"{full}{{{labels}}} {float(s.value)!r}")
    return "\n".join(lines) + "\n" if lines else ""
