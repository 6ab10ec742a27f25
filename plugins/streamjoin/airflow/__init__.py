"""Airflow adapter: hooks, operators, triggers, notifiers, DAG factory and the UI plugin."""
