"""Resources of the S3-compatible server trajlake tests and runs the lake against (the Maven pom)."""
