"""The driver's class-data sharing archive ``make setup`` builds (``streamjoin.core.jvm_archive``): a driver
spark-submit starts maps Spark's classes from it, the launcher's plans carry it only where the driver runs here,
and a JVM it does not fit runs on as before."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from streamjoin.core.jvm_archive import archive_path, java_options
from streamjoin.core.launch import SparkTarget, cluster_manager
from streamjoin.core.plans import PROJECT_HOME, plan_submit
from streamjoin.core.spec import load_spec

SPEC_PATH = "include/pipelines/clicks_per_region.yaml"
APP = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
print("rows", spark.range(5).selectExpr("sum(id)").first()[0])
"""


def _options() -> str:
    options = java_options(PROJECT_HOME)
    assert options is not None, f"no class archive at {archive_path(PROJECT_HOME)}: make setup builds it"
    return options


def _submit(tmp_path: Path, options: str) -> subprocess.CompletedProcess[str]:
    app = tmp_path / "app.py"
    app.write_text(APP)
    spark_submit = str(Path(sys.executable).parent / "spark-submit")
    return subprocess.run(
        [spark_submit, "--master", "local[1]", "--conf", f"spark.driver.extraJavaOptions={options}", str(app)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.spark
def test_a_driver_spark_submit_starts_loads_sparks_classes_from_the_archive(tmp_path: Path) -> None:
    loaded = tmp_path / "classes.log"
    # -Xshare:on: a JVM that cannot map the archive does not start at all
    done = _submit(tmp_path, f"{_options()} -Xshare:on -Xlog:class+load=info:file={loaded}")
    assert done.returncode == 0 and "rows 10" in done.stdout, done.stderr[-3000:]
    sources = {}
    for line in loaded.read_text().splitlines():
        if " source: " in line:
            name, source = line.split("] ", 1)[1].split(" source: ", 1)
            sources[name] = source
    assert sources["org.apache.spark.SparkContext"] == "shared objects file (top)"
    assert sources["org.apache.spark.sql.catalyst.analysis.Analyzer"] == "shared objects file (top)"
    from_archive = sum(source == "shared objects file (top)" for source in sources.values())
    assert from_archive > 5000, f"{from_archive} of {len(sources)} classes from the archive"


@pytest.mark.spark
def test_a_jvm_the_archive_does_not_fit_runs_without_it_silently(tmp_path: Path) -> None:
    # another class path than the archive's: the JVM ignores the archive, and says nothing on the job's output
    done = subprocess.run(["java", *_options().split(), "-cp", str(tmp_path), "-version"], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0
    assert "cds" not in done.stdout + done.stderr and "shared archive" not in done.stdout + done.stderr


def test_the_plans_driver_maps_the_archive_only_where_it_runs_here() -> None:
    plan = replace(plan_submit(load_spec(PROJECT_HOME / SPEC_PATH), SPEC_PATH, ["--bootstrap", "b:9092"], ["k.jar"]),
                   driver_java_options="-XX:SharedArchiveFile=/a.jsa")  # fmt: skip
    for target in [SparkTarget(master="local[2]"), SparkTarget(master="spark://h:7077"), SparkTarget(master="yarn")]:
        command = cluster_manager(target).command(plan)
        assert "spark.driver.extraJavaOptions=-XX:SharedArchiveFile=/a.jsa" in command, target
    for master in ["spark://h:7077", "yarn", "k8s://https://h:443"]:
        command = cluster_manager(SparkTarget(master=master, deploy_mode="cluster")).command(plan)
        assert not any(arg.startswith("spark.driver.extraJavaOptions") for arg in command), master
    assert plan_submit(load_spec(PROJECT_HOME / SPEC_PATH), SPEC_PATH, [], []).driver_java_options == _options()
