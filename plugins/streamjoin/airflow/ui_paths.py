"""Where the plugin's pages are served (one place: the plugin mounts them, checks and alerts link to them).

Links that people open from elsewhere (alerts, task logs) are absolute ``http(s)`` URLs built from Airflow's
``[api] base_url``, the address its UI answers on (Airflow's own task-log links use it too).
"""

from __future__ import annotations

from urllib.parse import quote

#: the plugin's FastAPI app is mounted here by Airflow's api-server
PREFIX = "/streamjoin"
#: ``var/data_docs/<pipeline>/...`` is served under this path (``streamjoin.airflow.plugin.data_docs``)
DATA_DOCS_PATH = f"{PREFIX}/data-docs"
#: where quality checks keep their Data Docs (one directory per pipeline, target, day and run), relative to the
#: project home: what :data:`DATA_DOCS_PATH` serves
DATA_DOCS_DIR = "var/data_docs"
#: the Browse menu's entry (``url_route`` of the plugin's external view): Airflow shows the plugin's pages in its
#: own frame under ``/plugin/<route>/...``
UI_ROUTE = "stream-jobs"


def airflow_base_url() -> str:
    """Airflow's ``[api] base_url`` without a trailing ``/`` (``http://localhost:8080`` when unset, as Airflow's
    own task-log links)."""
    from airflow.configuration import conf

    return (conf.get("api", "base_url", fallback=None) or "http://localhost:8080").rstrip("/")


def data_docs_base_url() -> str:
    """The URL the Data Docs directory is served under, for links people open (alerts, task logs, status
    page): :func:`airflow_base_url` + :data:`DATA_DOCS_PATH`. A quality check's ``data_docs_base_url``."""
    return airflow_base_url() + DATA_DOCS_PATH


def pipeline_page_url(pipeline: str) -> str:
    """A pipeline's Stream jobs page inside Airflow's UI (its frame, with Airflow's menus around it)."""
    return f"{airflow_base_url()}/plugin/{UI_ROUTE}{PREFIX}/jobs/{quote(pipeline)}"
