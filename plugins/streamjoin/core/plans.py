"""Plans computed from a spec by pure functions; operators hand them to an adapter (spark-submit, Kafka)."""

from __future__ import annotations

import os
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from streamjoin.core.jvm_archive import java_options
from streamjoin.core.spec import PipelineSpec
from streamjoin.core.storage import is_local, local_path

#: The project's root: where ``include/``, ``jobs/`` and ``var/`` live (override with STREAMJOIN_HOME).
PROJECT_HOME = Path(os.environ.get("STREAMJOIN_HOME") or Path(__file__).resolve().parents[3])
JOB_FILE = "jobs/stream_join.py"


#: the engine kernel's jar, built from ``java/kernel`` by ``make setup`` (scripts/build-kernel.sh)
KERNEL_JAR = Path(".local") / "jars" / "kernel" / "streamjoin-kernel.jar"


def connector_jars(home: Path = PROJECT_HOME) -> list[str]:
    """The jars every Spark job of the project gets as ``spark.jars``: Spark's Kafka connector, resolved by
    Maven into ``.local/jars/spark`` (scripts/fetch-jars.sh), and the engine kernel's jar when it is built
    (``streamjoin.spark.kernel`` says to run ``make setup`` when a batch needs it and it is missing)."""
    directory = home / ".local" / "jars" / "spark"
    jars = sorted(str(p) for p in directory.glob("*.jar"))
    if not any("spark-sql-kafka" in j for j in jars):
        raise FileNotFoundError(f"Spark's Kafka connector is missing in {directory}: run scripts/fetch-jars.sh")
    return [*jars, *kernel_jars(home)]


def kernel_jars(home: Path = PROJECT_HOME) -> list[str]:
    """The engine kernel's jar when it is built: every session that runs batches needs it, Kafka or not."""
    kernel = home / KERNEL_JAR
    return [str(kernel)] if kernel.is_file() else []


