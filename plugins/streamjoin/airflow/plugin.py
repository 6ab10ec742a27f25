"""The Airflow UI plugin (entry point ``airflow.plugins``)."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin


class StreamJoinPlugin(AirflowPlugin):
    name = "streamjoin"
