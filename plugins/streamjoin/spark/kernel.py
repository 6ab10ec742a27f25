"""The engine kernel (``java/kernel``, design: ENGINE-KERNEL.md): a batch is one call into the JVM, one RDD
whose task t processes Kafka partition t of every input in the batch ordering rule with the shape's
per-record rules, state in Spark's state store (RocksDB, changelog checkpointing).

Every shape runs here: stream-table inner/left (a plain table or a versioned one, an optional grace),
stream-globaltable inner/left (every task keeping a replica of the global table), table-table
inner/left/outer, windowed stream-stream inner/left/outer, the foreign-key join inner/left (a first stage
by the left key's partition, a second by foreign key), and the aggregate after them (a second stage keyed by
group, its totals in the same store; after a table-producing join a table aggregate, which first subtracts
each result key's previous contribution). The kernel's rows are join results (``key, left, right, ts,
matched, tomb_out, __sub, src_*, __task`` and ``ORDER``), so the joiner and the sinks after it are Spark SQL.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from functools import cache
from typing import Any

from py4j.java_gateway import JavaClass
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from streamjoin.core.join_plan import JOIN_STORE, JoinPlan
from streamjoin.core.plans import KERNEL_JAR
from streamjoin.core.spec import PipelineSpec
from streamjoin.spark.state import KERNEL_DIR, KernelCheckpoint, KernelCommit


@dataclass
class KernelResults:
    """The kernel's result rows of one batch; :meth:`unpersist` frees them once the outputs are written (and,
    for a temporary checkpoint, closes its stores and deletes it)."""

    frame: DataFrame
    handle: Any
    spark: SparkSession
    partitions: int
    #: where the batch's stores are (the aggregate's beside the join's)
    root: str
    temporary: str | None = None

    def result_count(self) -> int:
        """The result rows the batch's tasks emitted (after the action that ran them)."""
        return int(self.handle.resultCount())

    def unpersist(self) -> None:
        self.handle.release()
        if self.temporary is not None:
            unload(self.spark, self.temporary, self.partitions)
            shutil.rmtree(self.temporary, ignore_errors=True)


def kernel_join(
    decoded: DataFrame,
    spec: PipelineSpec,
    checkpoint: KernelCheckpoint,
    *,
    file_order: bool,
    aligned: bool = False,
    read_once: bool = False,
) -> KernelResults:
    """One batch of decoded rows through the spec's join on the kernel: its results (see the module's
    docstring), lazily; the first action over them runs the batch and commits the stores at
    ``checkpoint.version + 1``.

    :param aligned: partition t of ``decoded`` holds task t's records (read by
        :func:`~streamjoin.spark.source.read_task_ranges`): no shuffle before the rules
    :param read_once: the caller reads the results in one action (one write): they are not cached
    """
    spark = decoded.sparkSession
    temporary = None
    root = checkpoint.root
    if root is None:
        temporary = root = tempfile.mkdtemp(prefix="streamjoin-kernel-")
    plan = jvm_plan(spark, spec)
    batch = _kernel(spark).join(spark._jsparkSession, decoded._jdf, plan, root, checkpoint.version, file_order, aligned,
                                   read_once)  # fmt: skip
    shape = ("join", JoinPlan.of(spec).to_json(), decoded.schema.json(), file_order, aligned, read_once)
    return KernelResults(_frame(batch.results(), spark, shape), batch, spark, spec.kafka.partitions, root, temporary)


def aggregate(
    staged: DataFrame, spec: PipelineSpec, joined: KernelResults, version: int, *, file_order: bool
) -> KernelResults:
    """The aggregate's updates of one batch (``key, value, ts, __sub`` and ``ORDER``; every group's in one
    partition in emission order), lazily, from its staged join results: after a stream-producing join
    ``aggregate.staged_results`` (null groups are the caller's dead letters), after a table-producing one
    ``table_aggregate.kernel_staged_table_results`` (each result first subtracts its key's previous contribution,
    kept in its join task's store). The reducer tasks keep the totals in their stores beside the join's
    (``joined.root``), read at ``version`` and committed at ``version + 1`` by the first action."""
    spark = staged.sparkSession
    batch = _kernel(spark).aggregate(
        spark._jsparkSession, staged._jdf, jvm_plan(spark, spec), joined.root, version, file_order
    )
    shape = ("aggregate", JoinPlan.of(spec).to_json(), staged.schema.json(), file_order)
    return KernelResults(_frame(batch.results(), spark, shape), batch, spark, joined.partitions, joined.root)


#: the kernel's result schema for what decides it (the call, the plan, the input's schema, the flags)
_RESULT_SCHEMAS: dict[tuple[Any, ...], StructType] = {}


