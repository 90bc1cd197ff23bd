"""What runs beside the code: the Maven pom that resolves the Kafka broker's jars."""
