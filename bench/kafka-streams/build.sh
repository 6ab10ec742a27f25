#!/usr/bin/env bash
# Builds the Kafka Streams side of bench/bench_join.py into git-ignored .local/kafka-streams-bench/
# (one shaded jar, ~95 MB; Maven resolves kafka-streams 4.1.1 and slf4j-simple from Maven Central).
# bench/bench_join.py runs this when the jar is missing; FORCE=1 builds again.
set -euo pipefail
cd "$(dirname "$0")/../.."
jar=.local/kafka-streams-bench/kafka-streams-bench.jar
# up to date: the jar is newer than the pom and every source file
if [[ "${FORCE:-0}" != 1 && -f "$jar" && "$jar" -nt bench/kafka-streams/pom.xml
      && -z "$(find bench/kafka-streams/src -newer "$jar" -print -quit)" ]]; then
  echo "kafka-streams-bench: $jar is up to date"
  exit 0
fi
command -v mvn > /dev/null || { echo "mvn not found: install Maven (apt-get install maven)" >&2; exit 1; }
started=$SECONDS
mvn -q -B -f bench/kafka-streams/pom.xml package
echo "kafka-streams-bench: built $jar in $((SECONDS - started))s"
