"""Where the plugin's pages are served (one place: the plugin mounts them, checks and alerts link to them)."""

from __future__ import annotations

#: the plugin's FastAPI app is mounted here by Airflow's api-server
PREFIX = "/streamjoin"
#: ``var/data_docs/<pipeline>/...`` is served under this path (``streamjoin.airflow.plugin.data_docs``)
DATA_DOCS_PATH = f"{PREFIX}/data-docs"


def data_docs_base_url() -> str:
    """The URL the Data Docs directory is served under, for links people open (alerts, task logs, status
    page): Airflow's ``[api] base_url`` (what the UI answers on) + :data:`DATA_DOCS_PATH`. A quality check's
    ``data_docs_base_url``."""
    from airflow.configuration import conf

    base = conf.get("api", "base_url", fallback=None) or "http://localhost:8080"
    return base.rstrip("/") + DATA_DOCS_PATH
