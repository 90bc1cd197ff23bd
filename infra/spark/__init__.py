"""Maven pom of the Delta Lake jars for Spark (resolved by :mod:`infra.maven`)."""
