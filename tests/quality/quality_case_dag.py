"""The DAG test_dag_run runs with ``dag.test()``: a day's quality check whose outlet a downstream DAG waits for.

Run as a script in a fresh ``AIRFLOW_HOME`` whose dags folder holds this file. ``QUALITY_CASE`` (JSON)
gives the spec, the Data Docs directory, the asset URI and the runs (one per dag.test call: day, partition,
left input count, logical date). Prints one line ``QUALITY_CASE_RESULT <json>`` with, per run, the task
states, the asset events and the downstream runs queued so far.
"""

from __future__ import annotations

import json
import os
from datetime import datetime

from airflow.sdk import DAG, Asset, task

from streamjoin.airflow.operators.quality import DataQualityOperator

CASE = json.loads(os.environ["QUALITY_CASE"])
ENRICHED = Asset(name="clicks_per_region_enriched_checked", uri=CASE["asset_uri"])

with DAG("quality_case", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    DataQualityOperator(
        task_id="check_enriched",
        spec_path=CASE["spec_path"],
        partition_path="{{ dag_run.conf['partition'] }}",
        day="{{ dag_run.conf['day'] }}",
        left_input_count="{{ dag_run.conf['left_count'] }}",
        data_docs_dir=CASE["docs_dir"],
        smtp_conn_id="quality_smtp",
        alert_to=["oncall@example.org"],
        webhook_conn_id="quality_webhook",
        spark_master="local[1]",
        spark_conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
        outlets=[ENRICHED],
    )

with DAG("quality_case_consumer", schedule=[ENRICHED], start_date=datetime(2026, 1, 1), catchup=False):

    @task
    def publish() -> None:
        print("publishing the checked day")

    publish()


def _counts() -> dict[str, int]:
    from airflow.models.asset import AssetDagRunQueue, AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import func, select

    with create_session() as session:
        asset_id = session.scalar(select(AssetModel.id).where(AssetModel.uri == ENRICHED.uri))
        events = session.scalar(select(func.count()).select_from(AssetEvent).where(AssetEvent.asset_id == asset_id))
        queued = session.scalar(
            select(func.count())
            .select_from(AssetDagRunQueue)
            .where(AssetDagRunQueue.target_dag_id == "quality_case_consumer")
        )
    return {"asset_events": int(events or 0), "queued_downstream": int(queued or 0)}


if __name__ == "__main__":
    results = []
    for run in CASE["runs"]:
        dag_run = dag.test(logical_date=datetime.fromisoformat(run["logical_date"]), run_conf=run)
        states = {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}
        results.append(
            {
                "day": run["day"],
                "run_id": dag_run.run_id,
                "dag_run_state": str(dag_run.state),
                "task_states": states,
                **_counts(),
            }
        )
    print("QUALITY_CASE_RESULT " + json.dumps(results), flush=True)
