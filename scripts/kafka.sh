#!/usr/bin/env bash
# The local single-node KRaft broker: scripts/kafka.sh start|stop|status [--port N] [--home DIR]
# (defaults: port $KAFKA_PORT or 19092, home .local/kafka). Prints the bootstrap address.
set -euo pipefail
cd "$(dirname "$0")/.."
python=.venv/bin/python
[[ -x $python ]] || { echo "no virtualenv at $PWD/.venv: run make setup" >&2; exit 1; }
[[ $# -ge 1 ]] || { echo "usage: $0 start|stop|status [--port N] [--home DIR]" >&2; exit 2; }
command=$1; shift
[[ -d .local/jars/kafka ]] || bash scripts/fetch-jars.sh
PYTHONPATH="$PWD/plugins${PYTHONPATH:+:$PYTHONPATH}" exec "$python" -m streamjoin.localdev.kafka_broker "$command" \
  --port "${KAFKA_PORT:-19092}" "$@"
