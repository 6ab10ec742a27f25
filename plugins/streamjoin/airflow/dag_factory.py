"""Builds a pipeline's DAG from its spec: provision co-partitioned topics, then own the join job (start it,
watch it from the triggerer, restart or alert: :class:`SuperviseStreamJoinOperator`); it is the job's one owner.

DAG files call :func:`pipeline_dag`; nothing here imports pyspark, so the dag-processor parses fast.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG

from streamjoin.airflow.operators.provision_topics import ProvisionTopicsOperator
from streamjoin.airflow.operators.supervise import SuperviseStreamJoinOperator
from streamjoin.airflow.ui_paths import DATA_DOCS_DIR
from streamjoin.core.plans import resolve, spec_paths
from streamjoin.core.spec import PipelineSpec, load_spec
from streamjoin.core.supervision import Policy

#: (``spec_paths`` lives in core, re-exported for the DAG files)
__all__ = ["DATA_DOCS", "KAFKA_CONN_ID", "OWNER_POLICY", "SEED_PIPELINE", "pipeline_dag", "spec_paths"]

KAFKA_CONN_ID = "streamjoin_kafka_default"
#: the pipeline the forms offer first
SEED_PIPELINE = "clicks_per_region"
#: Where quality checks keep their Data Docs (one directory per pipeline, target, day and run): what the plugin serves
DATA_DOCS = DATA_DOCS_DIR
#: restart at most 3 times in 15 minutes; alert on lag above 10k records for 5 minutes
OWNER_POLICY = Policy(stale_after=120, lag_threshold=10_000, lag_grace=300, max_restarts=3, window=900)


def pipeline_dag(spec_path: str, *, dag_id: str | None = None, **dag_kwargs: Any) -> DAG:
    """A DAG that provisions the pipeline's topics and owns its join job: continuous runs, each watching the job
    for an hour from the triggerer. A failed task alerts through the pipeline's destinations (its spec's
    ``alerts:``, else ``include/alerts.yaml``): the owner's crash loop, lag alarm or terminal failure.
    """
    spec = load_spec(resolve(spec_path))
    dag_kwargs.setdefault("schedule", "@continuous")
    with DAG(
        dag_id or f"streamjoin_{spec.name}",
        description=f"Unpause to run {spec.name}: provisions its topics, runs and owns its streaming join; "
        f"{what_it_joins(spec)}",
        tags=["streamjoin", *dict.fromkeys(stage.shape.value for stage in spec.stages)],
        doc_md=_doc(spec, spec_path),
        **pipeline_dag_args(spec_path, dag_kwargs),
    ) as dag:
        ProvisionTopicsOperator(
            task_id="provision_topics", spec_path=spec_path, kafka_conn_id=KAFKA_CONN_ID
        ) >> SuperviseStreamJoinOperator(
            task_id="own_job", spec_path=spec_path, kafka_conn_id=KAFKA_CONN_ID, policy=OWNER_POLICY,
            watch=3600, poll=10, retries=0,
        )  # fmt: skip
    return dag


def pipeline_dag_args(spec_path: str, dag_kwargs: dict[str, Any]) -> dict[str, Any]:
    """``dag_kwargs`` with the defaults of a pipeline's DAGs: no catch-up, one run at a time, and a failed task
    alerting through the pipeline's destinations."""
    from streamjoin.airflow.notifiers import PipelineAlertNotifier

    dag_kwargs.setdefault("start_date", datetime(2026, 1, 1))
    dag_kwargs.setdefault("catchup", False)
    dag_kwargs.setdefault("max_active_runs", 1)
    default_args = {
        "on_failure_callback": [PipelineAlertNotifier(spec_path=spec_path)],
        **dag_kwargs.pop("default_args", {}),
    }
    return {"default_args": default_args, **dag_kwargs}


def what_it_joins(spec: PipelineSpec) -> str:
    """The spec's description, else its joins in a few words."""
    return spec.description or _stages_text(spec, "")


def _stages_text(spec: PipelineSpec, quote: str) -> str:
    """``left kind-shape right`` of the first join, then ``, then kind-shape right`` for each later stage (whose
    left side is the previous stage's result); input names between ``quote``."""
    first, q = spec.stages[0], quote
    text = f"{q}{first.left}{q} {first.kind.value}-{first.shape.value} {q}{first.right}{q}"
    return text + "".join(f", then {s.kind.value}-{s.shape.value} {q}{s.right}{q}" for s in spec.stages[1:])


def _doc(spec: PipelineSpec, spec_path: str) -> str:
    """The DAG's documentation: what it does, whether to unpause it, where to watch it."""
    return (
        f"**Pipeline `{spec.name}`**: {joined(spec, spec_path)}. Provisions the pipeline's topics, starts its "
        "streaming job and owns it (`own_job`): restarts it when it dies or hangs, alerts when it lags or fails for "
        "good. One continuous run at a time.\n\n"
        "**Unpause it to run the pipeline.** Watch it under Browse > Stream jobs. Pausing it does not stop the "
        "job: press Stop on its Stream jobs page (or trigger `streamjoin_stop_redeploy`) first. Each past day is "
        f"checked and published by `streamjoin_backfill_{spec.name}` (unpause that one too)."
    )


def joined(spec: PipelineSpec, spec_path: str) -> str:
    """The spec's join in Markdown, with the file it comes from."""
    return f"{_stages_text(spec, '`')} from `{spec_path}`"
