"""Builds a pipeline's DAG from its spec: provision co-partitioned topics, then run the join job.

DAG files call :func:`pipeline_dag`; nothing here imports pyspark, so the dag-processor parses fast.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, task

from streamjoin.airflow.operators.provision_topics import ProvisionTopicsOperator
from streamjoin.airflow.operators.stream_join import StreamJoinJobOperator
from streamjoin.core.plans import resolve
from streamjoin.core.spec import load_spec

KAFKA_CONN_ID = "streamjoin_kafka_default"


def pipeline_dag(spec_path: str, *, dag_id: str | None = None, demo: bool = False, **dag_kwargs: Any) -> DAG:
    """A DAG that provisions the pipeline's topics and runs its join job.

    :param demo: also reset the pipeline, produce the seed-style sample data before the join and report
        the per-region totals after it; the job then stops once the sample is processed.
    """
    spec = load_spec(resolve(spec_path))
    dag_kwargs.setdefault("schedule", None)
    dag_kwargs.setdefault("start_date", datetime(2026, 1, 1))
    dag_kwargs.setdefault("catchup", False)
    dag_kwargs.setdefault("max_active_runs", 1)
    with DAG(
        dag_id or f"streamjoin_{spec.name}" + ("_demo" if demo else ""),
        description=spec.description or f"streamjoin pipeline {spec.name}",
        tags=["streamjoin", spec.join.shape.value],
        doc_md=f"Join `{spec.join.left}` {spec.join.kind.value}-{spec.join.shape.value} `{spec.join.right}` "
        f"from `{spec_path}`.",
        **dag_kwargs,
    ) as dag:
        provision = ProvisionTopicsOperator(
            task_id="provision_topics", spec_path=spec_path, kafka_conn_id=KAFKA_CONN_ID
        )
        run = StreamJoinJobOperator(
            task_id="run_join", spec_path=spec_path, kafka_conn_id=KAFKA_CONN_ID, available_now=demo
        )
        if demo:
            reset = reset_pipeline.override(task_id="reset_demo")(spec_path)
            produce = produce_sample.override(task_id="produce_sample")(spec_path)
            report = report_totals.override(task_id="report_totals")(spec_path)
            reset >> provision >> produce >> run >> report
        else:
            provision >> run
    return dag


@task
def reset_pipeline(spec_path: str) -> list[str]:
    """Demo only: delete the pipeline's topics and checkpoint so every demo run starts from nothing."""
    import shutil

    from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook
    from streamjoin.core.plans import checkpoint_dir
    from streamjoin.kafka.admin import delete_topics
    from streamjoin.kafka.topics import plan_topics

    spec = load_spec(resolve(spec_path))
    names = [t.name for t in plan_topics(spec).topics]
    delete_topics(StreamJoinKafkaHook(KAFKA_CONN_ID).admin_config(), names)
    shutil.rmtree(checkpoint_dir(spec), ignore_errors=True)
    for sink in (spec.output, spec.aggregate.output if spec.aggregate else None):
        if sink is not None and sink.files is not None:
            shutil.rmtree(resolve(sink.files.path), ignore_errors=True)
    return names


@task
def produce_sample(spec_path: str) -> int:
    """Demo only: the seed-style sample (region change, unknown user, a null key) at recent timestamps."""
    import time

    from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook
    from streamjoin.core.codec import encode
    from streamjoin.demo.sample import sample_records
    from streamjoin.kafka.clients import produce_records

    spec = load_spec(resolve(spec_path))
    base = int(time.time() * 1000) - 60_000
    rows: list[tuple[str, bytes | None, bytes | None, int, list[tuple[str, bytes]]]] = []
    for record in sample_records(spec.left.topic, spec.right.topic):
        _, spec_input = spec.input_by_topic(record.topic)
        key = None if record.key is None else record.key.encode()
        rows.append((record.topic, key, encode(record.value, spec_input.value.format), base + record.offset_ms, []))
    produce_records(StreamJoinKafkaHook(KAFKA_CONN_ID).bootstrap_servers(), rows)
    return len(rows)


@task
def report_totals(spec_path: str) -> dict[str, Any]:
    """Demo only: the aggregate's final table as read back from its output topic."""
    from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook
    from streamjoin.core.codec import decode
    from streamjoin.kafka.clients import consume_all

    spec = load_spec(resolve(spec_path))
    assert spec.aggregate is not None
    sink = spec.aggregate.output
    assert sink.topic is not None
    totals: dict[str, Any] = {}
    for record in consume_all(StreamJoinKafkaHook(KAFKA_CONN_ID).bootstrap_servers(), sink.topic, timeout=30):
        if record.key is not None:
            totals[record.key.decode()] = decode(record.value, sink.value_format)
    width = max((len(k) for k in totals), default=6)
    lines = [f"{region:<{width}}  {total:>8}" for region, total in sorted(totals.items())]
    body = "\n".join(lines)
    print(f"clicks per region (from topic {sink.topic}):\n{body}", flush=True)
    files = resolve(sink.files.path) if sink.files else None
    return {"totals": totals, "topic": sink.topic, "files": str(files) if files else None}


def spec_paths(directory: str | None = None) -> list[str]:
    """Every pipeline spec under ``directory`` (default ``$STREAMJOIN_PIPELINES_DIR`` or
    ``include/pipelines``), as paths relative to the project home unless the directory is absolute."""
    directory = directory or os.environ.get("STREAMJOIN_PIPELINES_DIR", "include/pipelines")
    return sorted(f"{directory}/{p.name}" for p in Path(resolve(directory)).glob("*.yaml"))
