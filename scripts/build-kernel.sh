#!/usr/bin/env bash
# Builds the engine kernel (java/kernel, a Maven module; Spark itself comes from pyspark's jars at run time)
# into git-ignored .local/jars/kernel/streamjoin-kernel.jar, which connector_jars() puts on spark.jars.
# The Makefile reruns it when a source changes; written to a temporary name first, then renamed.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v mvn > /dev/null || { echo "mvn not found: install Maven (apt-get install maven)" >&2; exit 1; }
started=$SECONDS
if ! mvn -q -B -f java/kernel/pom.xml package; then
  echo "kernel: mvn failed to build java/kernel (network for the first resolution, or a compile error above)" >&2
  exit 1
fi
mkdir -p .local/jars/kernel
cp java/kernel/target/streamjoin-kernel.jar .local/jars/kernel/.streamjoin-kernel.jar.tmp
mv .local/jars/kernel/.streamjoin-kernel.jar.tmp .local/jars/kernel/streamjoin-kernel.jar
echo "kernel: .local/jars/kernel/streamjoin-kernel.jar in $((SECONDS - started))s"
