#!/usr/bin/env bash
# Builds the Kafka Streams oracle of the tests (java/ks-oracle, run by tests/kafka_streams_oracle.py):
# resolves its Maven dependencies (kafka-streams and kafka-streams-test-utils 4.1.1 from Maven Central) into
# git-ignored .local/jars/ks-oracle/ and compiles its sources into .local/ks-oracle/classes/.
# Idempotent: does nothing when the classes are newer than the pom and every source (FORCE=1 builds again).
# Maven's local repository (~/.m2) makes a second resolution work offline.
set -euo pipefail
cd "$(dirname "$0")/.."
pom=java/ks-oracle/pom.xml
src=java/ks-oracle/src/main/java
jars=.local/jars/ks-oracle
out=.local/ks-oracle
marker=$out/.built
newest=$(find "$pom" "$src" "$0" -type f -newer "$marker" 2> /dev/null | head -1 || true)
if [[ "${FORCE:-0}" != 1 && -f "$marker" && -z "$newest" ]]; then
  echo "ks-oracle: $out is up to date"
  exit 0
fi
command -v mvn > /dev/null || { echo "mvn not found: install Maven (apt-get install maven)" >&2; exit 1; }
command -v javac > /dev/null || { echo "javac not found: install a JDK 17 (apt-get install openjdk-17-jdk-headless)" >&2; exit 1; }
started=$SECONDS
if [[ "${FORCE:-0}" == 1 || ! -f "$jars/.resolved" || "$pom" -nt "$jars/.resolved" ]]; then
  # into a temporary folder first: an interrupted run never leaves a half-filled folder behind
  rm -rf "$jars.tmp" && mkdir -p "$jars.tmp"
  if ! mvn -q -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$PWD/$jars.tmp" -DincludeScope=runtime; then
    rm -rf "$jars.tmp"
    echo "ks-oracle: mvn failed to resolve $pom (network or Maven Central down? try again, or check ~/.m2)" >&2
    exit 1
  fi
  touch "$jars.tmp/.resolved"
  rm -rf "$jars" && mv "$jars.tmp" "$jars"
fi
rm -rf "$out/classes.tmp" && mkdir -p "$out/classes.tmp"
find "$src" -name '*.java' -print0 | xargs -0 javac --release 17 -nowarn -d "$out/classes.tmp" -cp "$jars/*"
rm -rf "$out/classes" && mv "$out/classes.tmp" "$out/classes"
touch "$marker"
echo "ks-oracle: built $out/classes ($(ls "$jars" | wc -l) jars in $jars) in $((SECONDS - started))s"
