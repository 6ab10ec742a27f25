"""Notes on the DAG runs of the shipped DAGs naming what each processes, set when a run starts (a listener of
the plugin, called by the scheduler): Airflow names a daily backfill run after the day *after* the one it
processes (its data interval's end), and a reprocess run after the time it was triggered. A note a run already
has (the Stream jobs page writes one, a user may type one in the trigger form) is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from airflow.listeners import hookimpl

from streamjoin.core.plans import BACKFILL_DAG_PREFIX, REPROCESS_DAG, STOP_REDEPLOY_DAG


def run_note(dag_id: str, data_interval_start: datetime | None, conf: Mapping[str, Any] | None) -> str | None:
    """The note of a run of ``dag_id`` (None: a DAG of someone else, or nothing to name)."""
    conf = conf or {}
    if dag_id.startswith(BACKFILL_DAG_PREFIX) and data_interval_start is not None:
        pipeline = dag_id[len(BACKFILL_DAG_PREFIX) :]
        return f"Day {data_interval_start:%Y-%m-%d} (UTC) of {pipeline}: recomputed, checked, published if it passes"
    name = conf.get("pipeline")
    if not isinstance(name, str):
        return None
    if dag_id == REPROCESS_DAG:
        start, end = conf.get("start"), conf.get("end")
        days = f"{start}" if start == end or not end else f"{start} to {end}"
        forced = f", with force: {conf.get('reason') or '-'}" if conf.get("force") else ""
        return f"Reprocess {name} {days}{forced}"
    if dag_id == STOP_REDEPLOY_DAG:
        return f"{'Redeploy' if conf.get('redeploy') else 'Stop'} {name}"
    return None


@hookimpl
def on_dag_run_running(dag_run: Any, msg: str) -> None:
    """Give a starting run of a shipped DAG its note (it is written with the scheduler's own transaction)."""
    if getattr(dag_run, "note", None):
        return
    note = run_note(str(dag_run.dag_id), getattr(dag_run, "data_interval_start", None), getattr(dag_run, "conf", None))
    if note is not None:
        dag_run.note = note
