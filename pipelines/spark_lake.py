"""The lake through Spark and delta-spark: table maintenance and large SQL.

delta-rs writes every table on one machine and inside Beam workers; Spark with
the Delta jars runs what delta-rs is not the tool for at scale: OPTIMIZE (bin
packing the many small files that micro-batches leave), Z-ORDER (clustering
rows by episode so an episode's events sit in few files), VACUUM (dropping files
no version within the retention still references) and SQL over whole tables.
Both engines implement the same Delta protocol on the same files: Spark reads
every table trajlake writes, delta-rs goes on committing after Spark rewrote the
files, and the pipeline's exactly-once ``txn`` versions survive maintenance.

pyspark comes from PyPI (pinned to the Spark release the Delta jars are built
for); the Delta jars come from Maven Central through ``infra/spark/pom.xml``.
Spark runs in local mode in this process; ``master`` points it at a cluster.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lake.errors import LakeError
from lake.store import RETENTION_HOURS
from schemas.errors import UnavailableError
from schemas.tables import TABLES

log = logging.getLogger(__name__)

ZORDER: dict[str, tuple[str, ...]] = {
    "events": ("episode_id",),
    "steps": ("episode_id",),
    "samples": ("episode_id",),
}
"""Columns each table is Z-ordered by: reads go episode by episode."""

OPTIMIZE_MAX_FILE_SIZE = "spark.databricks.delta.optimize.maxFileSize"
"""The Spark session setting OPTIMIZE bins files to; set to the table's file size for each table."""

DEFAULT_RETENTION_HOURS = RETENTION_HOURS
"""VACUUM keeps files that versions of the last week still reference (Delta's default)."""


def _s3a_config(options: dict[str, str]) -> dict[str, str]:
    """Spark's S3A settings from a lake's delta-rs options (``s3://`` paths read through S3A too)."""
    opts = {k.upper(): v for k, v in options.items()}
    conf = {
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.endpoint.region": opts.get("AWS_REGION", "us-east-1"),
    }
    endpoint = opts.get("AWS_ENDPOINT_URL")
    if endpoint:
        conf["spark.hadoop.fs.s3a.endpoint"] = endpoint
        conf["spark.hadoop.fs.s3a.path.style.access"] = "true"
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(endpoint.startswith("https://")).lower()
    if "AWS_ACCESS_KEY_ID" in opts:
        conf["spark.hadoop.fs.s3a.access.key"] = opts["AWS_ACCESS_KEY_ID"]
    if "AWS_SECRET_ACCESS_KEY" in opts:
        conf["spark.hadoop.fs.s3a.secret.key"] = opts["AWS_SECRET_ACCESS_KEY"]
    return conf


class SparkUnavailableError(LakeError, UnavailableError):
    """pyspark, Java or the Delta jars are missing."""


@dataclass(frozen=True)
class MaintenanceResult:
    """What maintenance did to one table."""

    table: str
    files_before: int
    files_after: int
    version_before: int
    version_after: int
    zorder_by: tuple[str, ...]
    vacuumed_files: int
    seconds: float


def delta_jars(progress: Callable[[str], None] | None = None) -> list[str]:
    """The Delta jars for Spark, resolved by Maven once (see :mod:`infra.maven`).

    Raises:
        SparkUnavailableError: Maven missing or the jars could not be resolved.
    """
    return _resolved("spark", "the Delta Lake jars for Spark", progress)


def s3a_jars(progress: Callable[[str], None] | None = None) -> list[str]:
    """Hadoop's S3A filesystem for Spark (hadoop-aws and the AWS SDK), resolved by Maven once.

    Raises:
        SparkUnavailableError: Maven missing or the jars could not be resolved.
    """
    return _resolved("spark_s3", "Spark's S3 filesystem (hadoop-aws)", progress)


def _resolved(pom: str, what: str, progress: Callable[[str], None] | None) -> list[str]:
    """The classpath of ``infra/<pom>/pom.xml``; a Maven failure is Spark being unavailable."""
    from infra.maven import MavenError, build_classpath, pom_path

    try:
        return build_classpath(pom_path(pom), what, progress)
    except MavenError as exc:
        raise SparkUnavailableError(str(exc)) from exc


