"""Where alerts go: a spec's own ``alerts:``, else the project's default file (no Airflow, no broker)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from streamjoin.core.alerts import FILE_ENV, alerts_for, describe, project_alerts
from streamjoin.core.errors import SpecError
from streamjoin.core.plans import PROJECT_HOME
from streamjoin.core.spec import parse_spec

SEED = yaml.safe_load((PROJECT_HOME / "include" / "pipelines" / "clicks_per_region.yaml").read_text())


def test_the_project_default_is_the_loopback_webhook_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FILE_ENV, raising=False)
    alerts = alerts_for(parse_spec(SEED))
    assert (alerts.webhook_conn_id, alerts.smtp_conn_id) == ("streamjoin_alerts_webhook", None)
    assert describe(alerts) == "webhook (HTTP connection 'streamjoin_alerts_webhook')"


def test_a_spec_s_alerts_replace_the_default_and_an_empty_one_turns_them_off() -> None:
    own = {"smtp_conn_id": "mail", "to": ["oncall@example.org"]}
    alerts = alerts_for(parse_spec({**SEED, "alerts": own}))
    assert (alerts.webhook_conn_id, alerts.smtp_conn_id, alerts.to) == (None, "mail", ["oncall@example.org"])
    assert describe(alerts_for(parse_spec({**SEED, "alerts": {}}))).startswith("nowhere")


def test_smtp_without_recipients_is_refused_in_the_spec_and_in_the_default_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(SpecError, match="needs 'to'"):
        parse_spec({**SEED, "alerts": {"smtp_conn_id": "mail"}})
    default = tmp_path / "alerts.yaml"
    default.write_text("smtp_conn_id: mail\n")
    monkeypatch.setenv(FILE_ENV, str(default))
    with pytest.raises(SpecError, match="needs 'to'") as refused:
        project_alerts()
    assert str(default) in str(refused.value)
