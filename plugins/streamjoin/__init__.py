"""streamjoin: Kafka Streams-style joins on Spark, run by Airflow."""
