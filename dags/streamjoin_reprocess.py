"""Reprocess past days of a pipeline from the UI: pick the pipeline and a day range in the trigger form.

Invalid input (unknown pipeline, not a date (exactly YYYY-MM-DD), end before start, a day not over yet, a range Kafka no
longer holds, published days without ``overwrite``) fails in ``validate`` before anything is written.
Then one mapped ``reprocess_day`` task per day recomputes and atomically publishes the day, each emitting
an asset event (extra: pipeline, day, path) through the ``streamjoin_daily_partitions`` alias.
"""

from datetime import UTC, datetime
from typing import Any

from airflow.sdk import DAG, AssetAlias, Param, task

from streamjoin.airflow.dag_factory import KAFKA_CONN_ID, spec_paths
from streamjoin.airflow.operators.reprocess import ReprocessDayOperator
from streamjoin.core.plans import resolve
from streamjoin.core.spec import load_spec

SPECS = {load_spec(resolve(p)).name: p for p in spec_paths()}
ALIAS = AssetAlias("streamjoin_daily_partitions")


@task
def validate(params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Check the form and Kafka's retention; one set of arguments per day."""
    from airflow.sdk.exceptions import AirflowFailException

    from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook
    from streamjoin.airflow.operators.reprocess import retention_facts
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
    except BackfillError as exc:
        raise AirflowFailException(f"invalid reprocessing request: {exc}") from None
    for warning in nondeterminism_warnings(spec):
        print(f"WARNING: not deterministic: {warning}", flush=True)
    files = spec.output.files
    for day in days:
        target = partition_path(resolve(files.path), day) if files else "(no file output)"
        print(f"plan: {spec.name} {day} -> {target}", flush=True)
    return [{"spec_path": spec_path, "day": d.isoformat(), "dry_run": bool(p.get("dry_run"))} for d in days]


with DAG(
    "streamjoin_reprocess",
    description="Reprocess past days of a streamjoin pipeline (trigger with a form)",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["streamjoin", "backfill"],
    doc_md=__doc__,
    params={
        "pipeline": Param(
            next(iter(sorted(SPECS)), ""),
            type="string",
            enum=sorted(SPECS) or [""],
            description="Pipeline whose days to reprocess (a spec under include/pipelines/)",
        ),
        "start": Param(None, type=["null", "string"], format="date", description="First day (UTC), YYYY-MM-DD"),
        "end": Param(None, type=["null", "string"], format="date", description="Last day (UTC), included"),
        "overwrite": Param(True, type="boolean", description="Replace days already published"),
        "dry_run": Param(False, type="boolean", description="Count only: read and join, write nothing"),
    },
) as dag:
    ReprocessDayOperator.partial(
        task_id="reprocess_day", kafka_conn_id=KAFKA_CONN_ID, outlets=[ALIAS], map_index_template="{{ task.day }}"
    ).expand_kwargs(validate())
