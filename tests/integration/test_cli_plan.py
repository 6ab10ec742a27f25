"""``streamjoin plan --bootstrap``: compares the plan with the broker's topics, read only."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from streamjoin.cli import main
from streamjoin.kafka.admin import describe_topics

pytestmark = pytest.mark.kafka


def test_plan_against_a_broker_names_the_topics_that_break_copartitioning(
    kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    suffix = uuid.uuid4().hex[:8]
    clicks, regions = f"clicks-{suffix}", f"regions-{suffix}"
    spec: dict[str, Any] = {
        "name": "planned",
        "kafka": {"partitions": 4},
        "inputs": {"clicks": {"topic": clicks, "role": "stream"}, "regions": {"topic": regions, "role": "table"}},
        "join": {"shape": "stream-table", "kind": "left", "left": "clicks", "right": "regions"},
        "output": {"topic": f"out-{suffix}"},
        "dead_letter_topic": f"dlq-{suffix}",
    }
    path = tmp_path / "planned.yaml"
    path.write_text(yaml.safe_dump(spec))
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for future in admin.create_topics([NewTopic(clicks, 3, 1)]).values():
        future.result(30)
    deadline = time.monotonic() + 30
    while clicks not in describe_topics({"bootstrap.servers": kafka_bootstrap}, [clicks]):
        assert time.monotonic() < deadline, f"`{clicks}` not in the broker's metadata within 30 s"
        time.sleep(0.2)
    assert main(["plan", str(path), "--bootstrap", kafka_bootstrap]) == 1
    out = capsys.readouterr().out
    assert f"exists   {clicks} (input-stream, 3 partitions" in out and "WARNING: has 3 partitions" in out
    assert f"create   {regions} (input-table, 4 partitions" in out
    assert f"refused: topics '{clicks}' (3 partitions) and '{regions}' (4 partitions) must be co-partitioned" in out
    assert regions not in describe_topics({"bootstrap.servers": kafka_bootstrap}, [regions])  # nothing created
