#!/usr/bin/env bash
# The README's test command runs this (through `make test`): every tier, the broker started by the tests.
set -euo pipefail
export AIRFLOW_HOME="$STREAMJOIN_HOME/var/test-airflow"
export AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="sqlite:///$AIRFLOW_HOME/airflow.db"
mkdir -p "$AIRFLOW_HOME"
airflow db migrate > "$AIRFLOW_HOME/db-migrate.log" 2>&1 || { tail -30 "$AIRFLOW_HOME/db-migrate.log"; exit 1; }
ruff check .
status=0
python -m pytest -p no:cacheprovider -ra --tb=short --durations=60 "$@" || status=$?
if [ "$status" -eq 5 ]; then echo "no tests were collected"; exit 1; fi
exit "$status"
