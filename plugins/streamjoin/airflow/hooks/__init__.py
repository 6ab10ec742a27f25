"""Airflow hooks of streamjoin."""