class SparkLake:
    """The Delta tables under one directory (or S3 prefix), through a Spark session with Delta.

    Args:
        root: the lake directory, or ``s3://bucket/prefix`` (read through Hadoop's S3A).
        storage_options: the lake's delta-rs options (its S3 endpoint and keys), given to S3A.
        master: Spark master (``local[N]`` runs in this process).
        driver_memory: the driver JVM's heap.
        progress: told about slow first steps (resolving jars, starting Spark).
    """

    def __init__(
        self,
        root: str | Path,
        *,
        storage_options: dict[str, str] | None = None,
        master: str = "local[2]",
        driver_memory: str = "1g",
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.root = str(Path(root).resolve()) if "://" not in str(root) else str(root)
        self.storage_options = dict(storage_options or {})
        self.master = master
        self.driver_memory = driver_memory
        self._progress = progress or (lambda msg: log.info("%s", msg))
        self._spark: Any = None

    # ------------------------------------------------------------ session

    @property
    def spark(self) -> Any:
        """The Spark session (started on first use)."""
        if self._spark is None:
            self._spark = self._start()
        return self._spark

    def _start(self) -> Any:
        try:
            from pyspark.sql import SparkSession
        except ImportError as exc:
            raise SparkUnavailableError(
                "pyspark is not installed: `pip install -e '.[dev]'` (or `.[spark]`) brings it"
            ) from exc
        from ingest.kafka_broker import EmbeddedKafka
        from schemas.errors import TrajlakeError

        try:
            EmbeddedKafka.check_java()  # Spark 4 needs the same Java 17+ as the broker
        except TrajlakeError as exc:
            raise SparkUnavailableError(str(exc).replace("the embedded Kafka broker", "Spark")) from exc
        jars = delta_jars(self._progress)
        s3 = self.root.startswith(("s3://", "s3a://"))
        if s3:
            jars = [*jars, *s3a_jars(self._progress)]
        self._progress(f"starting Spark ({self.master}) with Delta")
        # Quiet, small and local: no UI, no console progress, few partitions for
        # the Delta log's state (its default of 50 is sized for clusters).
        builder = (
            SparkSession.builder.master(self.master)
            .appName("trajlake")
            .config("spark.jars", ",".join(jars))
            .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
            .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
            .config("spark.driver.memory", self.driver_memory)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.databricks.delta.snapshotPartitions", "2")
            # VACUUM lists files with this many tasks (default 10,000: minutes on a laptop)
            .config("spark.sql.sources.parallelPartitionDiscovery.parallelism", "4")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR")
        )
        if s3:
            for key, value in _s3a_config(self.storage_options).items():
                builder = builder.config(key, value)
        try:
            spark = builder.getOrCreate()
        except Exception as exc:  # noqa: BLE001 - py4j/JVM start-up errors have no common type
            raise SparkUnavailableError(f"Spark did not start: {exc}") from exc
        spark.sparkContext.setLogLevel("ERROR")
        return spark

    def close(self) -> None:
        """Stop the Spark session."""
        if self._spark is not None:
            self._spark.stop()
            self._spark = None

    def __enter__(self) -> SparkLake:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ reading

    def path(self, name: str) -> str:
        """Location of ``name``."""
        if name not in TABLES:
            raise LakeError(f"unknown table {name!r}; tables: {', '.join(TABLES)}")
        if "`" in self.root:
            raise LakeError(f"a lake path with a backtick cannot be named in Spark SQL: {self.root}")
        return f"{self.root}/{name}"

    def _commit_lock(self) -> Any:
        """The lock every trajlake writer of this lake holds around a commit (none for a directory)."""
        from lake import Lake

        return Lake(self.root, self.storage_options or None).writing()

    def exists(self, name: str) -> bool:
        """Whether ``name`` is a Delta table (without starting Spark)."""
        if "://" in self.root:
            from lake import Lake

            return Lake(self.root, self.storage_options or None).exists(name)
        return (Path(self.path(name)) / "_delta_log").is_dir()

    def read(self, name: str, *, version: int | None = None) -> Any:
        """``name`` as a Spark DataFrame (at a Delta ``version`` for time travel)."""
        reader = self.spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        try:
            return reader.load(self.path(name))
        except Exception as exc:  # noqa: BLE001 - AnalysisException and friends come through py4j
            raise LakeError(f"Spark cannot read {name}: {_short(exc)}") from exc

    def sql(self, query: str) -> Any:
        """Run ``query`` with every existing table registered as a view of its name."""
        for name in TABLES:
            if self.exists(name):
                self.read(name).createOrReplaceTempView(name)
        try:
            return self.spark.sql(query)
        except Exception as exc:  # noqa: BLE001
            raise LakeError(f"query failed: {_short(exc)}") from exc

    # -------------------------------------------------------- maintenance

    def detail(self, name: str) -> dict[str, Any]:
        """``DESCRIBE DETAIL`` of ``name``: files, size, protocol versions, features."""
        row = self._run(f"DESCRIBE DETAIL delta.`{self.path(name)}`").collect()[0]
        return dict(row.asDict())

    def version(self, name: str) -> int:
        """The table's latest Delta version."""
        row = self._run(f"DESCRIBE HISTORY delta.`{self.path(name)}` LIMIT 1").collect()[0]
        return int(row["version"])

    def optimize(self, name: str, *, zorder_by: Sequence[str] | None = None) -> dict[str, Any]:
        """Bin-pack ``name``'s small files (and cluster by ``zorder_by``); returns Delta's metrics."""
        cols = tuple(zorder_by if zorder_by is not None else ZORDER.get(name, ()))
        unknown = [c for c in cols if c not in TABLES[name].names]
        if unknown:
            raise LakeError(f"{name} has no column {', '.join(unknown)} to Z-order by")
        stmt = f"OPTIMIZE delta.`{self.path(name)}`" + (f" ZORDER BY ({', '.join(cols)})" if cols else "")
        # delta-spark has no delta.targetFileSize: its OPTIMIZE bins to this session setting (1 GiB
        # by default), and a file that size would be copied whole by the next MERGE touching it
        self.spark.conf.set(OPTIMIZE_MAX_FILE_SIZE, str(self._lake().file_target(name)))
        row = self._run(stmt).collect()[0]
        metrics: dict[str, Any] = row["metrics"].asDict(recursive=True)
        return metrics

    def vacuum(
        self, name: str, *, retain_hours: float = DEFAULT_RETENTION_HOURS, allow_short_retention: bool = False
    ) -> int:
        """Delete files no version within ``retain_hours`` references; returns how many.

        The VACUUM is delta-rs's (:meth:`lake.Lake.vacuum`), not Spark's: Spark's has no way to keep
        the files of the versions learner checkpoints trained on, which the pipeline's own VACUUM
        keeps whatever their age, and it would delete them here. Under Delta's safety bound (a
        week) a VACUUM can delete files a concurrent writer has written but not committed yet,
        and the files of versions that readers still pin (the API's ``?version=``, a re-judge's
        pinned read); it is refused unless ``allow_short_retention`` says the caller knows no
        writer or reader needs them (e.g. the pipeline is stopped). It takes the lake's commit
        lock itself.

        Raises:
            LakeError: a short retention without ``allow_short_retention``, or delta-rs failed.
        """
        self.path(name)  # (an unknown table is refused as by every other command)
        lake = self._lake()
        return len(lake.vacuum(name, retain_hours=retain_hours, allow_short_retention=allow_short_retention))

    def _lake(self) -> Any:
        """The same tables through delta-rs (:class:`lake.Lake`)."""
        from lake import Lake

        return Lake(self.root, self.storage_options or None)

    def _run(self, statement: str) -> Any:
        try:
            return self.spark.sql(statement)
        except Exception as exc:  # noqa: BLE001 - Spark's errors come through py4j untyped
            raise LakeError(f"Spark failed on {statement.split(' ')[0]}: {_short(exc)}") from exc

    def maintain(
        self,
        tables: Sequence[str] | None = None,
        *,
        vacuum: bool = True,
        retain_hours: float = DEFAULT_RETENTION_HOURS,
        allow_short_retention: bool = False,
        on_table: Callable[[MaintenanceResult], None] | None = None,
    ) -> list[MaintenanceResult]:
        """OPTIMIZE and VACUUM the given (default: all existing) tables.

        OPTIMIZE is Spark's, with each table's Z-order; VACUUM is delta-rs's, which keeps the files
        of the versions learner checkpoints trained on.
        """
        names = [t for t in (tables or TABLES) if self.exists(t)]
        out = []
        for name in names:
            start = time.monotonic()
            before = self.detail(name)
            v0 = self.version(name)
            # an object store's commits are serialised by trajlake's commit lock (S3 has no
            # put-if-absent here): Spark's commits take it too, or a pipeline's could be lost
            with self._commit_lock():
                self.optimize(name)
            deleted = (  # (delta-rs's VACUUM, which takes the lock itself)
                self.vacuum(name, retain_hours=retain_hours, allow_short_retention=allow_short_retention)
                if vacuum
                else 0
            )
            after = self.detail(name)
            res = MaintenanceResult(
                table=name,
                files_before=int(before["numFiles"]),
                files_after=int(after["numFiles"]),
                version_before=v0,
                version_after=self.version(name),
                zorder_by=ZORDER.get(name, ()),
                vacuumed_files=deleted,
                seconds=time.monotonic() - start,
            )
            out.append(res)
            if on_table:
                on_table(res)
        return out


def _short(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__
