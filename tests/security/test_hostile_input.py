"""Trigger-form values and Params never reach a shell or a path outside the project's folders: shell
metacharacters, ``..``, paths, very long strings and unicode are refused with a clear message before anything
runs (the Kafka connection points at a closed port: reaching it would fail differently, and later)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from job_modules import module_from_file
from streamjoin.core.backfill import BackfillError
from streamjoin.core.plans import PROJECT_HOME

SEED = "include/pipelines/clicks_per_region.yaml"
HOSTILE_NAMES = [
    "clicks_per_region; touch {sentinel}", "$(touch {sentinel})", "`touch {sentinel}`", "../../etc/passwd",
    "/etc/passwd", SEED, "clicks_per_region\n", "x" * 100_000, "clïcks_per_région", "clicks_per_region\x00", None, 42,
]  # fmt: skip
HOSTILE_DAYS = [
    "2026-01-01; touch {sentinel}", "$(touch {sentinel})", "../2026-01-01", "2026-01-01/../../etc",
    "\uff12\uff10\uff12\uff16-01-01", "\u0662\u0660\u0662\u0666-\u0660\u0661-\u0660\u0661",  # unicode digits
    "20260101", "2026-01-01T00:00:00", "9" * 100_000, "2026-02-30", "",
]  # fmt: skip


def _dag_module(name: str) -> ModuleType:
    return module_from_file(PROJECT_HOME / "dags" / f"{name}.py", f"hostile_{name}")


@pytest.fixture
def sentinel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A file a shell would create if a value reached one; Kafka on a closed port."""
    monkeypatch.setenv(
        "AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT",
        json.dumps({"conn_type": "streamjoin_kafka", "host": "127.0.0.1", "port": 9}),
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path / "pwned"


def _refused(call: Any, sentinel: Path, *expected: str) -> str:
    from airflow.sdk.exceptions import AirflowFailException

    with pytest.raises((AirflowFailException, BackfillError)) as caught:
        call()
    message = str(caught.value)
    assert any(e in message for e in expected), message
    assert len(message) < 600, f"the refusal echoes the whole value ({len(message)} characters)"
    assert not sentinel.exists()
    return message


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=range(len(HOSTILE_NAMES)))
def test_reprocess_form_refuses_a_hostile_pipeline(name: Any, sentinel: Path) -> None:
    validate = _dag_module("streamjoin_reprocess").validate.function
    value = name.format(sentinel=sentinel) if isinstance(name, str) and "{" in name else name
    params = {"pipeline": value, "start": "2026-01-01", "end": "2026-01-02"}
    message = _refused(lambda: validate(params=params), sentinel, "unknown pipeline")
    assert message.startswith("invalid reprocessing request: unknown pipeline") and "clicks_per_region" in message


@pytest.mark.parametrize("day", HOSTILE_DAYS, ids=range(len(HOSTILE_DAYS)))
def test_reprocess_form_and_operator_refuse_a_hostile_day(day: str, sentinel: Path) -> None:
    from streamjoin.airflow.operators.reprocess import ReprocessDayOperator

    value = day.format(sentinel=sentinel)
    validate = _dag_module("streamjoin_reprocess").validate.function
    for params in ({"pipeline": "clicks_per_region", "start": value, "end": "2026-01-02"},
                   {"pipeline": "clicks_per_region", "start": "2026-01-01", "end": value}):  # fmt: skip
        _refused(lambda p=params: validate(params=p), sentinel, "is not a date: use YYYY-MM-DD", "are both required")
    operator = ReprocessDayOperator(task_id="reprocess", spec_path=SEED, day=value)
    _refused(lambda: operator.execute({}), sentinel, "is not a date: use YYYY-MM-DD")


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=range(len(HOSTILE_NAMES)))
def test_stop_redeploy_takes_a_pipeline_name_never_a_path(name: Any, sentinel: Path) -> None:
    resolve_spec = _dag_module("streamjoin_stop_redeploy").pipeline_spec_path.function
    value = name.format(sentinel=sentinel) if isinstance(name, str) and "{" in name else name
    _refused(lambda: resolve_spec(params={"pipeline": value}), sentinel, "invalid request: unknown pipeline")
    assert resolve_spec(params={"pipeline": "clicks_per_region"}) == SEED


def test_the_reprocess_job_refuses_a_hostile_day_before_spark_starts(sentinel: Path) -> None:
    import runpy

    job = runpy.run_path(str(PROJECT_HOME / "jobs" / "reprocess_day.py"), run_name="not_main")
    args = ["--spec", str(PROJECT_HOME / SEED), "--bootstrap", "127.0.0.1:9", "--day", f"2026-01-01;touch {sentinel}"]
    _refused(lambda: job["main"](args), sentinel, "is not a date: use YYYY-MM-DD")


@pytest.mark.parametrize("text", ["--force", "-x", "--day=2020-01-01", "why; touch {sentinel}", "$(touch {sentinel})"])
def test_a_force_reason_and_user_from_a_form_reach_the_job_as_one_value_each(text: str, sentinel: Path) -> None:
    """What the operator hands the reprocessing job for ``force`` (the form's reason, the triggering user) comes
    back from the job's own argument parser unchanged, whatever it starts with; no shell sees it."""
    import runpy
    from types import SimpleNamespace

    from streamjoin.airflow.operators.reprocess import ReprocessDayOperator

    value = text.format(sentinel=sentinel)
    operator = ReprocessDayOperator(task_id="reprocess", spec_path=SEED, day="2026-01-01", force=True,
                                    force_reason=value)  # fmt: skip
    args = operator._check_args({"run_id": "manual__x", "dag_run": SimpleNamespace(triggering_user_name=value)})
    job = runpy.run_path(str(PROJECT_HOME / "jobs" / "reprocess_day.py"), run_name="not_main")
    parsed = job["parse_args"](["--spec", SEED, "--bootstrap", "127.0.0.1:9", "--day", "2026-01-01", *args])
    assert (parsed.reason, parsed.user, parsed.force, parsed.check, parsed.day) == (value, value, True, True,
                                                                                     ["2026-01-01"])  # fmt: skip
    assert not sentinel.exists()
