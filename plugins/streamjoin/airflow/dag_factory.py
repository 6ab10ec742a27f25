"""Builds a pipeline's DAG from its spec: provision co-partitioned topics, then own the join job (start it,
watch it from the triggerer, restart or alert: :class:`SuperviseStreamJoinOperator`); it is the job's one owner.

DAG files call :func:`pipeline_dag`; nothing here imports pyspark, so the dag-processor parses fast.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, BaseOperator, task

from streamjoin.airflow.operators.provision_topics import ProvisionTopicsOperator
from streamjoin.airflow.operators.stream_join import StreamJoinJobOperator
from streamjoin.airflow.operators.supervise import SuperviseStreamJoinOperator
from streamjoin.airflow.ui_paths import DATA_DOCS_DIR
from streamjoin.core.plans import resolve, spec_paths
from streamjoin.core.spec import PipelineSpec, load_spec
from streamjoin.core.supervision import Policy

#: (``spec_paths`` lives in core, re-exported for the DAG files)
__all__ = ["DATA_DOCS", "KAFKA_CONN_ID", "OWNER_POLICY", "SEED_PIPELINE", "pipeline_dag", "produce_sample",
           "report_outputs", "reset_pipeline", "spec_paths"]  # fmt: skip

KAFKA_CONN_ID = "streamjoin_kafka_default"
#: the pipeline the forms offer first
SEED_PIPELINE = "clicks_per_region"
#: Where quality checks keep their Data Docs (one directory per pipeline, target, day and run): what the plugin serves
DATA_DOCS = DATA_DOCS_DIR
#: restart at most 3 times in 15 minutes; alert on lag above 10k records for 5 minutes
OWNER_POLICY = Policy(stale_after=120, lag_threshold=10_000, lag_grace=300, max_restarts=3, window=900)


def pipeline_dag(spec_path: str, *, dag_id: str | None = None, demo: bool = False, **dag_kwargs: Any) -> DAG:
    """A DAG that provisions the pipeline's topics and owns its join job: continuous runs, each watching the job
    for an hour from the triggerer. A failed task alerts through the pipeline's destinations (its spec's
    ``alerts:``, else ``include/alerts.yaml``): the owner's crash loop, lag alarm or terminal failure.

    :param demo: also reset the pipeline and produce its sample data (on yesterday, UTC) before the join;
        the job then stops once the sample is processed, the day is reprocessed and its quality checked
        (its Data Docs under ``var/data_docs``), and the output's final table is reported.
    """
    spec = load_spec(resolve(spec_path))
    dag_kwargs.setdefault("schedule", None if demo else "@continuous")
    dag_kwargs.setdefault("start_date", datetime(2026, 1, 1))
    dag_kwargs.setdefault("catchup", False)
    dag_kwargs.setdefault("max_active_runs", 1)
    from streamjoin.airflow.notifiers import PipelineAlertNotifier

    default_args = {
        "on_failure_callback": [PipelineAlertNotifier(spec_path=spec_path)],
        **dag_kwargs.pop("default_args", {}),
    }
    with DAG(
        dag_id or f"streamjoin_{spec.name}" + ("_demo" if demo else ""),
        description=_description(spec, demo),
        tags=["streamjoin", spec.join.shape.value] + (["demo"] if demo else []),
        doc_md=_doc(spec, spec_path, demo),
        default_args=default_args,
        **dag_kwargs,
    ) as dag:
        provision = ProvisionTopicsOperator(
            task_id="provision_topics", spec_path=spec_path, kafka_conn_id=KAFKA_CONN_ID
        )
        if demo:
            run: BaseOperator = StreamJoinJobOperator(
                task_id="run_join", spec_path=spec_path, kafka_conn_id=KAFKA_CONN_ID, available_now=True
            )
            reset = reset_pipeline.override(task_id="reset_demo")(spec_path)
            produce = produce_sample.override(task_id="produce_sample")(spec_path)
            reprocess, check = _check_demo_day(spec, spec_path)
            reset >> provision >> produce >> run >> reprocess >> check >> report_outputs(spec_path)
        else:
            provision >> SuperviseStreamJoinOperator(
                task_id="own_job", spec_path=spec_path, kafka_conn_id=KAFKA_CONN_ID, policy=OWNER_POLICY,
                watch=3600, poll=10, retries=0,
            )  # fmt: skip
    return dag


def _description(spec: PipelineSpec, demo: bool) -> str:
    """The line the DAG list shows: what the DAG does, and whether to unpause it."""
    what = spec.description or f"{spec.join.left} {spec.join.kind.value}-{spec.join.shape.value} {spec.join.right}"
    if demo:
        return f"Demo only, resets {spec.name} (topics, checkpoint, output): trigger it to try the pipeline; {what}"
    return f"Unpause to run {spec.name}: provisions its topics, runs and owns its streaming join; {what}"


def _doc(spec: PipelineSpec, spec_path: str, demo: bool) -> str:
    """The DAG's documentation: what it does, whether to unpause it, where to watch it."""
    join = (f"`{spec.join.left}` {spec.join.kind.value}-{spec.join.shape.value} `{spec.join.right}` from "
            f"`{spec_path}`")  # fmt: skip
    if demo:
        return (
            f"**Demo of pipeline `{spec.name}`** ({join}): deletes the pipeline's topics, checkpoint and output, "
            "provisions the topics, produces its sample data on yesterday (UTC), runs the join until the sample is "
            "processed, reprocesses and checks the day and reports the output's final table.\n\n"
            "**Do not run it on a pipeline you use:** it starts from nothing. To try it, unpause and trigger it "
            "(`make demo` runs the seed's with `airflow dags test`); it has no schedule: unpaused, it runs nothing "
            "by itself."
        )
    return (
        f"**Pipeline `{spec.name}`**: {join}. Provisions the pipeline's topics, starts its streaming job and owns "
        "it (`own_job`): restarts it when it dies or hangs, alerts when it lags or fails for good. One continuous "
        "run at a time.\n\n"
        "**Unpause it to run the pipeline.** Watch it under Browse > Stream jobs. Pausing it does not stop the "
        "job: press Stop on its Stream jobs page (or trigger `streamjoin_stop_redeploy`) first. Each past day is "
        f"checked and published by `streamjoin_backfill_{spec.name}` (unpause that one too)."
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
        rows.append((record.topic, key, encode(record.value, spec_input.value.format), base + record.offset_ms, []))
    produce_records(StreamJoinKafkaHook(KAFKA_CONN_ID).kafka_config(), rows)
    return {"records": len(rows), "day": day.isoformat()}


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

