"""Builds the Spark driver's class-data sharing archive (:mod:`streamjoin.core.jvm_archive`), ``make setup``'s last
step: a training run in a JVM started with ``-XX:ArchiveClassesAtExit``, which writes the classes it loaded when it
exits. The run is what a driver does first, without Kafka: a session with the jobs' jars, the seed pipeline
replayed from its example file (the kernel, its stores, Spark SQL's code generation), and the kernel's task
pipeline of the seed's join built. Nothing to do when this Java and Spark have their archive.

    python -m streamjoin.localdev.jvm_archive
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from streamjoin.core.jvm_archive import QUIET, archive_path
from streamjoin.core.plans import PROJECT_HOME

SEED_SPEC = "include/pipelines/clicks_per_region.yaml"
SEED_EVENTS = "include/examples/clicks_per_region.jsonl"


def build(home: Path = PROJECT_HOME) -> Path | None:
    """The archive, trained and written now unless it is there (stale archives of another Java or Spark are
    removed); None when this machine has no Java or Spark, or the training failed (said, with its output's tail:
    drivers then start without it, slower; ``tests/spark/test_jvm_archive.py`` fails)."""
    target = archive_path(home)
    if target is None:
        print("jvm-archive: no java or no Spark found: nothing to build")
        return None
    if target.is_file():
        print(f"jvm-archive: {target.relative_to(home)} is there")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob("*.jsa*"):
        stale.unlink()
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", __spec__.name, "--train", str(partial)], cwd=home, capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip
    if done.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        print(f"jvm-archive: the training run failed (exit {done.returncode}), drivers start without the archive:\n"
              f"{done.stderr[-3000:]}")  # fmt: skip
        return None
    partial.replace(target)
    size = target.stat().st_size / 2**20
    print(f"jvm-archive: {target.relative_to(home)} ({size:.0f} MiB) in {time.monotonic() - started:.0f}s")
    return target


def train(partial: Path, home: Path = PROJECT_HOME) -> None:
    """The training run (in its own process: the JVM it starts writes ``partial`` when it exits)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark import SparkContext

    from streamjoin.cli import read_events
    from streamjoin.core.spec import PipelineSpec, load_spec
    from streamjoin.spark.in_task import task_pipeline
    from streamjoin.spark.kernel import jvm_plan
    from streamjoin.spark.replay import replay
    from streamjoin.spark.session import build_session

    conf = {"spark.ui.enabled": "false", "spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={partial} {QUIET}"}
    spark = build_session("streamjoin-jvm-archive", master="local[2]", shuffle_partitions=2, extra_conf=conf)
    seed = load_spec(home / SEED_SPEC)
    replay(spark, seed, read_events(home / SEED_EVENTS), batch=True, max_records=5)
    fields = seed.model_dump(mode="json")
    fields["output"]["files"] = fields["aggregate"] = None  # the join alone runs in the kernel's tasks
    join = PipelineSpec.model_validate(fields)
    jvm_plan(spark, join)
    task_pipeline(spark, join, join.model_dump_json())
    spark.stop()
    gateway = SparkContext._gateway
    assert gateway is not None and gateway.proc is not None
    gateway.shutdown()
    gateway.proc.stdin.close()  # the JVM exits when its Python goes, writing the archive first
    gateway.proc.wait(timeout=600)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jvm_archive", description=__doc__)
    parser.add_argument("--train", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.train:
        train(args.train)
    else:
        build()
    return 0


if __name__ == "__main__":
    sys.exit(main())
