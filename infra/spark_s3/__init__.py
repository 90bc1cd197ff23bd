"""Resources of Spark's S3 filesystem (the Maven pom of hadoop-aws)."""
