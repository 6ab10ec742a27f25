"""Manually triggered: stop a pipeline's streaming join gracefully (after its current batch), and with
``redeploy`` start the current code/spec again from the same checkpoint.

Trigger with conf ``{"pipeline": "include/pipelines/clicks_per_region.yaml", "redeploy": true}``.
"""

from datetime import datetime

from airflow.sdk import DAG, Param

from streamjoin.airflow.operators.supervise import StopStreamJoinOperator

with DAG(
    "streamjoin_stop_redeploy",
    description="stop (and optionally redeploy) a streaming join from its checkpoint",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["streamjoin", "supervisor"],
    params={
        "pipeline": Param("include/pipelines/clicks_per_region.yaml", type="string"),
        "redeploy": Param(True, type="boolean"),
    },
    render_template_as_native_obj=True,
) as dag:
    StopStreamJoinOperator(
        task_id="stop_or_redeploy", spec_path="{{ params.pipeline }}", redeploy="{{ params.redeploy }}"
    )
