"""The one settings object (pydantic-settings, environment prefix ``TRAJLAKE_``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipelines import PipelineConfig
    from sandboxes import SandboxConfig

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Configuration of every trajlake command; each field reads ``TRAJLAKE_<NAME>``."""

    model_config = SettingsConfigDict(env_prefix="TRAJLAKE_", extra="ignore")

    home: Path = Path(".trajlake")
    """Root of everything local: broker storage, lake, spool, blobs."""
    kafka_bootstrap: str = "127.0.0.1:9092"
    """Kafka bootstrap servers; the embedded broker listens on the first one. Unset while the
    home has a cluster (``trajlake up --brokers 3``): every broker of it, so clients still
    bootstrap when one is down."""
    topic_episodes: str = "trajlake.episodes"
    """Topic of everything rollout workers emit."""
    topic_judgements: str = "trajlake.judgements"
    """Topic of rewards written by re-judge jobs."""
    topic_learner: str = "trajlake.learner"
    """Topic of learner events (a checkpoint and its lineage: the ``checkpoints`` table)."""
    topic_tasks: str = "trajlake.tasks"
    """Topic of task admission results (the ``tasks`` table)."""
    topic_curation: str = "trajlake.curation"
    """Topic of what people curate: failure cases (the ``failure_cases`` table)."""
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
    lake_uri: str | None = None
    """The lake on an object store instead (``s3://bucket/prefix``): the pipeline writes it and
    the API reads it, through delta-rs with the ``s3_*`` settings."""
    s3_endpoint: str | None = None
    """S3 endpoint URL (an S3-compatible server: s3proxy, MinIO; unset: AWS)."""
    s3_access_key: str | None = None
    """S3 access key id."""
    s3_secret_key: str | None = None
    """S3 secret access key."""
    s3_region: str = "us-east-1"
    """S3 region."""
    sandbox_backend: str = "local"
    """Default sandbox backend."""
    sandbox_runtime_dir: Path = Path("/run/trajlake/sandboxes")
    """Per-sandbox mounts and state (parents must be traversable by ``sandbox_uid``)."""
    image_store: Path = Path("/var/lib/trajlake/images")
    """Recorded base images and their root filesystems (machine-wide, content-addressed)."""
    sandbox_uid: int = Field(default=64000, gt=0)
    """Unprivileged host uid the ``local`` backend runs agents as (root hosts)."""
    docker_host: str | None = None
    """Docker engine URL (default: ``DOCKER_HOST`` or the local socket)."""
    sandbox_image: str = "trajlake-base"
    """Image sandboxes use when none is named (``local`` uses host paths unless asked)."""
    api_token: str | None = None
    """Bearer token the query API requires, if set."""
    api_reviewers: Path | None = None
    """A YAML file of ``reviewer: token``: who may post review verdicts through the API (and read)."""
    api_host: str = "127.0.0.1"
    """Interface ``trajlake api serve`` listens on."""
    api_port: int = Field(default=8765, ge=0, le=65535)
    """Port ``trajlake api serve`` listens on."""
    prometheus_url: str | None = None
    """The deployment's Prometheus (``http://host:9090``): the workbench's health panel reads it."""

    @model_validator(mode="after")
    def _cluster_bootstrap(self) -> Settings:
        if "kafka_bootstrap" not in self.model_fields_set or not self.kafka_bootstrap.strip():
            from ingest.kafka_cluster import cluster_bootstrap

            found = cluster_bootstrap(self.home)
            if found:
                self.kafka_bootstrap = found
        return self

    def sandbox_config(self) -> SandboxConfig:
        """The :class:`sandboxes.SandboxConfig` these settings describe."""
        from sandboxes import SandboxConfig

        return SandboxConfig(
            runtime_dir=self.sandbox_runtime_dir,
            image_store=self.image_store,
            host_uid=self.sandbox_uid,
            docker_host=self.docker_host,
            default_image=self.sandbox_image,
        )

    @property
    def spool(self) -> Path:
        """Resolved spool directory."""
        return self.spool_dir or self.home / "spool"

    @property
    def blobs(self) -> str:
        """Resolved blob store root."""
        return self.blob_root or str(self.home / "blobs")

    @property
    def checkpoints(self) -> Path:
        """Where learner checkpoints are written."""
        return self.home / "checkpoints"

    @property
    def lake(self) -> Path:
        """Resolved lake directory."""
        return self.lake_dir or self.home / "lake"

    def lake_root(self) -> str:
        """Where the lake is: ``lake_uri`` (an object store), else the resolved directory."""
        return self.lake_uri or str(Path(self.lake).resolve())

    def search_index(self, root: str) -> Path:
        """The API's text index of the lake at ``root`` (local: one per lake, under the home)."""
        import hashlib

        return self.home / "cache" / "search" / hashlib.sha256(root.encode()).hexdigest()[:16]

    def storage_options(self, root: str | None = None) -> dict[str, str]:
        """delta-rs's options for ``root`` (default: this lake); empty for a local directory."""
        target = root or self.lake_root()
        if not target.startswith(("s3://", "s3a://")):
            return {}
        opts = {"AWS_REGION": self.s3_region}
        if self.s3_endpoint:
            opts["AWS_ENDPOINT_URL"] = self.s3_endpoint
            opts["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
            if self.s3_endpoint.startswith("http://"):
                opts["AWS_ALLOW_HTTP"] = "true"
        if self.s3_access_key:
            opts["AWS_ACCESS_KEY_ID"] = self.s3_access_key
        if self.s3_secret_key:
            opts["AWS_SECRET_ACCESS_KEY"] = self.s3_secret_key
        return opts

    def blob_options(self) -> dict[str, object]:
        """The blob store's fsspec options (S3 credentials when it is on S3)."""
        if not self.blobs.startswith(("s3://", "s3a://")):
            return {}
        client: dict[str, str] = {"region_name": self.s3_region}
        if self.s3_endpoint:
            client["endpoint_url"] = self.s3_endpoint
        return {"key": self.s3_access_key, "secret": self.s3_secret_key, "client_kwargs": client}

    @property
    def topics(self) -> dict[str, int]:
        """Topics the embedded broker creates, with partition counts."""
        return {
            self.topic_episodes: self.topic_partitions,
            self.topic_judgements: self.topic_partitions,
            self.topic_learner: 1,
            self.topic_tasks: 1,
            self.topic_curation: 1,
        }

    def pipeline_config(
        self,
        lake: Path | str | None = None,
        *,
        workers: int = 2,
        max_batch: int = 200_000,
        beam_args: list[str] | None = None,
        runner: str = "local",
        scheduler: str | None = None,
    ) -> PipelineConfig:
        """The :class:`pipelines.PipelineConfig` that folds every topic of these settings into ``lake``."""
        from pipelines import PipelineConfig

        root = str(lake) if isinstance(lake, str) else str(Path(lake).resolve()) if lake else self.lake_root()
        return PipelineConfig(
            bootstrap=self.kafka_bootstrap,
            lake_root=root,
            lake_options=self.storage_options(root),
            topics=(
                self.topic_episodes,
                self.topic_judgements,
                self.topic_learner,
                self.topic_tasks,
                self.topic_curation,
            ),  # fmt: skip
            control_topics={
                "checkpoint": self.topic_learner,
                "task": self.topic_tasks,
                "case": self.topic_curation,
                "drift": self.topic_curation,
                "review_item": self.topic_curation,
                "review": self.topic_curation,
                "retraction": self.topic_curation,
            },  # fmt: skip
            num_workers=workers,
            max_batch_per_partition=max_batch,
            beam_args=list(beam_args or []),
            worker_log=str(self.home / "logs" / "beam-workers.log"),
            runner=runner,
            dask_scheduler=scheduler,
        )
