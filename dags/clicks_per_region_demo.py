"""The seed's demo: clicks left-joined with user regions, summed per region; stops once the sample is done."""

from streamjoin.airflow.dag_factory import pipeline_dag

dag = pipeline_dag("include/pipelines/clicks_per_region.yaml", demo=True)
