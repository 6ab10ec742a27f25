#!/usr/bin/env bash
# Builds the schema registry of the demo and the tests (java/schema-registry: Apicurio Registry's application
# jar augmented by Quarkus's build step) into git-ignored .local/schema-registry/: registry-runner.jar and lib/,
# started by plugins/streamjoin/localdev/schema_registry.py.
# Idempotent: does nothing when the build is newer than the pom and this script (FORCE=1 builds again).
# Maven's local repository (~/.m2) makes a second build work offline.
set -euo pipefail
cd "$(dirname "$0")/.."
pom=java/schema-registry/pom.xml
out=.local/schema-registry
marker=$out/.built
newest=$(find "$pom" "$0" -type f -newer "$marker" 2> /dev/null | head -1 || true)
if [[ "${FORCE:-0}" != 1 && -f "$marker" && -z "$newest" ]]; then
  echo "schema-registry: $out is up to date"
  exit 0
fi
command -v mvn > /dev/null || { echo "mvn not found: install Maven (apt-get install maven)" >&2; exit 1; }
command -v java > /dev/null || { echo "java not found: install a JDK 17 (apt-get install openjdk-17-jdk-headless)" >&2; exit 1; }
started=$SECONDS
if ! nice -n 10 mvn -q -B -f "$pom" package; then
  echo "schema-registry: mvn failed to build $pom (network or Maven Central down for the first resolution? try again, or check ~/.m2)" >&2
  exit 1
fi
# into a temporary folder first: an interrupted run never leaves a half-filled folder behind
rm -rf "$out.tmp" && mkdir -p "$out.tmp"
cp java/schema-registry/target/schema-registry-1-runner.jar "$out.tmp/registry-runner.jar"
cp -r java/schema-registry/target/lib "$out.tmp/lib"
touch "$out.tmp/.built"
rm -rf "$out" && mv "$out.tmp" "$out"
echo "schema-registry: built $out ($(ls "$out/lib" | wc -l) jars in $out/lib) in $((SECONDS - started))s"
