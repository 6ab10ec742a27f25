#!/usr/bin/env bash
# Runs the seed demo DAG for real (airflow dags test) and prints what a user wants to see.
set -euo pipefail
started=$(date +%s)
mkdir -p "$AIRFLOW_HOME"
airflow db migrate > "$AIRFLOW_HOME/db-migrate.log" 2>&1 || { tail -30 "$AIRFLOW_HOME/db-migrate.log"; exit 1; }
dag=streamjoin_clicks_per_region_demo
log="$STREAMJOIN_HOME/var/demo-run.log"
# the default alert webhook (include/alerts.yaml) points at this loopback receiver
python -m streamjoin.localdev.alert_sink > "$STREAMJOIN_HOME/var/alert-sink.log" 2>&1 &
sink=$!
trap 'kill $sink 2>/dev/null || true' EXIT
echo "running DAG $dag (log: $log)"
if ! airflow dags test "$dag" > "$log" 2>&1; then
  echo "DAG $dag failed; last lines of $log:"; tail -40 "$log"; exit 1
fi
python - <<'PY'
import json, os
from pathlib import Path
from streamjoin.demo.report import final_report
print(final_report(Path(os.environ["STREAMJOIN_HOME"])))
PY
echo "demo took $(( $(date +%s) - started ))s"
