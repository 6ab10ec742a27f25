"""Spark side: vectorised per-micro-batch join transforms. Imported by jobs and the replay CLI, never by DAGs."""
