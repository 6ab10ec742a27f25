"""Fixtures of the quality tests: the seed spec and suite, frame builders (the SparkSession is tests/conftest.py's)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from quality_cases import DAY, ENRICHED_SCHEMA, SPEC_PATH, SUITE_PATH, Row


@pytest.fixture(scope="session")
def spec() -> Any:
    from streamjoin.core.spec import load_spec

    return load_spec(SPEC_PATH)


@pytest.fixture(scope="session")
def settings(spec: Any) -> Any:
    from streamjoin.quality.suites import load_settings

    return load_settings(SUITE_PATH, spec.name)


@pytest.fixture
def enriched_frame(spark: Any) -> Callable[[list[Row]], Any]:
    def build(rows: list[Row]) -> Any:
        return spark.createDataFrame([tuple(r) for r in rows], ENRICHED_SCHEMA)

    return build


@pytest.fixture
def write_partition(enriched_frame: Callable[[list[Row]], Any], tmp_path: Path) -> Callable[..., Path]:
    """Write rows as ``<tmp>/<name>/date=2026-01-02/`` Parquet, as the join job does."""

    def write(rows: list[Row], name: str = "enriched") -> Path:
        path = tmp_path / "output" / name / f"date={DAY.isoformat()}"
        enriched_frame(rows).coalesce(1).write.mode("overwrite").parquet(str(path))
        return path

    return write
