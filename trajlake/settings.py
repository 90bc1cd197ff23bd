"""The one settings object (pydantic-settings, environment prefix ``TRAJLAKE_``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Configuration of every trajlake command; each field reads ``TRAJLAKE_<NAME>``."""

    model_config = SettingsConfigDict(env_prefix="TRAJLAKE_", extra="ignore")

    home: Path = Path(".trajlake")
    """Root of everything local: broker storage, lake, spool, blobs."""
    kafka_bootstrap: str = "127.0.0.1:9092"
    """Kafka bootstrap servers; the embedded broker listens on the first one."""
    topic_episodes: str = "trajlake.episodes"
    """Topic of everything rollout workers emit."""
    topic_judgements: str = "trajlake.judgements"
    """Topic of rewards written by re-judge jobs."""
    topic_partitions: int = Field(default=8, ge=1)
    """Partitions of each topic the embedded broker creates."""
    kafka_heap: str = "512m"
    """JVM heap of the embedded broker."""
    spool_dir: Path | None = None
    """Durable spools, one sub-directory per worker (default ``<home>/spool``)."""
    blob_root: str | None = None
    """Blob store root, a path or fsspec URL (default ``<home>/blobs``)."""
    lake_dir: Path | None = None
    """Delta tables (default ``<home>/lake``)."""
    sandbox_backend: str = "local"
    """Default sandbox backend."""
    api_token: str | None = None
    """Bearer token the query API requires, if set."""

    @property
    def spool(self) -> Path:
        """Resolved spool directory."""
        return self.spool_dir or self.home / "spool"

    @property
    def blobs(self) -> str:
        """Resolved blob store root."""
        return self.blob_root or str(self.home / "blobs")

    @property
    def lake(self) -> Path:
        """Resolved lake directory."""
        return self.lake_dir or self.home / "lake"

    @property
    def topics(self) -> dict[str, int]:
        """Topics the embedded broker creates, with partition counts."""
        return {self.topic_episodes: self.topic_partitions, self.topic_judgements: self.topic_partitions}
