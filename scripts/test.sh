#!/usr/bin/env bash
# The README's test command runs this (through `make test`): every tier, the broker started by the tests.
#
# Without arguments the suite runs as three pytest sessions side by side (below); one test broker serves
# them all (started here, stopped at the end). With arguments, one session runs them
# (`scripts/test.sh tests/unit -k x`).
set -euo pipefail
export AIRFLOW_HOME="$STREAMJOIN_HOME/var/test-airflow"
export AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="sqlite:///$AIRFLOW_HOME/airflow.db"
mkdir -p "$AIRFLOW_HOME"
airflow db migrate > "$AIRFLOW_HOME/db-migrate.log" 2>&1 || { tail -30 "$AIRFLOW_HOME/db-migrate.log"; exit 1; }
ruff check .
# the tests' JVMs (Spark sessions, spark-submit drivers, brokers, HDFS) live seconds to minutes: C1 alone
# compiles what they run for about half the CPU of C1 + C2 (measured: 72 s against 129 s for the replay CLI
# and two-driver tests), and the suite is CPU-bound on two cores; a setting of the caller's own wins
export JAVA_TOOL_OPTIONS="${JAVA_TOOL_OPTIONS:--XX:TieredStopAtLevel=1}"
PYTEST=(python -m pytest -p no:cacheprovider -ra --tb=short)

if [ "$#" -gt 0 ]; then
  status=0
  "${PYTEST[@]}" --durations=30 "$@" || status=$?
  if [ "$status" -eq 5 ]; then echo "no tests were collected"; exit 1; fi
  exit "$status"
fi

# three sessions side by side (the first prints as it runs, the others when it is done): Airflow's processes
# and spark-submit jobs mostly wait, so two cores serve three sessions; each session its own Airflow DB
# (SQLite takes one writer at a time), the first the migrated one, the others copies of it
# (2026-12-02, quiet: 26.3, 29.9 and 32.8 minutes, before test_avro_topics moved to the first and the batch-cut and
# job-failure files to the second); each session's timings in var/test-sessions/<name>.xml
FIRST=(tests/e2e tests/cluster tests/backfill/test_reprocess_dag.py tests/backfill/test_hdfs_checkpoints.py
       tests/spark/test_two_drivers.py tests/spark/test_replay_cli.py tests/backfill/test_reprocess_spark.py
       tests/spark/test_avro_topics.py)
SECOND=(tests/dags tests/quality tests/security tests/oracle tests/integration tests/deploy tests/spark/test_memory_flat.py
        tests/spark/test_stream_job_backlog.py tests/spark/test_repartition_job.py tests/spark/test_batch_cuts.py
        tests/spark/test_job_failures.py)
THIRD=(tests/unit tests/spark tests/backfill)
third_ignore=()
for path in "${FIRST[@]}" "${SECOND[@]}"; do
  case "$path" in tests/unit/*|tests/spark/*|tests/backfill/*) third_ignore+=("--ignore=$path");; esac
done

port="${STREAMJOIN_TEST_KAFKA_PORT:-19092}"
broker_home="$STREAMJOIN_HOME/.local/test-kafka"
[ "$port" = 19092 ] || broker_home="$broker_home-$port"
broker=(python -m streamjoin.localdev.kafka_broker --home "$broker_home" --port "$port")
started_broker=0
if ! "${broker[@]}" status > /dev/null 2>&1; then
  if "${broker[@]}" start; then started_broker=1; else echo "no test broker started here: the sessions find or start one"; fi
fi

logs="$STREAMJOIN_HOME/var/test-sessions"
mkdir -p "$logs"
# session NAME PATHS...: pytest over PATHS in the background, its own copy of the Airflow DB, output to a log
session() {
  local name="$1" home="$STREAMJOIN_HOME/var/test-airflow-$1"
  shift
  rm -rf "$home" && mkdir -p "$home" && cp "$AIRFLOW_HOME/airflow.db" "$home/"
  AIRFLOW_HOME="$home" AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="sqlite:///$home/airflow.db" \
    "${PYTEST[@]}" --durations=20 --junitxml="$logs/$name.xml" "$@" > "$logs/$name.log" 2>&1
}
session second "${SECOND[@]}" &
second_pid=$!
session third "${THIRD[@]}" "${third_ignore[@]}" &
third_pid=$!
echo "== ${FIRST[*]} (the other sessions' output follows when this one is done)"
statuses=()
"${PYTEST[@]}" --durations=20 --junitxml="$logs/first.xml" "${FIRST[@]}" || statuses+=("first:$?")
wait "$second_pid" || statuses+=("second:$?")
wait "$third_pid" || statuses+=("third:$?")
for name in second third; do
  echo "== session $name: $logs/$name.log"
  cat "$logs/$name.log"
done
if [ "$started_broker" = 1 ]; then "${broker[@]}" stop || true; fi
if [ "${#statuses[@]}" -eq 0 ]; then echo "== all three sessions passed"; exit 0; fi
echo "== failed sessions (exit status 5: no tests collected): ${statuses[*]}"
exit 1
