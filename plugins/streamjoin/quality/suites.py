"""Quality suites: the typed suite file of a pipeline and the check plan computed from it and the spec.

A pipeline's suite lives in ``include/expectations/<pipeline>.yaml`` (a typed YAML translated into a
GX 1.x ``ExpectationSuite`` by :mod:`streamjoin.quality.validate`). Every join pipeline gets default
checks generated from its spec; the file only tunes thresholds, declares value sets and ranges, changes
severities, disables defaults or adds any GX 1.x expectation. A bad file fails with
:class:`~streamjoin.core.errors.SuiteError` naming the file and the field.

Nothing here imports GX or Spark (except to check the kwargs of extra expectations), so plans are
computed and tested as plain data.

Default checks (``enriched`` target, the joined output):

=======================  ===========================================================  =========
check                    what it asserts                                              severity
=======================  ===========================================================  =========
key_not_null             the join key of every output row is set                      blocking
match_rate               share of left records that found a right value >= threshold  blocking
                         (left/outer joins)
no_duplicate_outputs     (key, ts, src_topic, src_partition, src_offset) is unique     blocking
                         (not for windowed joins: a record joins every record of its
                         window, several results of one key and source record)
left_records_complete    distinct left records in the output == left input count of    blocking
                         the day (left/outer joins, when the count is given; the
                         DAGs' check counts it on Kafka for a left join of a stream on
                         a table without grace: ``gate.counts_left_records``)
ts_in_partition          every ts lies inside the partition's day                     blocking
freshness                max(ts) at most ``freshness`` before the partition end       warning
<column>_in_set          declared value sets (``values:``)                            warning
<column>_in_range        declared ranges (``values:``)                                blocking
=======================  ===========================================================  =========

The ``aggregate`` target (e.g. clicks per region: ``key``, ``value``, ``ts``) gets key_not_null,
ts_in_partition, freshness and its declared values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from streamjoin.core.errors import SuiteError, field_path, value_at
from streamjoin.core.output_columns import AGGREGATE_COLUMNS, JOINED_COLUMNS
from streamjoin.core.shapes import traits
from streamjoin.core.spec import DurationMs, Kind, PipelineSpec

#: Output rows that must be unique: one output per triggering record and key/timestamp.
DUPLICATE_KEY = ("key", "ts", "src_topic", "src_partition", "src_offset")

#: Helper columns :func:`streamjoin.quality.validate.with_check_columns` adds before validation.
MATCHED_LEFT = "left_matched"  # 1.0/0.0 for rows triggered by a left record, null otherwise
LEFT_RECORD = "left_record"  # "topic/partition/offset" of the triggering left record, null otherwise
TS_LAG_MINUTES = "ts_lag_minutes"  # minutes from each row's ts to the partition end


class Severity(StrEnum):
    BLOCKING = "blocking"  # the day is quarantined and not published
    WARNING = "warning"  # reported, the day is published


class Target(StrEnum):
    ENRICHED = "enriched"
    AGGREGATE = "aggregate"


_NAME = r"^[a-z][a-z0-9_.]*$"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ValueRule(_Model):
    """Allowed values of one column or struct field (``value.region``)."""

    in_set: list[str | int | float | bool] | None = None
    min: float | None = None
    max: float | None = None
    #: default: warning for sets (a new region is news, not corruption), blocking for ranges
    severity: Severity | None = None

    @model_validator(mode="after")
    def _something_declared(self) -> ValueRule:
        if self.in_set is None and self.min is None and self.max is None:
            raise ValueError("declare at least one of 'in_set', 'min', 'max'")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"'min' ({self.min}) must not be above 'max' ({self.max})")
        return self


class ExtraExpectation(_Model):
    """Any GX 1.x expectation, by its snake_case type and kwargs (columns may be dotted struct paths)."""

    name: Annotated[str, Field(pattern=_NAME)]
    type: Annotated[str, Field(pattern=r"^expect_[a-z0-9_]+$")]
    kwargs: dict[str, Any] = Field(default_factory=dict)
    severity: Severity = Severity.BLOCKING
    description: str = ""


class OutputQuality(_Model):
    """Settings for the checks of one output (``enriched`` or ``aggregate``)."""

    #: lowest share of left records that found a right value (left/outer joins)
    match_rate_min: Annotated[float, Field(ge=0, le=1)] = 0.9
    #: how long before the partition end the newest row may be; ``null`` disables the check
    freshness: DurationMs | None = 3_600_000
    values: dict[str, ValueRule] = Field(default_factory=dict)
    #: check name -> severity, overriding the default
    severity: dict[str, Severity] = Field(default_factory=dict)
    #: default checks to skip, by name
    disable: list[str] = Field(default_factory=list)
    expectations: list[ExtraExpectation] = Field(default_factory=list)


class QualitySettings(_Model):
    """The suite file ``include/expectations/<pipeline>.yaml`` (meant to become the spec's ``quality:``)."""

    pipeline: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")]
    enriched: OutputQuality = OutputQuality()
    aggregate: OutputQuality = OutputQuality()

    def for_target(self, target: Target) -> OutputQuality:
        return self.enriched if target is Target.ENRICHED else self.aggregate


@dataclass(frozen=True)
class Check:
    """One expectation of a plan: a stable name, the GX 1.x expectation type and kwargs, and its severity."""

    name: str
    expectation: str
    kwargs: Mapping[str, Any]
    severity: Severity
    description: str

    @property
    def blocking(self) -> bool:
        return self.severity is Severity.BLOCKING


@dataclass(frozen=True)
class CheckPlan:
    """What to validate for one output partition: the checks and what the helper columns need."""

    pipeline: str
    target: Target
    day: date
    suite_file: str
    checks: tuple[Check, ...]
    #: ``value.region`` -> ``value_region``: struct fields the checks read as flat columns
    flatten: Mapping[str, str] = field(default_factory=dict)
    #: the left input topic, to tell left-triggered rows (match rate, completeness); None for aggregates
    left_topic: str | None = None

    @property
    def partition_start_ms(self) -> int:
        return int(datetime.combine(self.day, datetime.min.time(), UTC).timestamp() * 1000)

    @property
    def partition_end_ms(self) -> int:
        """Exclusive end of the day partition, epoch ms (UTC)."""
        return int(datetime.combine(self.day + timedelta(days=1), datetime.min.time(), UTC).timestamp() * 1000)

    def check(self, name: str) -> Check:
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(name)


def default_suite_path(spec_path: str | Path, pipeline: str) -> Path:
    """``include/pipelines/x.yaml`` -> ``include/expectations/<pipeline>.yaml``."""
    return Path(spec_path).resolve().parent.parent / "expectations" / f"{pipeline}.yaml"


def parse_settings(data: Any, source: str = "<suite>") -> QualitySettings:
    """Validate a mapping (as read from YAML) into :class:`QualitySettings`."""
    if not isinstance(data, dict):
        raise SuiteError(source, "", data, "a mapping with 'pipeline' and optional 'enriched'/'aggregate'")
    try:
        settings = QualitySettings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(first["loc"])
        raise SuiteError(source, field_path(loc), value_at(data, loc), first["msg"]) from None
    for target in Target:
        for i, extra in enumerate(settings.for_target(target).expectations):
            _check_gx_kwargs(extra, f"{target.value}.expectations[{i}]", source)
    return settings


def load_settings(path: str | Path, pipeline: str | None = None) -> QualitySettings:
    """Read a suite file; a missing file gives the defaults (every join pipeline has default checks).

    :param pipeline: the spec's pipeline name; the file must name the same pipeline
    """
    path = Path(path)
    if not path.exists():
        if pipeline is None:
            raise SuiteError(str(path), "", None, "an existing suite file")
        return QualitySettings(pipeline=pipeline)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise SuiteError(str(path), "", None, f"valid YAML ({exc})") from None
    settings = parse_settings(data, str(path))
    if pipeline is not None and settings.pipeline != pipeline:
        raise SuiteError(str(path), "pipeline", settings.pipeline, f"{pipeline!r}, the pipeline of the spec")
    return settings


def _check_gx_kwargs(extra: ExtraExpectation, where: str, source: str) -> None:
    """Instantiate the GX expectation once, so a bad type or kwarg names the field now, not at run time."""
    from great_expectations.exceptions import ExpectationNotFoundError
    from great_expectations.expectations.registry import get_expectation_impl

    try:
        impl = get_expectation_impl(extra.type)
    except ExpectationNotFoundError:
        raise SuiteError(
            source, f"{where}.type", extra.type, "a GX 1.x expectation type such as expect_column_values_to_be_between"
        ) from None
    try:
        impl(**{**extra.kwargs, **_flat_columns(extra.kwargs)[0]})
    except Exception as exc:  # GX raises pydantic.v1 ValidationError or its own errors
        errors = getattr(exc, "errors", None)
        if callable(errors):
            first = errors()[0]
            loc = tuple(first["loc"])
            name = field_path(p for p in loc if p != "__root__")
            raise SuiteError(
                source, f"{where}.kwargs" + (f".{name}" if name else ""), extra.kwargs.get(name), first["msg"]
            ) from None
        raise SuiteError(source, f"{where}.kwargs", extra.kwargs, str(exc)) from None


def column_name(path: str) -> str:
    """The flat column a check reads for a (possibly dotted) field: ``value.region`` -> ``value_region``."""
    return path.replace(".", "_")


def _flat_columns(kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Rewrite dotted column kwargs to flat column names; return the rewritten kwargs and the mapping."""
    out: dict[str, Any] = {}
    flatten: dict[str, str] = {}
    for key in ("column", "column_A", "column_B"):
        if isinstance(kwargs.get(key), str) and "." in kwargs[key]:
            flatten[kwargs[key]] = out[key] = column_name(kwargs[key])
    if isinstance(kwargs.get("column_list"), list):
        columns = []
        for column in kwargs["column_list"]:
            if isinstance(column, str) and "." in column:
                flatten[column] = column_name(column)
            columns.append(column_name(column) if isinstance(column, str) else column)
        out["column_list"] = columns
    return out, flatten


def value_fields(spec: PipelineSpec, target: Target) -> list[str]:
    """Struct fields of ``value`` known from the spec (a joiner ``select``; the default joiner's sides)."""
    if target is Target.AGGREGATE:
        return []
    joiner = spec.join.joiner
    if isinstance(joiner.select, dict):
        return [f"value.{name}" for name in joiner.select]
    if joiner.is_default:
        return ["value.left", "value.right"]
    return []  # a Python joiner: fields are unknown until run time


def build_check_plan(
    spec: PipelineSpec,
    settings: QualitySettings,
    *,
    day: date,
    target: Target = Target.ENRICHED,
    left_input_count: int | None = None,
    suite_file: str = "<defaults>",
) -> CheckPlan:
    """The checks for one day partition of ``target``: defaults from the spec, tuned by the suite file.

    :param left_input_count: left input records of the day; enables ``left_records_complete``
    :raises SuiteError: the file names a check, column or field the pipeline does not have
    """
    quality = settings.for_target(target)
    where = target.value
    joined = target is Target.ENRICHED
    left_or_outer = joined and spec.join.kind in (Kind.LEFT, Kind.OUTER)
    plan_day = CheckPlan(spec.name, target, day, suite_file, ())
    checks: list[Check] = [
        Check(
            "key_not_null",
            "expect_column_values_to_not_be_null",
            {"column": "key"},
            Severity.BLOCKING,
            "every output row has its join key",
        ),
    ]
    if left_or_outer:
        checks.append(
            Check(
                "match_rate",
                "expect_column_mean_to_be_between",
                {"column": MATCHED_LEFT, "min_value": quality.match_rate_min, "max_value": 1.0},
                Severity.BLOCKING,
                f"at least {quality.match_rate_min:.0%} of the left records of {left_records(spec)} found a "
                f"value in {spec.right.topic!r} (observed: the share that did)",
            )
        )
    if joined and not traits(spec.join.shape).windowed:
        checks.append(
            Check(
                "no_duplicate_outputs",
                "expect_compound_columns_to_be_unique",
                {"column_list": list(DUPLICATE_KEY)},
                Severity.BLOCKING,
                "one output row per (key, ts, src_topic, src_partition, src_offset)",
            )
        )
    if left_or_outer and left_input_count is not None:
        checks.append(
            Check(
                "left_records_complete",
                "expect_column_unique_value_count_to_be_between",
                {"column": LEFT_RECORD, "min_value": left_input_count, "max_value": left_input_count},
                Severity.BLOCKING,
                f"every one of the {left_input_count} left input records of the day has its output "
                "(observed: distinct left records in the output; duplicates are no_duplicate_outputs' job)",
            )
        )
    checks.append(
        Check(
            "ts_in_partition",
            "expect_column_values_to_be_between",
            {"column": "ts", "min_value": plan_day.partition_start_ms, "max_value": plan_day.partition_end_ms - 1},
            Severity.BLOCKING,
            f"every ts lies on {day.isoformat()} (UTC)",
        )
    )
    if quality.freshness is not None:
        minutes = quality.freshness / 60_000
        checks.append(
            Check(
                "freshness",
                "expect_column_min_to_be_between",
                {"column": TS_LAG_MINUTES, "max_value": minutes},
                Severity.WARNING,
                f"the newest row is at most {minutes:g} min before the partition end "
                "(observed: minutes from the newest ts to the partition end)",
            )
        )

    allowed_columns = JOINED_COLUMNS if joined else AGGREGATE_COLUMNS
    known_fields = value_fields(spec, target)
    flatten: dict[str, str] = {}
    for path, rule in quality.values.items():
        if path not in allowed_columns and path not in known_fields:
            raise SuiteError(
                suite_file,
                f"{where}.values.{path}",
                path,
                f"a column or field of the {where} output: {sorted([*allowed_columns, *known_fields])}",
            )
        column = column_name(path)
        if column != path:
            flatten[path] = column
        if rule.in_set is not None:
            checks.append(
                Check(
                    f"{column}_in_set",
                    "expect_column_values_to_be_in_set",
                    {"column": column, "value_set": list(rule.in_set)},
                    rule.severity or Severity.WARNING,
                    f"{path} is one of {list(rule.in_set)}",
                )
            )
        if rule.min is not None or rule.max is not None:
            bounds = {k: v for k, v in (("min_value", rule.min), ("max_value", rule.max)) if v is not None}
            checks.append(
                Check(
                    f"{column}_in_range",
                    "expect_column_values_to_be_between",
                    {"column": column, **bounds},
                    rule.severity or Severity.BLOCKING,
                    f"{path} within [{rule.min if rule.min is not None else '-inf'}, "
                    f"{rule.max if rule.max is not None else 'inf'}]",
                )
            )

    names = [c.name for c in checks]
    for i, name in enumerate(quality.disable):
        if name not in names:
            raise SuiteError(suite_file, f"{where}.disable[{i}]", name, f"one of the checks {names}")
    checks = [c for c in checks if c.name not in quality.disable]
    names = [c.name for c in checks]
    for name, severity in quality.severity.items():
        if name not in names:
            raise SuiteError(suite_file, f"{where}.severity.{name}", name, f"one of the checks {names}")
        checks = [_with_severity(c, severity) if c.name == name else c for c in checks]
    for i, extra in enumerate(quality.expectations):
        if extra.name in names:
            raise SuiteError(
                suite_file, f"{where}.expectations[{i}].name", extra.name, f"a name not used by another check ({names})"
            )
        kwargs, extra_flat = _flat_columns(extra.kwargs)
        for path in extra_flat:
            if path not in known_fields:
                raise SuiteError(
                    suite_file,
                    f"{where}.expectations[{i}].kwargs",
                    path,
                    f"a field of the {where} output: {known_fields}",
                )
        flatten.update(extra_flat)
        checks.append(
            Check(
                extra.name,
                extra.type,
                {**extra.kwargs, **kwargs},
                extra.severity,
                extra.description or extra.type.replace("_", " "),
            )
        )
        names.append(extra.name)
    return CheckPlan(
        pipeline=spec.name,
        target=target,
        day=day,
        suite_file=suite_file,
        checks=tuple(checks),
        flatten=flatten,
        left_topic=left_source(spec) if joined else None,
    )


def left_source(spec: PipelineSpec) -> str:
    """The ``src_topic`` of the output rows the last join stage's left records triggered: the left input's topic,
    or for a chain the previous stage's results, ``<stage name>`` (as the reference engine and the job name them;
    docs/SEMANTICS.md section 11)."""
    return f"<{spec.stages[-2].name}>" if spec.chained else spec.left.topic


def left_records(spec: PipelineSpec) -> str:
    """The last join stage's left records in words (a check's description)."""
    if spec.chained:
        return f"stage {spec.stages[-2].name!r}'s results (the last stage's left side)"
    return repr(spec.left.topic)


def _with_severity(check: Check, severity: Severity) -> Check:
    return Check(check.name, check.expectation, check.kwargs, severity, check.description)


_DAY = re.compile(r"date=(\d{4}-\d{2}-\d{2})")


def day_of_partition(path: str | Path) -> date | None:
    """``.../date=2026-01-02`` -> ``date(2026, 1, 2)``; None if the path names no day."""
    match = _DAY.search(str(path))
    return date.fromisoformat(match.group(1)) if match else None