def package_zip(home: Path = PROJECT_HOME) -> Path:
    """Zip ``plugins/streamjoin`` into ``var/dist/streamjoin.zip`` for ``--py-files``: executors on a
    cluster import the package from it (written to a temp name, then renamed, so readers never see half)."""
    source = home / "plugins"
    target = home / "var" / "dist" / "streamjoin.zip"
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".streamjoin-{os.getpid()}.zip")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted((source / "streamjoin").rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                archive.write(path, path.relative_to(source).as_posix())
    partial.replace(target)
    return target


def resolve(path: str | Path, home: Path = PROJECT_HOME) -> Path:
    """A spec path relative to the project home, absolute paths unchanged."""
    path = Path(path)
    return path if path.is_absolute() else home / path


#: where the pipeline specs are (relative to the project home), unless ``$STREAMJOIN_PIPELINES_DIR`` says
PIPELINES_DIR = "include/pipelines"


def spec_paths(directory: str | None = None, home: Path = PROJECT_HOME) -> list[str]:
    """Every pipeline spec (``*.yaml``) under ``directory`` (default ``$STREAMJOIN_PIPELINES_DIR`` or
    :data:`PIPELINES_DIR`), as paths relative to the project home unless the directory is absolute: the
    pipelines the DAG files build DAGs for, the Stream jobs pages list, the alerts look up."""
    directory = directory or os.environ.get("STREAMJOIN_PIPELINES_DIR", PIPELINES_DIR)
    return sorted(f"{directory}/{p.name}" for p in resolve(directory, home).glob("*.yaml"))


def location(path: str, home: Path = PROJECT_HOME) -> str:
    """An output location of a spec: a URI (``hdfs://``, ``s3a://``) as it is, a path as :func:`resolve`."""
    return path if not is_local(path) else str(resolve(local_path(path), home))


def durable_root(spec: PipelineSpec, home: Path = PROJECT_HOME) -> str:
    """Where a pipeline's offset log, lease and state live: its ``checkpoint_location`` (any Hadoop-compatible
    filesystem), else the local :func:`checkpoint_dir` beside the files Airflow reads."""
    return spec.checkpoint_location or str(checkpoint_dir(spec, home))


#: the shipped DAGs' ids: a pipeline's daily backfill is this prefix and its name (``dags/streamjoin_backfill.py``)
BACKFILL_DAG_PREFIX = "streamjoin_backfill_"
REPROCESS_DAG = "streamjoin_reprocess"  # dags/streamjoin_reprocess.py
STOP_REDEPLOY_DAG = "streamjoin_stop_redeploy"  # dags/streamjoin_stop_redeploy.py


def pipeline_dag_ids(name: str) -> tuple[str, ...]:
    """The DAGs of a pipeline (``dags/streamjoin_pipelines.py``, the job's one owner, and ``_backfill.py``):
    reading its rows on the Stream jobs page needs read access to every one of them."""
    return (f"streamjoin_{name}", f"{BACKFILL_DAG_PREFIX}{name}")


def executor_python() -> str:
    """The executors' Python: ``STREAMJOIN_EXECUTOR_PYTHON`` (e.g. the Spark image's ``python3`` on a
    cluster), else ours."""
    return os.environ.get("STREAMJOIN_EXECUTOR_PYTHON") or sys.executable


def secrets_dir(home: Path = PROJECT_HOME) -> Path:
    """Where Kafka client settings for a job are written (0700; each file 0600, deleted by the job once read)."""
    return home / "var" / "secrets"


def checkpoint_dir(spec: PipelineSpec, home: Path = PROJECT_HOME) -> Path:
    """Each pipeline has its own checkpoint (Spark offsets + join state)."""
    return home / "var" / "checkpoints" / spec.name


@dataclass(frozen=True)
class SubmitPlan:
    """Everything spark-submit needs to run a job, whatever the cluster manager (the master and deploy mode
    come from the Spark connection, see :mod:`streamjoin.core.launch`). Application args are a list, never
    a shell string, so values from the UI cannot reach a shell.

    :param executor_python: the executors' Python (:func:`executor_python`)
    :param driver_python: the driver's Python when it runs here (client mode): ours
    :param secrets_file: the private Kafka settings file the job deletes once read (``--kafka-config``);
        the launcher deletes it if the job could not start
    :param driver_java_options: the driver's JVM options when it runs here (client mode): the class archive's
        (:func:`~streamjoin.core.jvm_archive.java_options`)
    """

    name: str
    application: str
    application_args: list[str]
    jars: list[str]
    py_files: list[str] = field(default_factory=list)
    conf: dict[str, str] = field(default_factory=dict)
    executor_python: str | None = None
    driver_python: str | None = None
    secrets_file: str | None = None
    driver_java_options: str | None = None


def job_plan(
    name: str,
    application: Path,
    args: Sequence[str],
    kafka_args: Sequence[str],
    spec: PipelineSpec,
    jars: list[str],
    *,
    py_files: Sequence[str] = (),
    conf: dict[str, str] | None = None,
) -> SubmitPlan:
    """The plan shared by every streamjoin job: Kafka arguments (``--bootstrap B`` or ``--kafka-config FILE``,
    see ``KafkaClientConfig.job_arguments``), the spec's ``spark:`` settings, shuffle partitions from the spec,
    our Pythons, the class archive (before the spec's own driver JVM options)."""
    secrets = kafka_args[1] if kafka_args and kafka_args[0] == "--kafka-config" else None
    settings = spec.spark.properties()
    driver_jvm = [java_options(PROJECT_HOME), settings.get("spark.driver.extraJavaOptions")]
    return SubmitPlan(
        name=name, application=str(application), application_args=[*args, *kafka_args], jars=jars,
        py_files=list(py_files),
        conf={**settings, "spark.sql.shuffle.partitions": str(spec.kafka.partitions),
              "spark.ui.showConsoleProgress": "false", **(conf or {})},
        executor_python=executor_python(), driver_python=sys.executable, secrets_file=secrets,
        driver_java_options=" ".join(o for o in driver_jvm if o) or None,
    )  # fmt: skip


def plan_submit(
    spec: PipelineSpec,
    spec_path: str | Path,
    kafka_args: Sequence[str],
    jars: list[str],
    *,
    available_now: bool = False,
    home: Path = PROJECT_HOME,
    py_files: Sequence[str] = (),
) -> SubmitPlan:
    """spark-submit plan of ``spec``'s streaming join job.

    :param kafka_args: the job's Kafka arguments, ``--bootstrap B`` or ``--kafka-config FILE``
        (``KafkaClientConfig.job_arguments``: secrets go in a private file, never on the command line)
    :param py_files: shipped to executors with ``--py-files`` (the :func:`package_zip` on a cluster)
    """
    args = ["--spec", str(resolve(spec_path, home)), "--checkpoint", str(checkpoint_dir(spec, home)),
            "--home", str(home)]  # fmt: skip
    if available_now:
        args.append("--available-now")
    return job_plan(f"streamjoin-{spec.name}", home / JOB_FILE, args, kafka_args, spec, jars, py_files=py_files)
