"""What the demo prints at the end: the output's final table, the day's quality check and where everything is."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from streamjoin.core.backfill import DAILY_DIR
from streamjoin.core.codec import decode
from streamjoin.core.plans import resolve
from streamjoin.core.spec import Format, PipelineSpec, load_spec
from streamjoin.demo.sample import EXPECTED_TOTALS
from streamjoin.kafka.client_config import KafkaTarget
from streamjoin.kafka.clients import consume_all
from streamjoin.quality.results import CheckResult, read_check_result

SPEC = "include/pipelines/clicks_per_region.yaml"


def final_table(kafka: KafkaTarget, topic: str, fmt: Format) -> dict[Any, Any]:
    """A changelog topic's final table: the last value per key, a tombstone deleting the key."""
    table: dict[Any, Any] = {}
    for record in consume_all(kafka, topic, timeout=30):
        if record.key is None:
            continue
        if record.value is None:
            table.pop(record.key.decode(), None)
        else:
            table[record.key.decode()] = decode(record.value, fmt)
    return table


def latest_check(spec: PipelineSpec, home: Path | None = None) -> CheckResult | None:
    """The quality verdict of the newest published day of the pipeline's output, if one was checked."""
    if spec.output.files is None:
        return None
    daily = resolve(spec.output.files.path, *([home] if home else [])) / DAILY_DIR
    for partition in sorted(daily.glob("date=*"), reverse=True):
        result = read_check_result(partition)
        if result is not None:
            return result
    return None


def alerts_line(spec: PipelineSpec, home: Path) -> str:
    """Where the pipeline's alerts go, and how many the loopback receiver got (``var/alerts/received.jsonl``)."""
    from streamjoin.core.alerts import alerts_for, describe
    from streamjoin.localdev.alert_sink import DEFAULT_OUT

    received = home / DEFAULT_OUT.relative_to(DEFAULT_OUT.parents[2])
    count = len(received.read_text().splitlines()) if received.exists() else 0
    return (
        f"alerts go to {describe(alerts_for(spec, home))} (include/alerts.yaml); "
        f"the loopback receiver holds {count} in {received}"
    )


def final_report(home: Path) -> str:
    spec = load_spec(home / SPEC)
    assert spec.aggregate is not None
    sink = spec.aggregate.output
    assert sink.topic is not None
    bootstrap = f"127.0.0.1:{os.environ.get('KAFKA_PORT', '19092')}"
    totals = final_table(bootstrap, sink.topic, sink.value_format)
    lines = ["", f"clicks per region (final table of Kafka topic '{sink.topic}' at {bootstrap}):"]
    lines += [f"  {region:<10} {total:>6}" for region, total in sorted(totals.items())]
    verdict = "as expected" if totals == EXPECTED_TOTALS else f"EXPECTED {EXPECTED_TOTALS}"
    lines.append(f"  -> {verdict}")
    check = latest_check(spec, home)
    if check is None:
        lines.append("quality check: none found (did the check_quality task run?)")
    else:
        lines.append(f"quality check of {check.day} ({check.partition_path}): {check.summary()}")
        lines.append(f"Data Docs: {check.data_docs_url}")
    lines.append(alerts_line(spec, home))
    if sink.files:
        lines.append(f"changelog files (Parquet): {resolve(sink.files.path, home)}")
    lines += [
        f"enriched clicks topic: {spec.output.topic}; dead letters: {spec.dead_letter_topic}",
        f"Airflow run log: {home / 'var' / 'demo-run.log'}",
        "other example pipelines: `airflow dags test streamjoin_<name>_demo` for "
        + ", ".join(p.stem for p in sorted((home / "include/pipelines").glob("*.yaml")) if p.stem != spec.name),
        "Airflow UI: run `make ui`, then open http://127.0.0.1:8080 "
        "(user admin, password in var/airflow/simple_auth_manager_passwords.json.generated)",
    ]
    return "\n".join(lines)
