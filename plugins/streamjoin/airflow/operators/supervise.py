"""The one owner of a pipeline's streaming job: start it, watch it from the triggerer, restart or alert;
and the stop/redeploy request.

The driver (spark-submit, client mode) runs detached in its own session; its pid and log are in
``<checkpoint>/driver.json`` (:mod:`streamjoin.core.job_files`). Between checks the owning task is
deferred to :class:`~streamjoin.airflow.triggers.StreamJobTrigger` and holds no worker slot. Liveness is
the driver process (the triggerer must run on the machine that launched it, as the worker did), freshness
and lag come from the job's ``status.json`` and the input topics' end offsets.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from streamjoin.airflow.lifecycle import driver_alive, stop_driver, submit
from streamjoin.airflow.lineage import SpecLineageMixin
from streamjoin.core.errors import KafkaAuthenticationError, KafkaUnavailableError
from streamjoin.core.job_files import (
    Assessment,
    DriverRecord,
    JobFailure,
    PipelineFiles,
    SupervisorRecord,
    WatchEvent,
)
from streamjoin.core.plans import checkpoint_dir, connector_jars, package_zip, plan_submit, resolve, secrets_dir
from streamjoin.core.spec import PipelineSpec, load_spec
from streamjoin.core.supervision import Event, Health, Policy, State, lag_alert_due, may_restart, observe, restart_delay
from streamjoin.kafka.client_config import KafkaClientConfig


class StreamJobFailure(AirflowFailException):
    """The job cannot be kept running (a terminal error, a crash loop) or lags beyond its grace period: alert,
    no retry."""


class JobHung(Exception):
    """What the owner's alert says when it stopped and restarted a hung driver (not raised: the task goes on)."""

    alert_event = "streamjoin.job_hung"


def pipeline_files(spec: PipelineSpec) -> PipelineFiles:
    return PipelineFiles(checkpoint_dir(spec))


def launch_job(
    spec_path: str, spec: PipelineSpec, kafka: KafkaClientConfig, spark_conn_id: str, log: Any
) -> DriverRecord:
    """Start the job detached on the Spark connection's cluster manager (:mod:`streamjoin.airflow.lifecycle`:
    a process here in client mode, a driver on the cluster in cluster mode); returns the driver record. The job
    gets the Kafka settings in a private file it deletes once read (never on its command line)."""
    files = pipeline_files(spec)
    files.clear_stop()  # a stop marker left over would stop the new driver after its first batch
    plan = plan_submit(spec, spec_path, kafka.job_arguments(secrets_dir()), connector_jars(),
                       py_files=[str(package_zip())])  # fmt: skip
    submit(files, plan, spark_conn_id, log)
    driver = files.driver()
    assert driver is not None
    return driver


def _pid(files: PipelineFiles) -> int | None:
    driver = files.driver()
    return driver.pid if driver else None


def _latest(spec: PipelineSpec, kafka: KafkaClientConfig) -> dict[str, dict[int, int]]:
    from streamjoin.kafka.clients import end_offsets

    return {t: end_offsets(kafka, t) for t in _join_topics(spec)}


def _join_topics(spec: PipelineSpec) -> list[str]:
    """The topics the join reads, whose offsets its status reports (a repartitioned input: its internal topic)."""
    from streamjoin.core.repartition import join_view

    return sorted({i.topic for i in join_view(spec).inputs.values()})


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


