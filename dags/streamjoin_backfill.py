"""Daily backfill per pipeline: once the stream's watermark passed day end + grace, recompute the day
with the streaming job's code and publish ``<output files>/daily/date=D/`` (then check its quality).

Time-based schedule with catchup, so Airflow's own backfill works over any range:
``airflow backfill create --dag-id streamjoin_backfill_<pipeline> --from-date 2026-11-01 --to-date 2026-11-07``.
Catchup starts at ``STREAMJOIN_BACKFILL_START`` (YYYY-MM-DD, default 2026-11-01).
"""

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG
from airflow.timetables.interval import CronDataIntervalTimetable

from streamjoin.airflow.dag_factory import DATA_DOCS, KAFKA_CONN_ID, spec_paths
from streamjoin.airflow.operators.reprocess import ReprocessDayOperator, daily_asset
from streamjoin.airflow.sensors import StreamWatermarkSensor
from streamjoin.core.backfill import nondeterminism_warnings
from streamjoin.core.plans import resolve
from streamjoin.core.spec import load_spec

START = datetime.fromisoformat(os.environ.get("STREAMJOIN_BACKFILL_START", "2026-11-01"))
DAY = "{{ data_interval_start | ds }}"

for _path in spec_paths():
    _spec = load_spec(resolve(_path))
    _warnings = nondeterminism_warnings(_spec)
    with DAG(
        f"streamjoin_backfill_{_spec.name}",
        description=f"Recompute each past day of {_spec.name} once the stream's watermark passed it",
        schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
        start_date=START,
        catchup=True,
        max_active_runs=2,
        tags=["streamjoin", "backfill"],
        doc_md="\n\n".join([__doc__ or "", *(f"**Warning:** {w}" for w in _warnings)]),
    ) as _dag:
        _wait = StreamWatermarkSensor(
            task_id="wait_for_watermark", spec_path=_path, day=DAY, kafka_conn_id=KAFKA_CONN_ID,
            timeout=int(timedelta(days=1).total_seconds()),
        )  # fmt: skip
        _asset = daily_asset(_spec)
        _run = ReprocessDayOperator(
            task_id="reprocess_day", spec_path=_path, day=DAY, kafka_conn_id=KAFKA_CONN_ID,
            outlets=[_asset] if _asset is not None else [],
        )  # fmt: skip
        _wait >> _run
        if _spec.quality is not None and _spec.output.files is not None:
            from streamjoin.airflow.operators.quality import DataQualityOperator

            _check = DataQualityOperator(
                task_id="check_quality", spec_path=_path, day=DAY,
                partition_path=f"{resolve(_spec.output.files.path)}/daily/date={DAY}",
                data_docs_dir=str(resolve(DATA_DOCS)),
            )  # fmt: skip
            _run >> _check
    globals()[_dag.dag_id] = _dag
