"""Kafka adapter: topic provisioning (admin), producing/consuming with Java-compatible partitioning (clients).

Imports confluent-kafka and the core only.
"""