class SuperviseStreamJoinOperator(SpecLineageMixin, _PipelineOperator):
    """Own the pipeline's streaming job: start it unless it runs (or was stopped on purpose, or given up
    after a crash loop), then watch it for ``watch`` seconds, deferred to :class:`StreamJobTrigger`: restart
    a dead driver from its checkpoint within the restart budget (with exponential backoff), start it again
    on a redeploy request, stop and restart a hung driver (alerting, the task goes on), and fail (alerting
    through ``on_failure_callback``) on a terminal error the job recorded, on a crash loop or on lag above the
    threshold beyond the grace period. ``watch=0``: one check, no deferral (returns the job's state).

    :param policy: thresholds and restart budget
    :param watch: seconds per deferral; the task succeeds when a watch ends with nothing to do
    :param poll: seconds between the trigger's checks
    """

    def __init__(self, *, policy: Policy | None = None, watch: float = 0.0, poll: float = 10.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.policy, self.watch, self.poll = policy or Policy(), watch, poll

    def execute(self, context: Any) -> dict[str, Any]:
        spec, kafka = self._setup()
        files = pipeline_files(spec)
        if driver_alive(files):
            driver = files.driver()
            where = (driver.driver_id or f"pid {driver.pid}") if driver else "?"
            self.log.info("%s runs (%s): watching it", spec.name, where)
        elif files.intent() == "redeploy" or not self._meant_down(files):
            restart = files.driver() is not None and files.intent() != "redeploy"
            if restart:  # it died while no owner watched: of an error a restart cannot fix?
                self._give_up_if_terminal(spec, files, files.supervisor(), files.run_failure())
            self._start(spec, kafka, files, restart=restart)
        return self._watch(spec, kafka, files)

    def resume(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        """The trigger fired: act on its event, then watch again (or end)."""
        spec, kafka = self._setup(check=False)
        files = pipeline_files(spec)
        watched = WatchEvent.from_json(event)
        kind = Event(watched.event)
        self.log.info("%s: %s (%s), lag %s", spec.name, kind.value, watched.reason, watched.lag)
        record = files.supervisor()
        record.last, record.lagging_since = watched.assessment(), watched.lagging_since
        files.save_supervisor(record)
        if kind is Event.LAGGING:
            record.lagging_since = time.time()  # the next alert comes after another grace period
            files.save_supervisor(record)
            raise StreamJobFailure(f"{spec.name}: lag {watched.total_lag} above "
                                   f"{self.policy.lag_threshold} for {self.policy.lag_grace:.0f}s or more")  # fmt: skip
        if kind is Event.HUNG:
            waiting = watched.total_lag
            self.log.warning("%s hung (%s) while %d records wait: stopping it", spec.name, watched.reason, waiting)
            stop_driver(files, self.log, timeout=30.0)
            driver = files.driver()
            self._alert(context, JobHung(
                f"{spec.name}: the driver made no progress ({watched.reason}) while {waiting} input records "
                f"waited; it was stopped and is restarted from its checkpoint (driver log of the hung run: "
                f"{driver.log if driver else None})"
            ))  # fmt: skip
            kafka = self._setup()[1]
            self._start(spec, kafka, files, restart=True)
            return self._watch(spec, kafka, files)
        if kind is Event.DEAD and self._backing_off(spec, files, record):
            return self._watch(spec, self._setup(check=False)[1], files)
        if kind in (Event.DEAD, Event.REDEPLOY):
            kafka = self._setup()[1]  # checked: a changed password fails here, not in the driver
            self._start(spec, kafka, files, restart=kind is Event.DEAD)
            return self._watch(spec, kafka, files)
        return self._report(spec, files, None, kind.value)

    def _backing_off(self, spec: PipelineSpec, files: PipelineFiles, record: SupervisorRecord) -> bool:
        """The driver died: give up at once on a terminal failure (the task fails and alerts, naming it);
        after a transient one, wait out the backoff before the restart (True: still waiting)."""
        failure = files.run_failure()
        if (failure is None or failure.transient) and record.restart_after is None:
            refused = self._refused()  # a password revoked under a running job: to it, the broker went away
            if refused is not None:
                cause = failure.describe() if failure is not None else "no error recorded"
                failure = replace(refused, message=f"{refused.message} (the job itself died of: {cause})")
        self._give_up_if_terminal(spec, files, record, failure)
        now = time.time()
        due = record.restart_after
        if not may_restart(record.restarts, now, self.policy):
            return False  # a crash loop: no point waiting before giving up
        if due is None:
            wait = restart_delay(record.restarts, now, self.policy)
            if wait <= 0:
                return False
            record.restart_after = due = now + wait
            files.save_supervisor(record)
            cause = failure.describe() if failure is not None else "no error recorded (killed?)"
            self.log.warning("%s died (%s): restarting in %.0fs (backoff)", spec.name, cause, wait)
        if now < due:
            return True
        record.restart_after = None
        files.save_supervisor(record)
        return False

    def _give_up_if_terminal(
        self, spec: PipelineSpec, files: PipelineFiles, record: SupervisorRecord, failure: JobFailure | None
    ) -> None:
        """A terminal failure: give up (no restart until a redeploy) and fail the task, alerting, naming it."""
        if failure is None or failure.transient:
            return
        driver = files.driver()
        log = driver.log if driver and driver.log else files.checkpoint / "driver.log"
        now = time.time()
        record.gave_up_at, record.restart_after = now, None
        record.last = Assessment("failed", failure.describe(), {}, now)
        files.save_supervisor(record)
        raise StreamJobFailure(
            f"{spec.name}: the job stopped on an error a restart cannot fix: {failure.describe()}. Not "
            f"restarting: fix the cause, then redeploy (DAG streamjoin_stop_redeploy with redeploy); "
            f"driver log {log}"
        )

    def _refused(self) -> JobFailure | None:
        """The Kafka connection refused now (a revoked password, an untrusted certificate) as a terminal failure,
        so a job that died of it does not wait out a backoff (or a crash loop's verdict) first; None when the
        cluster accepts it or does not answer (that is transient: the restart decides)."""
        from streamjoin.airflow.hooks.kafka_admin import StreamJoinKafkaHook

        try:
            StreamJoinKafkaHook(self.kafka_conn_id).checked_config(timeout=10)
        except KafkaAuthenticationError as exc:
            return JobFailure.of(exc)
        except KafkaUnavailableError:
            return None
        return None

    def _alert(self, context: Any, error: Exception) -> None:
        """Alert the pipeline's destinations without failing the task (the owner acted and goes on)."""
        from streamjoin.airflow.notifiers import PipelineAlertNotifier

        PipelineAlertNotifier(spec_path=self.spec_path).notify({**context, "exception": error})

    def _meant_down(self, files: PipelineFiles) -> bool:
        return files.stopped_on_purpose() or files.supervisor().gave_up_at is not None

    def _start(self, spec: PipelineSpec, kafka: KafkaClientConfig, files: PipelineFiles, *, restart: bool) -> None:
        """Launch the driver; a restart counts against the budget, and past it the owner gives up (alerts)."""
        now = time.time()
        record = files.supervisor()
        record.policy = self.policy.to_json()
        if restart:
            if not may_restart(record.restarts, now, self.policy):
                record.gave_up_at = now
                record.last = Assessment("failed", "crash loop", {}, now)
                files.save_supervisor(record)
                raise StreamJobFailure(
                    f"{spec.name}: died {len(record.restarts) + 1} times within {self.policy.window:.0f}s "
                    f"(restart limit {self.policy.max_restarts}); not restarting until a redeploy"
                )
            record.restarts = [*record.restarts, now]
            self.log.warning("%s: restarting from checkpoint %s", spec.name, files.checkpoint)
        record.gave_up_at = None
        files.set_intent("run")
        launch_job(self.spec_path, spec, kafka, self.spark_conn_id, self.log)
        files.save_supervisor(record)

    def _watch(self, spec: PipelineSpec, kafka: KafkaClientConfig, files: PipelineFiles) -> dict[str, Any]:
        from streamjoin.airflow.triggers import StreamJobTrigger, policy_kwargs

        record = files.supervisor()
        record.policy = self.policy.to_json()  # the status page judges the job by it
        if self.watch <= 0:
            now = time.time()
            health = observe(files, _latest(spec, kafka), now, self.policy, alive=driver_alive(files))
            record.lagging_since = (record.lagging_since or now) if health.state is State.LAGGING else None
            record.last = Assessment(health.state.value, health.reason, dict(health.lag), now)
            files.save_supervisor(record)
            if lag_alert_due(record.lagging_since, now, self.policy):
                raise StreamJobFailure(f"{spec.name}: lag {health.total_lag} above {self.policy.lag_threshold}")
            return self._report(spec, files, health, health.state.value)
        trigger = StreamJobTrigger(
            checkpoint=str(files.checkpoint), topics=_join_topics(spec),
            kafka_conn_id=self.kafka_conn_id, policy=policy_kwargs(self.policy), watch_until=time.time() + self.watch,
            poll=self.poll, waiting=not driver_alive(files) and self._meant_down(files),
            lagging_since=record.lagging_since, restart_after=record.restart_after,
        )  # fmt: skip
        files.save_supervisor(record)
        self.defer(trigger=trigger, method_name="resume")

    def _report(self, spec: PipelineSpec, files: PipelineFiles, health: Health | None, state: str) -> dict[str, Any]:
        record = files.supervisor()
        last = health or record.last
        return {"pipeline": spec.name, "state": state, "reason": last.reason if last else "",
                "lag": dict(last.lag) if last else {}, "restarts": len(record.restarts),
                "driver_pid": _pid(files), "driver_id": (files.driver() or DriverRecord()).driver_id,
                "alive": driver_alive(files)}  # fmt: skip

    def on_kill(self) -> None:
        """Killing the owner stops the job it owns (while deferred, the trigger's ``on_kill`` does)."""
        stop_driver(pipeline_files(load_spec(resolve(self.spec_path))), self.log)


class StopStreamJoinOperator(_PipelineOperator):
    """Stop the pipeline's job gracefully (after its current batch; SIGTERM/SIGKILL after ``timeout``). With
    ``redeploy`` the owner (the pipeline's DAG) starts it again from the same checkpoint with the current
    code and spec; without, it stays stopped until a redeploy. ``redeploy`` is templated (a bool)."""

    template_fields: Sequence[str] = (*_PipelineOperator.template_fields, "redeploy")

    def __init__(self, *, redeploy: bool | str = False, timeout: float = 60.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.redeploy, self.timeout = redeploy, timeout

    def execute(self, context: Any) -> dict[str, Any]:
        redeploy = self.redeploy if isinstance(self.redeploy, bool) else str(self.redeploy).lower() == "true"
        spec = load_spec(resolve(self.spec_path))
        files = pipeline_files(spec)
        files.set_intent("redeploy" if redeploy else "stop")  # first: the owner must not take the stop for a death
        was_running = stop_driver(files, self.log, self.timeout)
        then = f"the owner (DAG streamjoin_{spec.name}) starts it again" if redeploy else "it stays stopped"
        self.log.info("%s %s; %s", spec.name, "stopped" if was_running else "was not running", then)
        return {"pipeline": spec.name, "was_running": was_running, "intent": files.intent(),
                "log": str(Path(files.checkpoint) / "driver.log")}  # fmt: skip
