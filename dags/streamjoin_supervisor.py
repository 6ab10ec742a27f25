"""Per pipeline spec under include/pipelines/: a supervisor DAG every 2 minutes that starts the streaming
join detached, restarts it from its checkpoint when it dies (at most 3 times in 15 minutes), and fails
with an alert on a crash loop or on lag above the threshold for longer than the grace period.

Alerts: set ``STREAMJOIN_ALERT_WEBHOOK_CONN`` to an HTTP connection id (:class:`WebhookNotifier`).
"""

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG

from streamjoin.airflow.dag_factory import spec_paths
from streamjoin.airflow.notifiers import quality_notifiers
from streamjoin.airflow.operators.supervise import SuperviseStreamJoinOperator
from streamjoin.core.plans import resolve
from streamjoin.core.spec import load_spec
from streamjoin.core.supervision import Policy

_alerts = quality_notifiers(webhook_conn_id=os.environ.get("STREAMJOIN_ALERT_WEBHOOK_CONN"))

for _path in spec_paths():
    _spec = load_spec(resolve(_path))
    with DAG(
        f"streamjoin_supervise_{_spec.name}",
        description=f"keep the {_spec.name} streaming join running",
        schedule=timedelta(minutes=2),
        start_date=datetime(2026, 1, 1),
        catchup=False,
        max_active_runs=1,
        tags=["streamjoin", "supervisor"],
    ) as _dag:
        SuperviseStreamJoinOperator(
            task_id="supervise",
            spec_path=_path,
            policy=Policy(stale_after=120, lag_threshold=10_000, lag_grace=300, max_restarts=3, window=900),
            watch=100,
            poll=10,
            retries=0,
            on_failure_callback=_alerts or None,
        )
    globals()[_dag.dag_id] = _dag
