"""The action DAGs' trigger forms: what their params accept before a run exists, and that they are active
when created (the status page triggers them). Parses the two DAG files in-process (no Spark, ~10 s)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from streamjoin.core.plans import PROJECT_HOME

pytestmark = pytest.mark.airflow


@pytest.fixture(scope="module")
def dags() -> dict[str, Any]:
    from airflow.dag_processing.dagbag import DagBag

    found = {}
    for name in ("streamjoin_reprocess", "streamjoin_stop_redeploy"):
        bag = DagBag(str(PROJECT_HOME / "dags" / f"{name}.py"))
        assert bag.import_errors == {}, bag.import_errors
        found[name] = bag.dags[name]
    return found


def _validate(dag: Any, conf: dict[str, Any]) -> dict[str, Any]:
    """The conf merged into the DAG's params and validated, as a triggered run's is."""
    import copy

    params = copy.deepcopy(dag.params)
    params.update(conf)  # (each value is checked against its schema here or in validate)
    return params.validate()


def test_action_dags_are_active_when_created(dags: dict[str, Any]) -> None:
    assert {name: dag.is_paused_upon_creation for name, dag in dags.items()} == {
        "streamjoin_reprocess": False,
        "streamjoin_stop_redeploy": False,
    }


def test_reprocess_form_defaults_to_yesterday_and_the_seed_pipeline(dags: dict[str, Any]) -> None:
    values = _validate(dags["streamjoin_reprocess"], {})
    yesterday = (datetime.now(UTC).date() - timedelta(days=1)).isoformat()
    assert (values["pipeline"], values["start"], values["end"]) == ("clicks_per_region", yesterday, yesterday)
    assert (values["force"], values["reason"], values["dry_run"]) == (False, None, False)


@pytest.mark.parametrize(
    "conf",
    [
        {"start": None},
        {"start": ""},
        {"end": "2026-13-01"},
        {"start": "2026-11-2"},
        {"start": "20261120"},
        {"end": "2026-11-20T00:00:00"},
        {"pipeline": "../etc/passwd"},
    ],
    ids=repr,
)
def test_reprocess_form_refuses_missing_or_malformed_input(dags: dict[str, Any], conf: dict[str, Any]) -> None:
    from airflow.sdk.definitions.param import ParamValidationError

    with pytest.raises(ParamValidationError):
        _validate(dags["streamjoin_reprocess"], conf)
