"""Shared by the scripts that run DAGs with ``dag.test()`` in a subprocess (test_dag_files, test_shipped_dags)."""

#: Defines ``warm_checks()`` in such a script. dag.test() runs every task in the script's process: the check
#: tasks' Spark session and GX start in a thread while the Spark jobs run (spark-submit: other processes), not
#: when the first check starts; the check's own ``build_session`` then gets this session (getOrCreate). A
#: failure here only leaves the check to start its own session, as it would anyway.
WARM_CHECKS = """
def warm_checks():
    try:
        import streamjoin.quality.validate  # noqa: F401  (GX, pyspark)
        from streamjoin.spark.session import build_session

        conn = json.loads(os.environ.get("AIRFLOW_CONN_SPARK_DEFAULT") or "{}")  # the check's master
        build_session("streamjoin-quality-warm", master=conn.get("host") or "local[*]", with_kafka=False)
    except Exception as exc:
        print(f"warming the checks' Spark session failed: {exc!r}", flush=True)
"""
