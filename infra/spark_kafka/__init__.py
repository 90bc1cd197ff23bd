"""Resources of Spark's Kafka source (the Maven pom of spark-sql-kafka and its Maven settings)."""
