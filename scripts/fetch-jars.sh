#!/usr/bin/env bash
# Resolves the Java artifacts from Maven Central into git-ignored .local/jars/:
#   kafka/  a single-node KRaft broker (java/kafka-broker/pom.xml), run by streamjoin.localdev.kafka_broker
#   spark/  Spark's Kafka connector and spark-avro (java/spark-kafka/pom.xml), passed to Spark as spark.jars
#   protoc/ Protocol Buffers' compiler (java/protoc/pom.xml): Protobuf inputs' schemas (streamjoin.kafka.protobuf)
#   hdfs/   Hadoop's MiniDFSCluster (java/hdfs-minicluster/pom.xml), the HDFS of the tests (streamjoin.localdev.hdfs)
# Idempotent: a folder that already holds its marker jar is left alone (FORCE=1 resolves again).
# Maven's local repository (~/.m2) makes a second resolution work offline.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

fetch() {  # fetch <name> <pom> <marker glob>
  local name=$1 pom=$2 marker=$3 dir="$root/.local/jars/$1"
  if [[ "${FORCE:-0}" != 1 ]] && compgen -G "$dir/$marker" > /dev/null; then
    echo "jars/$name: present ($(ls "$dir" | wc -l) jars in $dir), skipping"
    return
  fi
  echo "jars/$name: resolving $pom"
  local started=$SECONDS tmp="$dir.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp"
  # Into a temporary folder first, so an interrupted run never leaves a half-filled folder behind
  # that the marker check would take for complete.
  if ! mvn -q -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$tmp" -DincludeScope=runtime; then
    rm -rf "$tmp"
    echo "jars/$name: mvn failed to resolve $pom (network or Maven Central down? try again, or check ~/.m2)" >&2
    return 1
  fi
  rm -rf "$dir" && mv "$tmp" "$dir"
  echo "jars/$name: $(ls "$dir" | wc -l) jars in $((SECONDS - started))s"
}

command -v mvn > /dev/null || { echo "mvn not found: install Maven (apt-get install maven)" >&2; exit 1; }
fetch kafka java/kafka-broker/pom.xml 'kafka_2.13-*.jar'
# the marker is the connector's last dependency added: a folder resolved before it is resolved again
fetch spark java/spark-kafka/pom.xml 'spark-avro_2.13-*.jar'
fetch protoc java/protoc/pom.xml 'protoc-*.exe'
chmod +x "$root"/.local/jars/protoc/protoc-*.exe  # Maven copies the executable without its mode
fetch hdfs java/hdfs-minicluster/pom.xml 'hadoop-client-minicluster-*.jar'