def _frame(results: Any, spark: SparkSession, shape: tuple[Any, ...]) -> DataFrame:
    """The kernel's result rows as a frame whose schema is known without asking the JVM (two Py4J calls a batch
    for each frame a batch program is then looked up by: see :mod:`~streamjoin.spark.templates`)."""
    frame = DataFrame(results, spark)
    if (schema := _RESULT_SCHEMAS.get(shape)) is not None:
        frame.__dict__["schema"] = schema
    elif len(_RESULT_SCHEMAS) < 256:  # a few per pipeline stage: bounded all the same (a long-running driver)
        _RESULT_SCHEMAS[shape] = frame.schema
    return frame


def committed(spec: PipelineSpec, checkpoint: KernelCheckpoint, under: str = KERNEL_DIR) -> KernelCommit:
    """The store files a batch from ``checkpoint`` commits (Spark's layout: ``<operator>/<partition>[/<store>]/
    <version>.changelog``, the join's store at the partition's root), relative to the state root (``under``: the
    stores' folder there); none for a temporary checkpoint."""
    if checkpoint.root is None:
        return KernelCommit(())
    stores = ["" if store == JOIN_STORE else f"{store}/" for store in JoinPlan.of(spec).stores]
    version = checkpoint.version + 1
    return KernelCommit(tuple(
        f"{under}/0/{partition}/{store}{version}.changelog" for partition in range(spec.kafka.partitions)
        for store in stores
    ))  # fmt: skip


def jvm_plan(spark: SparkSession, spec: PipelineSpec) -> Any:
    """The spec's :class:`JoinPlan` in the JVM, parsed and checked by the kernel once per pipeline and JVM: the
    first call (the job's start) fails on a shape, store, layout or summary format the two sides do not share
    (:class:`KernelMissingError` first when the JVM has no kernel at all)."""
    text = JoinPlan.of(spec).to_json()
    plans = _plans(spark.sparkContext._gateway)
    if text not in plans:
        plans[text] = _kernel(spark).plan(text)
    return plans[text]


def unload(spark: SparkSession, root: str, partitions: int) -> None:
    """Close the stores under ``root`` that this JVM holds (the tasks run in the driver in local mode)."""
    _kernel(spark).unload(spark._jsparkSession, root, partitions)


@dataclass(frozen=True)
class StoreTask:
    """Where a batch's stateful task ran (the kernel's ``StorePlacements``): its store (``default`` for the join's,
    as on disk), partition, the executor that ran it, and whether that executor loaded the store from the
    checkpoint's files (it did not have the batch's version open)."""

    store: str
    partition: int
    executor: str
    loaded: bool

    @property
    def name(self) -> str:
        return f"{self.store}/{self.partition}"


def store_tasks(spark: SparkSession, root: str) -> list[StoreTask]:
    """The stateful tasks of the last batch that ran on the stores under ``root`` (the driver's record)."""
    text = java_class(spark, "dev.streamjoin.kernel.StorePlacements").report(root)
    tasks = []
    for line in str(text).splitlines():
        store, partition, executor, loaded = line.split("\t")
        tasks.append(StoreTask(store, int(partition), executor, loaded == "1"))
    return sorted(tasks, key=lambda t: (t.store, t.partition))


def _kernel(spark: SparkSession) -> Any:
    """The kernel's entry class; :class:`KernelMissingError` (terminal) when the driver's JVM lacks it."""
    kernel = java_class(spark, "dev.streamjoin.kernel.Kernel")
    if kernel is None:  # py4j gives a JavaPackage for a class it cannot find
        from streamjoin.core.errors import KernelMissingError

        raise KernelMissingError(str(KERNEL_JAR), "no class dev.streamjoin.kernel.Kernel in the driver")
    return kernel


@cache
def _classes(gateway: Any) -> dict[str, Any]:
    return {}


@cache
def _plans(gateway: Any) -> dict[str, Any]:
    """The JVM's parsed plans by their JSON (a gateway per JVM)."""
    return {}


class _Statics:
    """A JVM class whose static members are each looked up once: py4j asks the JVM at every attribute access
    of a ``JavaClass`` (a call before each call)."""

    def __init__(self, java: JavaClass) -> None:
        self._java = java

    def __getattr__(self, name: str) -> Any:
        member = getattr(self._java, name)
        setattr(self, name, member)  # found in the instance from now on: no __getattr__, no lookup
        return member


@cache
def java_map(gateway: Any, settings: tuple[tuple[str, str], ...]) -> Any:
    """``settings`` as a Java map, made once per JVM (py4j converts a dict with a call per entry)."""
    java_map = gateway.jvm.java.util.HashMap()
    for key, value in settings:
        java_map.put(key, value)
    return java_map


def java_class(spark: SparkSession, name: str) -> Any:
    """The JVM class ``name`` (None if the JVM has no such class), looked up once per JVM, as are its static
    members: each lookup through py4j's ``jvm.a.b.C`` costs a call per dotted part."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    classes = _classes(spark.sparkContext._gateway)
    if name not in classes:
        found = jvm
        for part in name.split("."):
            found = getattr(found, part)
        classes[name] = _Statics(found) if isinstance(found, JavaClass) else None  # py4j: a JavaPackage for no class
    return classes[name]
