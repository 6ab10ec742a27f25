"""Own a long-running streaming join from Airflow: launch it detached, supervise it, stop/redeploy it.

The driver (spark-submit, client mode) runs in its own session, detached from the task; its pid and log
are recorded in ``<checkpoint>/driver.json``. Liveness is the driver process (local and client mode:
the Airflow worker must be the machine that launched it); freshness and lag come from the job's
``status.json`` heartbeat and the input topics' end offsets.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.sdk import BaseOperator

from streamjoin.core.job_files import PipelineFiles
from streamjoin.core.plans import checkpoint_dir, connector_jars, package_zip, plan_submit, resolve, secrets_dir
from streamjoin.core.spec import PipelineSpec, load_spec
from streamjoin.core.supervision import Health, Policy, State, assess, lag, lag_alert_due, may_restart
from streamjoin.kafka.client_config import KafkaClientConfig, KafkaTarget


class StreamJobFailure(Exception):
    """The job cannot be kept running (crash loop) or lags beyond its grace period."""


def pipeline_files(spec: PipelineSpec) -> PipelineFiles:
    return PipelineFiles(checkpoint_dir(spec))


def launch_job(
    spec_path: str, spec: PipelineSpec, kafka: KafkaClientConfig, spark_conn_id: str, log: Any
) -> dict[str, Any]:
    """spark-submit through the Spark provider's hook, detached; returns the driver record. The job gets the
    Kafka settings in a private file it deletes once read (never on its command line)."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    files = pipeline_files(spec)
    python = os.environ.get("STREAMJOIN_EXECUTOR_PYTHON") or sys.executable
    plan = plan_submit(
        spec, spec_path, kafka.job_arguments(secrets_dir()), connector_jars(), python=python,
        driver_python=sys.executable, py_files=[str(package_zip())],
    )  # fmt: skip
    hook = SparkSubmitHook(
        conf=plan.conf, conn_id=spark_conn_id, jars=",".join(plan.jars), py_files=",".join(plan.py_files) or None,
        name=plan.name, application_args=plan.application_args,
    )  # fmt: skip
    command = hook._build_spark_submit_command(plan.application)
    files.clear_stop()
    files.checkpoint.mkdir(parents=True, exist_ok=True)
    log_path = files.checkpoint / "driver.log"
    with open(log_path, "ab") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        )  # fmt: skip
    files.save_supervisor({**files.supervisor(), "stopped": False})
    record = files.record_driver(process.pid, os.getpgid(process.pid), str(log_path), plan.name)
    log.info("launched %s detached: pid %s, log %s", plan.name, process.pid, log_path)
    return record


def stop_job(spec: PipelineSpec, log: Any, timeout: float = 60.0) -> bool:
    """Graceful stop: the stop marker (the job stops after its current batch), then SIGTERM, then SIGKILL
    of the driver's process group. True when a driver was running."""
    files = pipeline_files(spec)
    driver = files.driver()
    if not driver or not files.driver_alive():
        log.info("%s: no driver running", spec.name)
        return False
    files.request_stop()
    deadline = time.monotonic() + timeout
    while files.driver_alive() and time.monotonic() < deadline:
        time.sleep(0.5)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not files.driver_alive():
            break
        log.warning("%s did not stop in %.0fs: sending %s", spec.name, timeout, sig.name)
        try:
            os.killpg(int(driver["pgid"]), sig)
        except ProcessLookupError:
            break
        time.sleep(5)
    files.clear_stop()
    files.save_supervisor({**files.supervisor(), "stopped": True})
    log.info("%s stopped", spec.name)
    return True


def assess_job(spec: PipelineSpec, kafka: KafkaTarget, policy: Policy, now: float | None = None) -> Health:
    from streamjoin.kafka.clients import end_offsets

    files = pipeline_files(spec)
    status = files.status()
    latest = {t: end_offsets(kafka, t) for t in sorted({i.topic for i in spec.inputs.values()})}
    driver = files.driver() or {}
    stopped = files.stop_requested() or bool(files.supervisor().get("stopped"))
    return assess(
        alive=files.driver_alive(), stopped=stopped, status=status,
        started_at=driver.get("started_at"), lag_by_topic=lag(latest, (status or {}).get("end_offsets", {})),
        now=time.time() if now is None else now, policy=policy,
    )  # fmt: skip


