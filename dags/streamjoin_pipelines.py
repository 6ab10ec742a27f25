"""One DAG per pipeline spec under include/pipelines/: provision its topics, run its streaming join."""

from streamjoin.airflow.dag_factory import pipeline_dag, spec_paths

for _path in spec_paths():
    _dag = pipeline_dag(_path)
    globals()[_dag.dag_id] = _dag
