"""Stop a pipeline's streaming join gracefully (after its current batch), and with ``redeploy`` start the
current code/spec again from the same checkpoint. Keep this DAG unpaused: the Stream jobs page's Stop and
Redeploy buttons trigger it (a run of a paused DAG waits until it is unpaused).

Trigger with conf ``{"pipeline": "clicks_per_region", "redeploy": true}``: a pipeline *name* (a spec under
``include/pipelines/``), never a path; anything else is refused before anything runs.
"""

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, Param, task

from streamjoin.airflow.dag_factory import SEED_PIPELINE, spec_paths
from streamjoin.airflow.notifiers import PipelineAlertNotifier
from streamjoin.airflow.operators.supervise import StopStreamJoinOperator
from streamjoin.core.plans import STOP_REDEPLOY_DAG, resolve
from streamjoin.core.spec import load_spec

SPECS = {load_spec(resolve(p)).name: p for p in spec_paths()}


@task
def pipeline_spec_path(params: dict[str, Any] | None = None) -> str:
    """The spec path of the pipeline the form names (a known name, or a clear refusal)."""
    from airflow.sdk.exceptions import AirflowFailException

    from streamjoin.core.backfill import BackfillError, pipeline_spec

    try:
        return pipeline_spec((params or {}).get("pipeline"), SPECS)
    except BackfillError as exc:
        raise AirflowFailException(f"invalid request: {exc}") from None


with DAG(
    STOP_REDEPLOY_DAG,
    description="Keep unpaused: stops (and redeploys) a pipeline's streaming join when the Stream jobs page asks",
    doc_md=__doc__,
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    is_paused_upon_creation=False,  # an action of the status page: it must run when triggered
    tags=["streamjoin", "supervisor"],
    default_args={"on_failure_callback": [PipelineAlertNotifier()]},
    params={
        "pipeline": Param(
            SEED_PIPELINE if SEED_PIPELINE in SPECS else next(iter(sorted(SPECS)), ""),
            type="string",
            enum=sorted(SPECS) or [""],
            description="Pipeline to stop (a spec under include/pipelines/)",
        ),
        "redeploy": Param(True, type="boolean"),
    },
    render_template_as_native_obj=True,
) as dag:
    StopStreamJoinOperator(task_id="stop_or_redeploy", spec_path=pipeline_spec_path(), redeploy="{{ params.redeploy }}")