class _PipelineOperator(BaseOperator):
    template_fields: Sequence[str] = ("spec_path", "kafka_conn_id", "spark_conn_id")

    def __init__(
        self, *, spec_path: str, kafka_conn_id: str = "streamjoin_kafka_default", spark_conn_id: str = "spark_default",
        **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(**kwargs)
        self.spec_path, self.kafka_conn_id, self.spark_conn_id = spec_path, kafka_conn_id, spark_conn_id

    def _setup(self, *, check: bool = True) -> tuple[PipelineSpec, KafkaClientConfig]:
        """The spec and the Kafka connection, checked (a wrong password fails here) unless ``check`` is off."""
        from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook

        hook = StreamJoinKafkaHook(self.kafka_conn_id)
        return load_spec(resolve(self.spec_path)), hook.checked_config() if check else hook.kafka_config()


class SuperviseStreamJoinOperator(_PipelineOperator):
    """Check the pipeline's job every ``poll`` seconds for ``watch`` seconds (0: once): start it when no
    driver ran yet, restart a dead one from its checkpoint within the restart budget, fail (and so alert
    through ``on_failure_callback``) on a crash loop or on lag above the threshold beyond the grace period.
    A job stopped on purpose is left stopped. The job's progress lines appear in this task's log."""

    def __init__(self, *, policy: Policy | None = None, watch: float = 0.0, poll: float = 5.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.policy, self.watch, self.poll = policy or Policy(), watch, poll
        self._log_pos = 0

    def execute(self, context: Any) -> dict[str, Any]:
        spec, kafka = self._setup()
        files = pipeline_files(spec)
        deadline = time.monotonic() + self.watch
        while True:
            health = self.check_once(spec, kafka, files)
            if time.monotonic() >= deadline:
                break
            time.sleep(self.poll)
        return {"pipeline": spec.name, "state": health.state.value, "reason": health.reason, "lag": health.lag,
                "restarts": len(files.supervisor()["restarts"])}  # fmt: skip

    def check_once(self, spec: PipelineSpec, kafka: KafkaClientConfig, files: PipelineFiles) -> Health:
        now = time.time()
        health = assess_job(spec, kafka, self.policy, now)
        self._tail_progress(files)
        record = files.supervisor()
        self.log.info("%s: %s (%s), lag %s", spec.name, health.state.value, health.reason, health.lag)
        if health.state is State.DEAD:
            if files.driver() is not None and not may_restart(record["restarts"], now, self.policy):
                record["last"] = {"state": "failed", "reason": "crash loop", "at": now}
                files.save_supervisor(record)
                raise StreamJobFailure(
                    f"{spec.name}: died {len(record['restarts'])} times within {self.policy.window:.0f}s "
                    f"(limit {self.policy.max_restarts}); not restarting"
                )
            if files.driver() is not None:
                record["restarts"] = [*record["restarts"], now]
                self.log.warning("%s: restarting from checkpoint %s", spec.name, files.checkpoint)
            launch_job(self.spec_path, spec, kafka, self.spark_conn_id, self.log)
            self._log_pos = 0
        if health.state is State.LAGGING:
            record["lagging_since"] = record.get("lagging_since") or now
        else:
            record["lagging_since"] = None
        record["last"] = {"state": health.state.value, "reason": health.reason, "lag": health.lag, "at": now}
        files.save_supervisor(record)
        if lag_alert_due(record["lagging_since"], now, self.policy):
            raise StreamJobFailure(f"{spec.name}: lag {health.total_lag} above {self.policy.lag_threshold} "
                                   f"for {now - record['lagging_since']:.0f}s")  # fmt: skip
        return health

    def _tail_progress(self, files: PipelineFiles) -> None:
        driver = files.driver() or {}
        path = Path(driver.get("log", files.checkpoint / "driver.log"))
        try:
            with open(path, "rb") as handle:
                handle.seek(self._log_pos)
                chunk = handle.read()
                self._log_pos = handle.tell()
        except OSError:
            return
        for line in chunk.decode(errors="replace").splitlines():
            if line.startswith("streamjoin ") or "Exception" in line:
                self.log.info("job: %s", line[:500])


class StopStreamJoinOperator(_PipelineOperator):
    """Stop the pipeline's job gracefully; with ``redeploy`` start it again from the same checkpoint
    (the new code/spec of this deployment). ``redeploy`` is templated (native rendering: a bool)."""

    template_fields: Sequence[str] = (*_PipelineOperator.template_fields, "redeploy")

    def __init__(self, *, redeploy: bool | str = False, timeout: float = 60.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.redeploy, self.timeout = redeploy, timeout

    def execute(self, context: Any) -> dict[str, Any]:
        redeploy = self.redeploy if isinstance(self.redeploy, bool) else str(self.redeploy).lower() == "true"
        spec, kafka = self._setup(check=redeploy)  # stopping needs no Kafka
        was_running = stop_job(spec, self.log, self.timeout)
        driver = launch_job(self.spec_path, spec, kafka, self.spark_conn_id, self.log) if redeploy else None
        return {"pipeline": spec.name, "was_running": was_running, "driver": driver}
