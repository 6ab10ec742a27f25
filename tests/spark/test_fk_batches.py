"""The DataFrame engine's foreign-key join (``STREAMJOIN_ENGINE=dataframe``; the kernel's is cut into smaller
batches in ``test_kernel.py``) carries its tables across micro-batches: a scenario cut into two batches gives the
same changelog as in one (old values and foreign keys of the first batch decide the second's tombstones)."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import functions as F
from test_spark_scenarios import as_records, without_nulls

from scenario_loader import SCENARIO_DIR, load_scenario
from streamjoin.spark.engine import empty_state, process_batch
from streamjoin.spark.events import ORDER
from streamjoin.spark.kernel import ENGINE_ENV
from streamjoin.spark.replay import raw_frame

pytestmark = pytest.mark.spark


def _rows(out: Any) -> list[tuple[Any, Any, int]]:
    rows = out.results.orderBy(*ORDER, "__sub").collect()
    return [
        (r["key"], None if r["value"] is None else without_nulls(r["value"].asDict(recursive=True)), r["ts"])
        for r in rows
    ]


@pytest.mark.parametrize(
    ("name", "cut"), [("table_table_fk_inner_unjoined_tombstones", 4), ("table_table_fk_left_late_product", 3)]
)
def test_fk_scenario_in_two_batches(spark: Any, monkeypatch: pytest.MonkeyPatch, name: str, cut: int) -> None:
    monkeypatch.setenv(ENGINE_ENV, "dataframe")
    scenario = load_scenario(SCENARIO_DIR / f"{name}.yaml")
    spec = scenario.spec
    state = empty_state(spark, spec)
    got = []
    for start, part in ((0, scenario.inputs[:cut]), (cut, scenario.inputs[cut:])):
        raw = raw_frame(spark, spec, as_records(part), batch=False).withColumn("offset", F.col("offset") + start)
        out = process_batch(raw, spec, state, file_order=True)
        got += _rows(out)
        state = {**state, **{k: v.localCheckpoint() for k, v in out.state.items()}}
        out.release()
    want = [(e.key, without_nulls(e.value), e.ts) for e in scenario.expected if e.topic == spec.output.topic]
    assert got == want
