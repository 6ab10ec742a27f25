"""Reprocess past days of a pipeline. Keep this DAG unpaused: the Stream jobs pages' "Reprocess" form (Browse >
Stream jobs > a pipeline) triggers it, and refuses a reversed or future range, or a day already being
reprocessed, before any run exists. Its own trigger form here works too: pick the pipeline and the days
(Start, End); Airflow's "Logical Date" there means nothing to it.

Airflow's form refuses what it can before a run exists (a known pipeline, both days as YYYY-MM-DD; defaults:
yesterday and the seed pipeline). ``validate`` then refuses the rest before anything is written: end before
start, a day not over yet (today or later, UTC), a range Kafka no longer holds, published days without
``overwrite``, a day another run is reprocessing right now (one at a time per pipeline and day). Such a
refusal fails the run with the reason and alerts no one: alerts are for data and jobs.

Per day, ``reprocess_day`` recomputes the day in one Spark application; for a pipeline with a quality suite
that same application stages it, checks it and publishes it only if it passes (no second Spark or GX start),
and ``check_quality`` reports the verdict: it emits the asset event (extra: pipeline, day, path, forced)
through the ``streamjoin_daily_partitions`` alias, or alerts and fails the run with the check's message; the
day already there then stays (published, or quarantined). ``force`` publishes over a failed check, recorded
in the day's ``_FORCED.json`` with who triggered the run and ``reason``. A day without input records is
skipped with a warning: nothing is published. Each run's note names its days.
"""

from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import DAG, AssetAlias, Param, task, task_group

from streamjoin.airflow.dag_factory import DATA_DOCS, KAFKA_CONN_ID, SEED_PIPELINE, spec_paths
from streamjoin.airflow.notifiers import PipelineAlertNotifier
from streamjoin.airflow.operators.publish_day import CheckAndPublishDayOperator
from streamjoin.airflow.operators.reprocess import ReprocessDayOperator
from streamjoin.core.plans import REPROCESS_DAG, resolve
from streamjoin.core.spec import load_spec

SPECS = {load_spec(resolve(p)).name: p for p in spec_paths()}
ALIAS = AssetAlias("streamjoin_daily_partitions")
YESTERDAY = (datetime.now(UTC).date() - timedelta(days=1)).isoformat()  # as of parsing: a default only


@task
def validate(params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Check the form and Kafka's retention; one set of arguments per day."""
    from airflow.sdk import get_current_context

    from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook
    from streamjoin.airflow.notifiers import RequestRefused
    from streamjoin.airflow.operators.reprocess import day_lock, retention_facts, run_is_active
    from streamjoin.core.backfill import (
        BackfillError,
        check_retention,
        nondeterminism_warnings,
        partition_path,
        pipeline_spec,
        plan_day,
        shown,
        validate_request,
    )

    p = params or {}
    try:
        if not p.get("start") or not p.get("end"):
            raise BackfillError(
                f"start {shown(p.get('start'))} and end {shown(p.get('end'))} are both required (YYYY-MM-DD)"
            )
        spec_path = pipeline_spec(p.get("pipeline"), SPECS)  # a known name, never a path from the form
        spec = load_spec(resolve(spec_path))
        existing = []
        if spec.output.files is not None:
            daily = resolve(spec.output.files.path) / "daily"
            existing = [datetime.strptime(d.name[5:], "%Y-%m-%d").date() for d in daily.glob("date=*")]
        days = validate_request(
            spec.name, p["start"], p["end"], pipelines=SPECS, today=datetime.now(UTC).date(),
            existing=existing, overwrite=bool(p.get("overwrite", True)),
        )  # fmt: skip
        plans = [plan_day(spec, day) for day in days]
        kafka = StreamJoinKafkaHook(KAFKA_CONN_ID).checked_config()
        facts = retention_facts(kafka, sorted({r.topic for r in plans[0].reads}))
        for plan in plans:
            check_retention(plan, facts)
        context = get_current_context()
        for day in days:
            lock = day_lock(spec, day)
            holder = lock.holder() if lock is not None else None
            if holder is not None and run_is_active(context)(str(holder["dag_id"]), str(holder["run_id"])):
                raise BackfillError(
                    f"{spec.name} {day} is being reprocessed by run {holder['run_id']!r} of DAG {holder['dag_id']!r} "
                    f"(since {holder.get('since')}): one reprocess per pipeline and day at a time; trigger again "
                    "once it is done"
                )
    except BackfillError as exc:
        raise RequestRefused(f"invalid reprocessing request: {exc}") from None
    for warning in nondeterminism_warnings(spec):
        print(f"WARNING: not deterministic: {warning}", flush=True)
    files = spec.output.files
    for day in days:
        target = partition_path(resolve(files.path), day) if files else "(no file output)"
        print(f"plan: {spec.name} {day} -> {target}", flush=True)
    flags = {"dry_run": bool(p.get("dry_run")), "force": bool(p.get("force")), "reason": str(p.get("reason") or "")}
    return [{"spec_path": spec_path, "day": d.isoformat(), **flags} for d in days]


@task_group(group_id="day")
def reprocess_and_publish(spec_path: str, day: str, dry_run: bool, force: bool, reason: str) -> None:
    """One day: recompute it, and check and publish it in the same application when the pipeline has a quality
    suite; then report the check's verdict."""
    reprocessed = ReprocessDayOperator(
        task_id="reprocess_day", spec_path=spec_path, day=day, dry_run=dry_run, kafka_conn_id=KAFKA_CONN_ID,
        force=force, force_reason=reason, data_docs_dir=str(resolve(DATA_DOCS)), outlets=[ALIAS],
    )  # fmt: skip
    reprocessed >> CheckAndPublishDayOperator(
        task_id="check_quality", spec_path=spec_path, day=day, dry_run=dry_run, outlets=[ALIAS]
    )


with DAG(
    REPROCESS_DAG,
    description="Keep unpaused: reprocesses past days of a pipeline when the Stream jobs page (or this form) asks",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    is_paused_upon_creation=False,  # an action of the status page: it must run when triggered
    tags=["streamjoin", "backfill"],
    doc_md=__doc__,
    default_args={"on_failure_callback": [PipelineAlertNotifier()]},
    params={
        "pipeline": Param(
            SEED_PIPELINE if SEED_PIPELINE in SPECS else next(iter(sorted(SPECS)), ""),
            type="string",
            enum=sorted(SPECS) or [""],
            description="Pipeline whose days to reprocess (a spec under include/pipelines/)",
        ),
        "start": Param(
            YESTERDAY,
            type="string",
            format="date",
            pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
            description="First day (UTC), YYYY-MM-DD, before today",
        ),
        "end": Param(
            YESTERDAY,
            type="string",
            format="date",
            pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
            description="Last day (UTC), included: on or after the first, before today",
        ),
        "overwrite": Param(True, type="boolean", description="Replace days already published (after their check)"),
        "force": Param(
            False,
            type="boolean",
            description="Publish a day even if its quality check fails (recorded in the day's _FORCED.json)",
        ),
        "reason": Param(
            None,
            type=["null", "string"],  # (an empty string field would keep Airflow's form from triggering)
            maxLength=500,
            description="With force: why the days are published over a failed check (recorded with your name)",
        ),
        "dry_run": Param(False, type="boolean", description="Count only: read and join, write nothing"),
    },
) as dag:
    reprocess_and_publish.expand_kwargs(validate())
