"""Plans computed from a spec by pure functions; operators hand them to an adapter (spark-submit, Kafka)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from streamjoin.core.spec import PipelineSpec

#: The project's root: where ``include/``, ``jobs/`` and ``var/`` live (override with STREAMJOIN_HOME).
PROJECT_HOME = Path(os.environ.get("STREAMJOIN_HOME") or Path(__file__).resolve().parents[3])
JOB_FILE = "jobs/stream_join.py"


def connector_jars(home: Path = PROJECT_HOME) -> list[str]:
    """Spark's Kafka connector jars, resolved by Maven into ``.local/jars/spark`` (scripts/fetch-jars.sh)."""
    directory = home / ".local" / "jars" / "spark"
    jars = sorted(str(p) for p in directory.glob("*.jar"))
    if not any("spark-sql-kafka" in j for j in jars):
        raise FileNotFoundError(f"Spark's Kafka connector is missing in {directory}: run scripts/fetch-jars.sh")
    return jars


def resolve(path: str | Path, home: Path = PROJECT_HOME) -> Path:
    """A spec path relative to the project home, absolute paths unchanged."""
    path = Path(path)
    return path if path.is_absolute() else home / path


def checkpoint_dir(spec: PipelineSpec, home: Path = PROJECT_HOME) -> Path:
    """Each pipeline has its own checkpoint (Spark offsets + join state)."""
    return home / "var" / "checkpoints" / spec.name


@dataclass(frozen=True)
class SubmitPlan:
    """Everything spark-submit needs to run a pipeline's join job; application args are a list, never a
    shell string, so values from the UI cannot reach a shell."""

    name: str
    application: str
    application_args: list[str]
    jars: list[str]
    py_files: list[str] = field(default_factory=list)
    conf: dict[str, str] = field(default_factory=dict)


def plan_submit(
    spec: PipelineSpec,
    spec_path: str | Path,
    bootstrap: str,
    jars: list[str],
    *,
    available_now: bool = False,
    home: Path = PROJECT_HOME,
    python: str | None = None,
) -> SubmitPlan:
    args = [
        "--spec", str(resolve(spec_path, home)),
        "--bootstrap", bootstrap,
        "--checkpoint", str(checkpoint_dir(spec, home)),
        "--home", str(home),
    ]  # fmt: skip
    if available_now:
        args.append("--available-now")
    conf = {
        "spark.sql.shuffle.partitions": str(spec.kafka.partitions),
        "spark.ui.showConsoleProgress": "false",
    }
    if python:
        conf["spark.pyspark.python"] = python
        conf["spark.pyspark.driver.python"] = python
    return SubmitPlan(
        name=f"streamjoin-{spec.name}",
        application=str(home / JOB_FILE),
        application_args=args,
        jars=jars,
        conf=conf,
    )
