"""Validate a Spark DataFrame of a pipeline output against a :class:`CheckPlan` through GX 1.x.

Per run: an ephemeral GX context whose Data Docs site is a fresh directory, a Spark data source with a
dataframe asset and a whole-dataframe batch definition, the plan translated into an ``ExpectationSuite``,
a ``ValidationDefinition`` and a ``Checkpoint`` whose ``UpdateDataDocsAction`` writes the HTML. The GX
result is turned into a plain :class:`~streamjoin.quality.results.CheckResult`.

Imports GX and pyspark: only operators' ``execute`` and tests import this module.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import great_expectations as gx
from great_expectations.checkpoint import UpdateDataDocsAction
from great_expectations.core.expectation_suite import ExpectationSuite
from great_expectations.core.run_identifier import RunIdentifier
from great_expectations.data_context.types.base import (
    DataContextConfig,
    InMemoryStoreBackendDefaults,
    ProgressBarsConfig,
)
from great_expectations.expectations.expectation_configuration import ExpectationConfiguration
from great_expectations.expectations.metadata_types import FailureSeverity
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamjoin.quality.results import (
    ROW_COUNT,
    CheckResult,
    ExpectationOutcome,
    quarantine,
    release_quarantine,
    write_check_result,
)
from streamjoin.quality.suites import LEFT_RECORD, MATCHED_LEFT, TS_LAG_MINUTES, CheckPlan, Severity

log = logging.getLogger(__name__)

SITE = "streamjoin"
_GX_SEVERITY = {Severity.BLOCKING: FailureSeverity.CRITICAL, Severity.WARNING: FailureSeverity.WARNING}
_SAMPLE = 5


def with_check_columns(df: DataFrame, plan: CheckPlan) -> DataFrame:
    """Add the flat columns the checks read: struct fields, left-record markers, minutes to partition end.

    Row-wise helpers keep the GX suite to stock expectations: the match rate is the mean of
    ``left_matched`` (null on rows a right record triggered), completeness the distinct count of
    ``left_record``.
    """
    columns = [F.col(path).alias(flat) for path, flat in plan.flatten.items()]
    if plan.left_topic is not None and {"matched", "src_topic"} <= set(df.columns):
        from_left = F.col("src_topic") == F.lit(plan.left_topic)
        columns.append(F.when(from_left, F.col("matched").cast("double")).alias(MATCHED_LEFT))
        columns.append(
            F.when(from_left, F.concat_ws("/", "src_topic", "src_partition", "src_offset")).alias(LEFT_RECORD)
        )
    if "ts" in df.columns:
        columns.append(((F.lit(plan.partition_end_ms) - F.col("ts")) / F.lit(60_000.0)).alias(TS_LAG_MINUTES))
    return df.select("*", *columns)


def to_gx_suite(plan: CheckPlan) -> ExpectationSuite:
    """The plan as a GX 1.x suite; each expectation carries the check name and severity in ``meta``."""
    expectations = [
        ExpectationConfiguration(
            type=check.expectation,
            kwargs=dict(check.kwargs),
            meta={"check": check.name, "severity": check.severity.value},
            description=check.description,
            severity=_GX_SEVERITY[check.severity],
        ).to_domain_obj()
        for check in plan.checks
    ]
    return ExpectationSuite(name=f"{plan.pipeline}.{plan.target.value}", expectations=expectations)


def _context(docs_dir: Path) -> Any:
    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(),
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False),
        data_docs_sites={
            SITE: {
                "class_name": "SiteBuilder",
                "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs_dir)},
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            }
        },
    )
    return gx.get_context(project_config=config, mode="ephemeral")


def run_slug(run_id: str) -> str:
    """A run id usable as a directory name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", run_id).strip("_") or "run"


def validate_dataframe(
    df: DataFrame,
    plan: CheckPlan,
    *,
    docs_dir: str | Path,
    run_id: str = "manual",
    partition_path: str | None = None,
) -> CheckResult:
    """Validate ``df`` (one day of one output) and build its Data Docs under ``docs_dir``.

    :param docs_dir: this run's Data Docs directory (created; the caller keeps one per run)
    :param run_id: names the GX run (shown in Data Docs) and the result
    """
    docs = Path(docs_dir).resolve()
    docs.mkdir(parents=True, exist_ok=True)
    prepared = with_check_columns(df, plan).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        row_count = prepared.count()
        if row_count == 0:
            return empty_result(plan, run_id=run_id, partition_path=partition_path)
        context = _context(docs)
        batch_definition = (
            context.data_sources.add_spark(name=plan.pipeline, persist=False)
            .add_dataframe_asset(name=plan.target.value)
            .add_batch_definition_whole_dataframe(plan.day.isoformat())
        )
        suite = context.suites.add(to_gx_suite(plan))
        definition = context.validation_definitions.add(
            gx.ValidationDefinition(name=f"{suite.name}.{plan.day.isoformat()}", data=batch_definition, suite=suite)
        )
        checkpoint = context.checkpoints.add(
            gx.Checkpoint(
                name=f"{suite.name}.checkpoint",
                validation_definitions=[definition],
                actions=[UpdateDataDocsAction(name="update_data_docs", site_names=[SITE])],
                result_format={"result_format": "SUMMARY", "partial_unexpected_count": _SAMPLE},
            )
        )
        outcome = checkpoint.run(
            batch_parameters={"dataframe": prepared}, run_id=RunIdentifier(run_name=run_slug(run_id))
        )
    finally:
        prepared.unpersist()
    ((identifier, validation),) = outcome.run_results.items()
    (docs / "suite.json").write_text(json.dumps(suite.to_json_dict(), indent=2, default=str))
    return CheckResult.from_outcomes(
        pipeline=plan.pipeline,
        target=plan.target.value,
        day=plan.day.isoformat(),
        expectations=_outcomes(plan, validation.to_json_dict()),
        run_id=run_id,
        row_count=row_count,
        partition_path=partition_path,
        suite_file=plan.suite_file,
        data_docs_url=_docs_url(context, identifier, docs),
    )


