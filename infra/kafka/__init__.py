"""Resources of the embedded Kafka broker (the Maven pom)."""
