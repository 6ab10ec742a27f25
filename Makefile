# The two commands of the README: `make demo` and `make test`. Everything else is what they need.
SHELL := /bin/bash
UV_VERSION := 0.13.9
UV := .tools/uvenv/bin/uv
ENV := source scripts/env.sh &&

.PHONY: setup jvm-archive browser demo test ui broker-start broker-stop registry-start registry-stop lint clean

$(UV):
	python3 -m venv .tools/uvenv
	.tools/uvenv/bin/pip install --quiet uv==$(UV_VERSION)

.venv/.synced: $(UV) uv.lock pyproject.toml
	$(UV) sync --frozen
	touch $@

.local/jars/.fetched: java/kafka-broker/pom.xml java/spark-kafka/pom.xml java/protoc/pom.xml scripts/fetch-jars.sh
	bash scripts/fetch-jars.sh
	touch $@

# the tests' Kafka Streams oracle (tests/kafka_streams_oracle.py); the script also skips an up-to-date build
.local/ks-oracle/.built: java/ks-oracle/pom.xml $(shell find java/ks-oracle/src -name '*.java') scripts/build-ks-oracle.sh
	bash scripts/build-ks-oracle.sh

# the schema registry of the demo and the tests (Apicurio Registry, started by localdev.schema_registry)
.local/schema-registry/.built: java/schema-registry/pom.xml scripts/build-schema-registry.sh
	bash scripts/build-schema-registry.sh

# the engine kernel (java/kernel), put on spark.jars by core/plans.connector_jars
KERNEL_SOURCES := java/kernel/pom.xml $(shell find java/kernel/src -name '*.java' 2>/dev/null)
.local/jars/kernel/streamjoin-kernel.jar: $(KERNEL_SOURCES) scripts/build-kernel.sh
	bash scripts/build-kernel.sh

# the Spark driver's class-data sharing archive (streamjoin.core.jvm_archive): a training run once per Java and
# Spark installation, checked (and skipped) in a second after that
jvm-archive: .venv/.synced .local/jars/.fetched .local/jars/kernel/streamjoin-kernel.jar
	$(ENV) python -m streamjoin.localdev.jvm_archive

setup: .venv/.synced .local/jars/.fetched .local/ks-oracle/.built .local/schema-registry/.built .local/jars/kernel/streamjoin-kernel.jar jvm-archive  ## Python deps from the lock file, Java artifacts from Maven Central, the driver's class archive

browser:  ## Debian's Chromium for the status page's browser test (skipped when present)
	bash scripts/install-browser.sh

broker-start: setup
	$(ENV) python -m streamjoin.localdev.kafka_broker start --port $${KAFKA_PORT}

broker-stop:
	$(ENV) python -m streamjoin.localdev.kafka_broker stop

# the schema registry the Avro demo (streamjoin_clicks_per_region_avro_demo) and Avro pipelines ask
# (connection schema_registry_default in scripts/env.sh)
registry-start: setup
	$(ENV) python -m streamjoin.localdev.schema_registry start --port $${SCHEMA_REGISTRY_PORT}

registry-stop:
	$(ENV) python -m streamjoin.localdev.schema_registry stop --port $${SCHEMA_REGISTRY_PORT}

demo: broker-start  ## the seed pipeline end to end through Airflow
	$(ENV) bash scripts/demo.sh

ui: broker-start registry-start  ## Airflow's UI (airflow standalone) on http://127.0.0.1:8080
	$(ENV) airflow standalone

test: setup browser  ## every test tier; the broker is started by the test session
	$(ENV) bash scripts/test.sh

lint: setup
	.venv/bin/ruff check . && .venv/bin/mypy

clean: broker-stop registry-stop
	rm -rf var .local/kafka .local/test-kafka
