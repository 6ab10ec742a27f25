"""Local development infrastructure: a single-node KRaft Kafka broker run from Maven-resolved jars."""
