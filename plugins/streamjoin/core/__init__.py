"""Pure core: the pipeline spec, join semantics, partitioner and plans. No Spark, Kafka or Airflow imports."""
