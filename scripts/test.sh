#!/usr/bin/env bash
# The README's test command runs this (through `make test`): every tier, the brokers started by the tests.
# Without arguments the Spark tier (in-process Spark, CPU-bound) runs beside the other tiers (spark-submit,
# Airflow, brokers: mostly waiting), each in its own pytest process with its own test broker; arguments
# run one pytest process with them.
set -euo pipefail
export AIRFLOW_HOME="$STREAMJOIN_HOME/var/test-airflow"
export AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="sqlite:///$AIRFLOW_HOME/airflow.db"
mkdir -p "$AIRFLOW_HOME"
airflow db migrate > "$AIRFLOW_HOME/db-migrate.log" 2>&1 || { tail -30 "$AIRFLOW_HOME/db-migrate.log"; exit 1; }
ruff check .

pytest_run() {
  local status=0
  python -m pytest -p no:cacheprovider -ra --durations=30 "$@" || status=$?
  if [ "$status" -eq 5 ]; then echo "no tests were collected: $*"; return 1; fi
  return "$status"
}

if [ "$#" -gt 0 ]; then
  pytest_run "$@"
  exit
fi

spark_log="$STREAMJOIN_HOME/var/test-spark-tier.log"
spark_port="${STREAMJOIN_TEST_SPARK_TIER_KAFKA_PORT:-19292}"
echo "the Spark tier runs beside the other tiers (its broker on port $spark_port), its log: $spark_log"
STREAMJOIN_TEST_KAFKA_PORT="$spark_port" pytest_run tests/spark > "$spark_log" 2>&1 &
spark_pid=$!
other=0
pytest_run tests --ignore=tests/spark || other=$?
spark=0
wait "$spark_pid" || spark=$?
echo
echo "================================ the Spark tier ================================"
cat "$spark_log"
echo "exit status: the Spark tier $spark, the other tiers $other"
[ "$spark" -eq 0 ] && [ "$other" -eq 0 ]
