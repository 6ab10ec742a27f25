"""The demo DAG of an example pipeline (``dags/streamjoin_demos.py``): reset the pipeline, provision its topics,
produce its sample data on yesterday (UTC), run the join until the sample is processed, reprocess and check
the day (one Spark application), report the output's final table. Demo only: it deletes the pipeline's topics,
checkpoint and output, so it is kept apart from the product's :mod:`~streamjoin.airflow.dag_factory`.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import DAG, BaseOperator, task

from streamjoin.airflow.dag_factory import DATA_DOCS, KAFKA_CONN_ID, joined, pipeline_dag_args, what_it_joins
from streamjoin.airflow.operators.provision_topics import ProvisionTopicsOperator
from streamjoin.airflow.operators.stream_join import StreamJoinJobOperator
from streamjoin.core.plans import resolve
from streamjoin.core.spec import Format, Input, PipelineSpec, load_spec


def demo_dag(spec_path: str, *, dag_id: str | None = None, **dag_kwargs: Any) -> DAG:
    """The demo DAG of the pipeline at ``spec_path`` (no schedule: triggered by hand or by ``make demo``); the
    day's Data Docs go under ``var/data_docs``."""
    spec = load_spec(resolve(spec_path))
    dag_kwargs.setdefault("schedule", None)
    with DAG(
        dag_id or f"streamjoin_{spec.name}_demo",
        description=f"Demo only, resets {spec.name} (topics, checkpoint, output): trigger it to try the pipeline; "
        f"{what_it_joins(spec)}",
        tags=["streamjoin", *dict.fromkeys(stage.shape.value for stage in spec.stages), "demo"],
        doc_md=_doc(spec, spec_path),
        **pipeline_dag_args(spec_path, dag_kwargs),
    ) as dag:
        provision = ProvisionTopicsOperator(
            task_id="provision_topics", spec_path=spec_path, kafka_conn_id=KAFKA_CONN_ID
        )
        run = StreamJoinJobOperator(
            task_id="run_join", spec_path=spec_path, kafka_conn_id=KAFKA_CONN_ID, available_now=True
        )
        reset = reset_pipeline.override(task_id="reset_demo")(spec_path)
        produce = produce_sample.override(task_id="produce_sample")(spec_path)
        reprocess, check = _check_demo_day(spec, spec_path)
        reset >> provision >> produce >> run >> reprocess >> check >> report_outputs(spec_path)
    return dag


def _doc(spec: PipelineSpec, spec_path: str) -> str:
    return (
        f"**Demo of pipeline `{spec.name}`** ({joined(spec, spec_path)}): deletes the pipeline's topics, checkpoint "
        "and output, provisions the topics, produces its sample data on yesterday (UTC), runs the join until the "
        "sample is processed, reprocesses and checks the day and reports the output's final table.\n\n"
        "**Do not run it on a pipeline you use:** it starts from nothing. To try it, unpause and trigger it "
        "(`make demo` runs the seed's with `airflow dags test`); it has no schedule: unpaused, it runs nothing "
        "by itself."
    )


def _check_demo_day(spec: PipelineSpec, spec_path: str) -> tuple[BaseOperator, BaseOperator]:
    """Reprocess the demo's day, check it and publish it if it passes (one Spark application), then report the
    verdict, as the daily backfill does."""
    from streamjoin.airflow.operators.publish_day import CheckAndPublishDayOperator
    from streamjoin.airflow.operators.reprocess import ReprocessDayOperator

    if spec.output.files is None or spec.quality is None:
        raise ValueError(f"the demo of {spec.name} needs output files and a quality suite")
    day = "{{ ti.xcom_pull(task_ids='produce_sample')['day'] }}"
    reprocess = ReprocessDayOperator(task_id="reprocess_day", spec_path=spec_path, day=day, kafka_conn_id=KAFKA_CONN_ID,
                                     data_docs_dir=str(resolve(DATA_DOCS)))  # fmt: skip
    return reprocess, CheckAndPublishDayOperator(task_id="check_quality", spec_path=spec_path, day=day)


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
def produce_sample(spec_path: str) -> dict[str, Any]:
    """Demo only: the pipeline's sample data (:func:`streamjoin.demo.sample.demo_records`) shortly before
    the end of yesterday (UTC), the demo's day."""
    import time

    from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook
    from streamjoin.core.codec import encode
    from streamjoin.demo.sample import demo_day, demo_records
    from streamjoin.kafka.clients import produce_records

    spec = load_spec(resolve(spec_path))
    day, base = demo_day(int(time.time() * 1000))
    rows: list[tuple[str, bytes | None, bytes | None, int, list[tuple[str, bytes]]]] = []
    for record in demo_records(spec):
        _, spec_input = spec.input_by_topic(record.topic)
        key = None if record.key is None else record.key.encode()
        value = _avro_value(spec_input, record.value) if spec_input.value.format is Format.AVRO else (
            encode(record.value, spec_input.value.format))  # fmt: skip
        rows.append((record.topic, key, value, base + record.offset_ms, []))
    produce_records(StreamJoinKafkaHook(KAFKA_CONN_ID).kafka_config(), rows)
    return {"records": len(rows), "day": day.isoformat()}


def _avro_value(spec_input: Input, value: Any) -> bytes | None:
    """An Avro input's sample value in Confluent's wire format: written with the input's reader schema,
    registered under its subject (registering it again gives its id) in the input's registry."""
    from confluent_kafka.schema_registry import Schema

    from streamjoin.core.avro import encode_wire
    from streamjoin.kafka.schema_registry import client, registry_config

    schema = spec_input.value.reader_schema_text
    if schema is None:
        raise ValueError(f"the demo of input {spec_input.topic!r} writes Avro with its reader_schema: give one")
    config = registry_config(spec_input.value.registry_conn_id)
    schema_id = client(config).register_schema(spec_input.value.subject(spec_input.topic), Schema(schema, "AVRO"))
    return encode_wire(value, schema_id, schema)


@task(task_id="report")
def report_outputs(spec_path: str) -> dict[str, Any]:
    """Demo only: the final table of the pipeline's last output (the aggregate's, else the join's) as read
    back from its topic, and where the day's Data Docs are."""
    from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook
    from streamjoin.demo.report import final_table, latest_check

    spec = load_spec(resolve(spec_path))
    sink = spec.aggregate.output if spec.aggregate is not None else spec.output
    assert sink.topic is not None
    table = final_table(StreamJoinKafkaHook(KAFKA_CONN_ID).kafka_config(), sink.topic, sink.value_format)
    width = max((len(str(k)) for k in table), default=6)
    body = "\n".join(f"{key!s:<{width}}  {value}" for key, value in sorted(table.items(), key=lambda kv: str(kv[0])))
    print(f"final table of topic {sink.topic}:\n{body}", flush=True)
    check = latest_check(spec)
    if check is not None:
        print(f"quality check of {check.day}: {check.summary()}; Data Docs: {check.data_docs_url}", flush=True)
    files = resolve(sink.files.path) if sink.files else None
    return {"table": {str(k): v for k, v in table.items()}, "topic": sink.topic, "files": str(files) if files else None,
            "quality": None if check is None else {"day": check.day, "success": check.success,
                                                   "data_docs_url": check.data_docs_url}}  # fmt: skip
