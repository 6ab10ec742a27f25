"""Daily backfill per pipeline. **Unpause it** (with the pipeline's own DAG) to have each past day published:
once the stream's watermark passed day end + grace, it recomputes the day with the streaming job's code; a
pipeline with a quality suite has it checked in the same Spark application and published as
``<output files>/daily/date=D/`` only if it passes; ``check_quality`` reports the verdict and records the
day's asset event. A failed check alerts (the pipeline's ``alerts:``, else ``include/alerts.yaml``) and
quarantines the day. A day whose input topics hold no record of it is skipped with a warning.

Unpausing runs the latest day only, unless the spec sets ``backfill: {start: YYYY-MM-DD}``: then catchup
runs every day from there (days before the topics' first record are skipped cheaply). Any range, any time:
``airflow backfill create --dag-id streamjoin_backfill_<pipeline> --from-date 2026-11-20 --to-date 2026-11-22``
(its runs stay queued while the DAG is paused: unpause it). Waiting for the watermark is deferred to the
triggerer (no worker slot held); the logs give times in UTC.

Airflow names each run after the end of its day (``scheduled__2026-11-25T00:00:00+00:00`` processes 2026-11-24):
the run's note and its data interval start name the day it processes.
"""

from datetime import datetime, timedelta

from airflow.sdk import DAG, BaseOperator
from airflow.timetables.interval import CronDataIntervalTimetable

from streamjoin.airflow.dag_factory import DATA_DOCS, KAFKA_CONN_ID, spec_paths
from streamjoin.airflow.notifiers import PipelineAlertNotifier
from streamjoin.airflow.operators.reprocess import ReprocessDayOperator, checked_before_publishing, daily_asset
from streamjoin.airflow.sensors import StreamWatermarkSensor
from streamjoin.core.backfill import nondeterminism_warnings
from streamjoin.core.plans import BACKFILL_DAG_PREFIX, resolve
from streamjoin.core.spec import load_spec

#: without ``backfill.start`` in the spec: no catchup, so this only anchors the schedule
ANCHOR = datetime(2026, 1, 1)
DAY = "{{ data_interval_start | ds }}"

for _path in spec_paths():
    _spec = load_spec(resolve(_path))
    _warnings = nondeterminism_warnings(_spec)
    _start = _spec.backfill.start
    with DAG(
        f"{BACKFILL_DAG_PREFIX}{_spec.name}",
        description=f"Unpause to publish {_spec.name}'s days: recomputes, checks and publishes each past day once "
        "the stream passed it",
        schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
        start_date=datetime(_start.year, _start.month, _start.day) if _start else ANCHOR,
        catchup=_start is not None,
        max_active_runs=2,
        tags=["streamjoin", "backfill"],
        doc_md="\n\n".join([__doc__ or "", *(f"**Warning:** {w}" for w in _warnings)]),
        default_args={"on_failure_callback": [PipelineAlertNotifier(spec_path=_path)]},
    ) as _dag:
        _wait = StreamWatermarkSensor(
            task_id="wait_for_watermark", spec_path=_path, day=DAY, kafka_conn_id=KAFKA_CONN_ID,
            timeout=int(timedelta(days=1).total_seconds()),
        )  # fmt: skip
        _asset = daily_asset(_spec)
        _checked = checked_before_publishing(_spec)
        _run: BaseOperator = ReprocessDayOperator(
            task_id="reprocess_day", spec_path=_path, day=DAY, kafka_conn_id=KAFKA_CONN_ID,
            data_docs_dir=str(resolve(DATA_DOCS)), outlets=[_asset] if _asset is not None and not _checked else [],
        )  # fmt: skip
        _wait >> _run
        if _checked:
            from streamjoin.airflow.operators.publish_day import CheckAndPublishDayOperator

            _run >> CheckAndPublishDayOperator(
                task_id="check_quality", spec_path=_path, day=DAY, outlets=[_asset] if _asset is not None else []
            )
    globals()[_dag.dag_id] = _dag