def check_partition(
    spark: SparkSession,
    plan: CheckPlan,
    partition: str | Path,
    *,
    docs_dir: str | Path,
    run_id: str,
    docs_url: Callable[[str], str] | None = None,
    file_format: str = "parquet",
) -> CheckResult:
    """Validate a day partition and record the verdict in it: ``_CHECK_RESULT.json`` always, ``_QUARANTINED``
    when a blocking check failed (a passing run removes an old marker).

    :param docs_url: maps the local Data Docs URL to the one people can open (alerts, status page)
    :param file_format: how the day's files are written (the spec's ``files.format``: parquet or json)
    """
    partition = Path(partition)
    if not any(p.is_file() and not p.name.startswith(("_", ".")) for p in partition.rglob("*")):
        result = empty_result(plan, run_id=run_id, partition_path=str(partition))  # Spark cannot read "nothing"
    else:
        day = spark.read.format(file_format).load(str(partition))
        result = validate_dataframe(day, plan, docs_dir=docs_dir, run_id=run_id, partition_path=str(partition))
    if docs_url is not None and result.data_docs_url:
        result = dataclasses.replace(result, data_docs_url=docs_url(result.data_docs_url))
    write_check_result(result, partition)
    if result.success:
        release_quarantine(partition)
    else:
        quarantine(partition, result)
    return result


def empty_result(plan: CheckPlan, *, run_id: str, partition_path: str | None) -> CheckResult:
    """The verdict on a day without output rows: it fails as "0 rows" (the suite's checks have nothing to
    measure; GX would report a match rate of null)."""
    return CheckResult.from_outcomes(
        pipeline=plan.pipeline,
        target=plan.target.value,
        day=plan.day.isoformat(),
        expectations=[ExpectationOutcome(ROW_COUNT, "row_count", False, 0, True, "the day has at least one row")],
        run_id=run_id,
        row_count=0,
        partition_path=partition_path,
        suite_file=plan.suite_file,
    )


def _outcomes(plan: CheckPlan, validation: dict[str, Any]) -> list[ExpectationOutcome]:
    by_name = {r["expectation_config"]["meta"].get("check"): r for r in validation["results"]}
    outcomes = []
    for check in plan.checks:  # in plan order, whatever order GX ran them in
        result = by_name.get(check.name)
        if result is None:
            outcomes.append(
                ExpectationOutcome(
                    check.name,
                    check.expectation,
                    False,
                    None,
                    check.blocking,
                    check.description,
                    "GX returned no result for this check",
                )
            )
            continue
        error = None
        info = result.get("exception_info") or {}
        if info.get("raised_exception"):
            error = (info.get("exception_message") or "expectation raised").strip().splitlines()[-1]
        outcomes.append(
            ExpectationOutcome(
                name=check.name,
                expectation=check.expectation,
                success=bool(result["success"]),
                observed=_observed(result.get("result") or {}),
                blocking=check.blocking,
                description=check.description,
                error=error,
            )
        )
    return outcomes


def _observed(result: dict[str, Any]) -> Any:
    if "observed_value" in result:
        return result["observed_value"]
    if "unexpected_count" in result:
        return {
            "unexpected_count": result["unexpected_count"],
            "unexpected_percent": result.get("unexpected_percent"),
            "element_count": result.get("element_count"),
            "sample": list(result.get("partial_unexpected_list") or [])[:_SAMPLE],
        }
    return result or None


def _docs_url(context: Any, identifier: Any, docs: Path) -> str:
    """The validation page of this run, or the site index if GX cannot tell."""
    try:
        urls = context.get_docs_sites_urls(resource_identifier=identifier, site_name=SITE)
        if urls and urls[0].get("site_url"):
            return str(urls[0]["site_url"])
    except Exception:  # the link is a convenience; the result is what counts
        log.warning("could not resolve the Data Docs page of %s", identifier, exc_info=True)
    return (docs / "index.html").as_uri()
