# Environment shared by the demo, the UI and the tests. Source it from the project root.
export STREAMJOIN_HOME="${STREAMJOIN_HOME:-$PWD}"
export PATH="$STREAMJOIN_HOME/.venv/bin:$PATH"
export SPARK_LOCAL_IP=127.0.0.1
export PYSPARK_PYTHON="$STREAMJOIN_HOME/.venv/bin/python"
export KAFKA_PORT="${KAFKA_PORT:-19092}"
export AIRFLOW_HOME="${AIRFLOW_HOME:-$STREAMJOIN_HOME/var/airflow}"
export AIRFLOW__CORE__DAGS_FOLDER="$STREAMJOIN_HOME/dags"
export AIRFLOW__CORE__PLUGINS_FOLDER="$STREAMJOIN_HOME/plugins"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
# the dev UI (`make ui`) answers on this machine only unless asked otherwise
export AIRFLOW__API__HOST="${AIRFLOW__API__HOST:-127.0.0.1}"
# links in alerts (task logs) use Airflow's configured base URL: the address the UI answers on
export AIRFLOW__API__BASE_URL="${AIRFLOW__API__BASE_URL:-http://${AIRFLOW__API__HOST}:8080}"
export AIRFLOW__DATABASE__SQL_ALCHEMY_CONN="sqlite:///$AIRFLOW_HOME/airflow.db"
export AIRFLOW_CONN_STREAMJOIN_KAFKA_DEFAULT="{\"conn_type\": \"streamjoin_kafka\", \"host\": \"127.0.0.1\", \"port\": $KAFKA_PORT}"
# the local schema registry (`make registry-start`, streamjoin.localdev.schema_registry) for Avro and Protobuf topics
export SCHEMA_REGISTRY_PORT="${SCHEMA_REGISTRY_PORT:-18081}"
export AIRFLOW_CONN_SCHEMA_REGISTRY_DEFAULT="${AIRFLOW_CONN_SCHEMA_REGISTRY_DEFAULT:-{\"conn_type\": \"http\", \"host\": \"127.0.0.1\", \"port\": $SCHEMA_REGISTRY_PORT, \"schema\": \"apis/ccompat/v6\"}}"
export AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "local[2]"}'
# where alerts go by default (include/alerts.yaml): a receiver on loopback, `python -m streamjoin.localdev.alert_sink`
export STREAMJOIN_ALERT_SINK_PORT="${STREAMJOIN_ALERT_SINK_PORT:-18461}"
export AIRFLOW_CONN_STREAMJOIN_ALERTS_WEBHOOK="${AIRFLOW_CONN_STREAMJOIN_ALERTS_WEBHOOK:-{\"conn_type\": \"http\", \"host\": \"127.0.0.1\", \"port\": $STREAMJOIN_ALERT_SINK_PORT, \"schema\": \"http\", \"extra\": {\"endpoint\": \"/alerts\"}}}"
