"""What the demo prints at the end: the per-region totals and where everything is."""

from __future__ import annotations

import os
from pathlib import Path

from streamjoin.core.codec import decode
from streamjoin.core.plans import resolve
from streamjoin.core.spec import Format, load_spec
from streamjoin.demo.sample import EXPECTED_TOTALS
from streamjoin.kafka.clients import consume_all

SPEC = "include/pipelines/clicks_per_region.yaml"


def read_totals(bootstrap: str, topic: str, fmt: Format) -> dict[str, int]:
    """The changelog's final table: the last value per region."""
    totals: dict[str, int] = {}
    for record in consume_all(bootstrap, topic, timeout=30):
        if record.key is not None:
            totals[record.key.decode()] = decode(record.value, fmt)
    return totals


def final_report(home: Path) -> str:
    spec = load_spec(home / SPEC)
    assert spec.aggregate is not None
    sink = spec.aggregate.output
    assert sink.topic is not None
    bootstrap = f"127.0.0.1:{os.environ.get('KAFKA_PORT', '19092')}"
    totals = read_totals(bootstrap, sink.topic, sink.value_format)
    lines = ["", f"clicks per region (final table of Kafka topic '{sink.topic}' at {bootstrap}):"]
    lines += [f"  {region:<10} {total:>6}" for region, total in sorted(totals.items())]
    verdict = "as expected" if totals == EXPECTED_TOTALS else f"EXPECTED {EXPECTED_TOTALS}"
    lines.append(f"  -> {verdict}")
    if sink.files:
        lines.append(f"changelog files (Parquet): {resolve(sink.files.path, home)}")
    lines += [
        f"enriched clicks topic: {spec.output.topic}; dead letters: {spec.dead_letter_topic}",
        f"Airflow run log: {home / 'var' / 'demo-run.log'}",
        "Airflow UI: run `make ui`, then open http://127.0.0.1:8080 "
        "(user admin, password in var/airflow/simple_auth_manager_passwords.json.generated)",
    ]
    return "\n".join(lines)
