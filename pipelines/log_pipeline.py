"""The micro-batch driver: Kafka offset ranges -> Beam -> Delta, exactly once.

A micro-batch is one ``[start, end)`` range per topic partition. Its start is
where the lake's tables say they are (``transaction_version`` of the partition's
``txn`` app id, the minimum over the tables, plus one), its end the partition's
end offset now (capped per batch). The Beam pipeline of the batch commits every
table once, each commit carrying the batch's ``txn`` actions; a table that
already holds them is skipped. So a batch killed at any point is simply run
again, and re-running a batch changes nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import gc
import logging
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from fold.rows import EPISODE_TABLES
from lake.check import refuse_damaged
from lake.errors import LakeError
from lake.store import (
    CHECKPOINT_EVERY,
    COMPACT_MIN_FILES,
    LOG_RETENTION_HOURS,
    PIPELINE_TABLES,
    RETENTION_HOURS,
    Lake,
    OffsetRange,
    app_id,
    held_snapshots,
)
from pipelines import metrics
from pipelines.beam_stages import (
    AssembleEpisodes,
    DedupEvents,
    LoadTouchedEpisodes,
    ParseAndValidate,
    ReadKafkaRanges,
    ResolveStoredEvents,
    WriteDelta,
    drop_staged_in_memory,
    gather,
)
from pipelines.errors import PipelineError
from schemas import fixes
from schemas.control import CONTROL_TABLES

log = logging.getLogger(__name__)

DEFAULT_TOPICS = (
    "trajlake.episodes", "trajlake.judgements", "trajlake.learner", "trajlake.tasks", "trajlake.curation",
)  # fmt: skip
DEFAULT_CONTROL_TOPICS = {
    "checkpoint": "trajlake.learner", "task": "trajlake.tasks", "case": "trajlake.curation",
    "drift": "trajlake.curation", "review_item": "trajlake.curation", "review": "trajlake.curation",
    "retraction": "trajlake.curation",
}  # fmt: skip


@dataclass
class PipelineConfig:
    """What the log pipeline reads, where it writes, and how it runs."""

    bootstrap: str
    """Kafka bootstrap servers."""
    lake_root: str
    """The lake directory, or an object-store URI (``s3://bucket/prefix``)."""
    lake_options: dict[str, str] = field(default_factory=dict)
    """Storage options of an object-store lake (delta-rs's: endpoint, keys, region)."""
    topics: tuple[str, ...] = DEFAULT_TOPICS
    """Topics folded into the lake."""
    control_topics: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_CONTROL_TOPICS))
    """The topic of each kind of control stream (:mod:`schemas.control`); those topics carry nothing else."""
    name: str = "trajlake-log"
    """Pipeline name: the prefix of the Delta ``txn`` app ids."""
    max_batch_per_partition: int = 200_000
    """Cap of a micro-batch, in records per partition."""
    compact_min_files: int = COMPACT_MIN_FILES
    """Between batches, a table with this many small files is compacted by delta-rs (0: never)."""
    checkpoint_every: int = CHECKPOINT_EVERY
    """Between batches, a table gets a Delta checkpoint once this many commits followed its last one
    (0: only delta-rs's own, every 100): readers open it from the checkpoint and a few commits."""
    vacuum_every_s: float = 3600.0
    """Between batches, each table is vacuumed by delta-rs at most this often (0: never): the files
    compaction and replaced rows left are deleted once no version of the last ``vacuum_retain_hours``
    reads them (a process vacuums at its first batch, then on this period)."""
    vacuum_retain_hours: float = RETENTION_HOURS
    """What the pipeline's VACUUM keeps: files versions this recent read (never under Delta's week;
    versions learner checkpoints trained on are kept whatever their age)."""
    log_retain_hours: float = LOG_RETENTION_HOURS
    """At each checkpoint it writes, the log's commits older than this go (Delta's 30 days), except
    those the versions learner checkpoints trained on need to load (local lakes)."""
    num_workers: int = 2
    """Workers of the local ``FnApiRunner``."""
    running_mode: str = "multi_processing"
    """``in_memory`` (one in-process worker), ``multi_threading`` or ``multi_processing``
    (``num_workers`` SDK workers) for the local ``FnApiRunner``."""
    in_process_below: int = 100_000
    """A micro-batch of fewer records runs in this process (see ``executor``). The runner's fixed
    cost is seconds per batch, and on 2 cores the eager executor was faster even at 200k events
    (37 s against 51 s on 2 worker processes); it holds the batch in memory (~6 KB per record
    measured), hence the bound (0: never)."""
    eager_workers: int = -1
    """Worker processes that parse records and fold episodes beside the eager executor's own
    (:mod:`pipelines.eager_workers`): ``-1`` one per core but the one the executor runs on, ``0``
    none (every step in this process)."""
    executor: str = "auto"
    """How a batch's graph runs on the local runner: ``beam`` (Beam's ``FnApiRunner``, in this
    process below ``in_process_below``), ``eager`` (:mod:`pipelines.eager`: the same graph
    applied step by step in this process, no runner), or ``auto`` (eager, a backlog of
    ``in_process_below`` records or more cut into several batches; with ``in_process_below``
    0, the ``FnApiRunner``'s worker processes). Another runner (``runner="dask"``, a
    ``--runner`` in ``beam_args``) always runs the graph itself."""
    beam_args: list[str] = field(default_factory=list)
    """Extra Beam pipeline options; a ``--runner`` among them (Flink, Spark,
    Dataflow, ...) replaces the local ``FnApiRunner``."""
    runner: str = "local"
    """``local`` (Beam's ``FnApiRunner``, ``num_workers`` SDK worker processes) or ``dask``
    (Beam's ``DaskRunner`` on a ``dask.distributed`` cluster)."""
    dask_scheduler: str | None = None
    """The Dask scheduler's address (``tcp://HOST:PORT``); ``None``: a local cluster of
    ``num_workers`` worker processes is started for the run and stopped after it."""
    worker_log: str | None = None
    """Where the local SDK worker processes' own output goes (they log at INFO to
    the stderr they inherit); ``None`` leaves it on stderr."""
    floor: dict[tuple[str, int], int] = field(default_factory=dict)
    """Lowest start offset per (topic, partition) (``replay --from-time``)."""
    kafka_client: str = "auto"
    """The Kafka client the batch reads with: ``kafka-python``, ``confluent`` (librdkafka: about
    five times faster to read 50k records here), or ``auto`` (``TRAJLAKE_KAFKA_CLIENT`` where
    set, else ``confluent`` where ``confluent-kafka`` is installed, else ``kafka-python``)."""

    def lake(self) -> Lake:
        """The lake this pipeline writes."""
        return Lake(self.lake_root, self.lake_options or None)


@dataclass
class BatchResult:
    """What one micro-batch did."""

    ranges: list[OffsetRange]
    records: int
    seconds: float
    counters: dict[str, int] = field(default_factory=dict)


def _partitions(consumer: Any, topics: Iterable[str]) -> list[Any]:
    from kafka import TopicPartition

    return [TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or [])]


class LogOffsets:
    """End and start offsets from one long-lived consumer (``--follow`` asks every few hundred ms).

    A new consumer per question spent tens of milliseconds connecting, twice per micro-batch.
    Its metadata is at most ``metadata_max_age_ms`` old: a partition added to a topic is
    planned that much later. Any Kafka error drops the consumer (the next question opens a new one).
    """

    def __init__(self, bootstrap: str, metadata_max_age_ms: int = 5000) -> None:
        self.bootstrap = bootstrap
        self.metadata_max_age_ms = metadata_max_age_ms
        self._consumer: Any = None

    def consumer(self) -> Any:
        """The consumer (no group, no commits), opened on first use."""
        from kafka import KafkaConsumer
        from kafka.errors import KafkaError

        if self._consumer is None:
            try:
                self._consumer = KafkaConsumer(
                    bootstrap_servers=self.bootstrap.split(","),
                    enable_auto_commit=False,
                    metadata_max_age_ms=self.metadata_max_age_ms,
                )
            except KafkaError as exc:
                raise PipelineError(f"cannot reach Kafka at {self.bootstrap}: {exc}") from exc
        return self._consumer

    def close(self) -> None:
        """Close the consumer (a later question opens a new one)."""
        if self._consumer is not None:
            with contextlib.suppress(Exception):
                self._consumer.close()
            self._consumer = None

    def ends(self, topics: tuple[str, ...]) -> dict[tuple[str, int], int]:
        """End offset of every partition of ``topics`` now (missing topics are skipped)."""
        try:
            consumer = self.consumer()
            tps = _partitions(consumer, topics)
            return (
                {(tp.topic, tp.partition): off for tp, off in consumer.end_offsets(tps).items()}
                if tps
                else {}
            )
        except BaseException:
            self.close()
            raise

    def starts(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The first offset each partition still holds (records below it were deleted)."""
        from kafka import TopicPartition

        tps = [TopicPartition(t, p) for t, p in partitions]
        if not tps:
            return {}
        try:
            consumer = self.consumer()
            return {(tp.topic, tp.partition): off for tp, off in consumer.beginning_offsets(tps).items()}
        except BaseException:
            self.close()
            raise


def end_offsets(bootstrap: str, topics: tuple[str, ...]) -> dict[tuple[str, int], int]:
    """End offset of every partition of ``topics`` now (missing topics are skipped)."""
    with contextlib.closing(LogOffsets(bootstrap)) as offsets:
        return offsets.ends(topics)


def log_starts(bootstrap: str, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The first offset each partition still holds (records below it were deleted)."""
    with contextlib.closing(LogOffsets(bootstrap)) as offsets:
        return offsets.starts(partitions)


def offsets_for_time(
    bootstrap: str, topics: tuple[str, ...], when: dt.datetime
) -> dict[tuple[str, int], int]:
    """First offset at or after ``when`` per partition (the end offset if none)."""
    with contextlib.closing(LogOffsets(bootstrap)) as offsets:
        consumer = offsets.consumer()
        tps = _partitions(consumer, topics)
        ms = int(when.timestamp() * 1000)
        found = consumer.offsets_for_times({tp: ms for tp in tps})
        ends = consumer.end_offsets(tps)
        return {(tp.topic, tp.partition): (found[tp].offset if found.get(tp) else ends[tp]) for tp in tps}


def committed_offsets(
    lake: Lake, cfg: PipelineConfig, partitions: list[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    """Next offset to read per partition: where the least advanced table stands."""
    apps = {(topic, part): app_id(cfg.name, topic, part) for topic, part in partitions}
    tables = [lake.txn_versions(name, apps.values()) for name in PIPELINE_TABLES]
    out = {}
    for tp, app in apps.items():
        nxt = min((-1 if (v := t[app]) is None else v) for t in tables) + 1
        out[tp] = max(nxt, cfg.floor.get(tp, 0))
    return out


def plan_batch(
    lake: Lake,
    cfg: PipelineConfig,
    ends: dict[tuple[str, int], int] | None = None,
    offsets: LogOffsets | None = None,
) -> list[OffsetRange]:
    """The next micro-batch: a non-empty range per partition with unprocessed records.

    ``offsets`` asks the log (without it, a consumer of its own for this plan).
    """
    if offsets is None:
        with contextlib.closing(LogOffsets(cfg.bootstrap)) as own:
            return plan_batch(lake, cfg, ends, own)
    if ends is None:
        ends = offsets.ends(cfg.topics)
    starts = committed_offsets(lake, cfg, sorted(ends))
    metrics.record_lag(ends, starts)
    ranges = []
    for (topic, part), end in sorted(ends.items()):
        start = starts[(topic, part)]
        if start > end and cfg.floor.get((topic, part), 0) < start:
            # the lake holds offsets this log never had: another log (a new broker or cluster,
            # a recreated topic); folding would skip records silently
            raise PipelineError(
                f"the lake at {cfg.lake_root} holds {topic}/{part} up to offset {start - 1}, but that "
                f"partition of the log at {cfg.bootstrap} ends at {end}: the lake was built from another "
                "log",
                fix=fixes.REPLAY_THIS_LOG,
            )
        stop = min(end, start + cfg.max_batch_per_partition)
        if stop > start:
            ranges.append(OffsetRange(topic, part, start, stop))
    bound = eager_bound(cfg)
    if bound and sum(len(r) for r in ranges) > bound:
        # a batch the eager executor runs (in memory, in this process): the backlog in several
        share = max(1, bound // len(ranges))
        ranges = [OffsetRange(r.topic, r.partition, r.start, min(r.end, r.start + share)) for r in ranges]
    firsts = offsets.starts([(r.topic, r.partition) for r in ranges])
    for r in ranges:
        first = firsts.get((r.topic, r.partition), 0)
        if r.start < first:
            raise PipelineError(
                f"offsets {r.start} to {first - 1} of {r.topic}/{r.partition} are gone from the log at "
                f"{cfg.bootstrap} (deleted by retention or DeleteRecords) and the lake at {cfg.lake_root} "
                "never read them, so folding on would skip them silently",
                fix=fixes.REPLAY_FROM_TIME,
            )
    return ranges


def _options(cfg: PipelineConfig, records: int | None = None) -> tuple[Any, PipelineOptions]:
    opts = PipelineOptions(cfg.beam_args)
    if cfg.runner == "dask":
        from pipelines.dask_runner import BoundedDaskRunner

        if cfg.dask_scheduler is None:
            raise PipelineError("the dask runner needs a scheduler: run it inside dask_cluster(cfg)")
        # one partition per offset range (Beam's default packs up to 128 in one: one reading task)
        return BoundedDaskRunner(), PipelineOptions(
            [*cfg.beam_args, f"--dask_client_address={cfg.dask_scheduler}", "--dask_partition_size=1"]
        )
    if any(a.startswith("--runner") for a in cfg.beam_args):
        return None, opts
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    mode = cfg.running_mode
    if records is not None and records < cfg.in_process_below:
        mode = "in_memory"
    opts = PipelineOptions(
        [
            *cfg.beam_args,
            f"--direct_num_workers={cfg.num_workers}",
            f"--direct_running_mode={mode}",
            "--default_sdk_harness_log_level=WARNING",
        ]
    )
    return FnApiRunner(), opts


def build(p: Any, ranges: list[OffsetRange], cfg: PipelineConfig, run_id: str) -> None:
    """The micro-batch's Beam graph on ``p`` (``run_id`` names its staging directory).

    ``p`` is a ``beam.Pipeline`` (the graph runs on its runner afterwards) or a
    :class:`pipelines.eager.EagerPipeline` (each step runs as it is applied).
    """
    from pipelines.eager import EagerPipeline

    lake = cfg.lake()
    txns = {app_id(cfg.name, r.topic, r.partition): r.last for r in ranges}
    memory = isinstance(p, EagerPipeline)  # (one process: what is staged for a commit stays in memory)

    batches = (
        p
        | "Ranges" >> beam.Create(ranges)
        | "ReadKafka" >> ReadKafkaRanges(cfg.bootstrap, client=cfg.kafka_client)
    )
    parsed = batches | "ParseAndValidate" >> ParseAndValidate(cfg.control_topics)
    deduped = parsed.events | "DedupEvents" >> DedupEvents()
    resolved = deduped | "ResolveStoredEvents" >> ResolveStoredEvents(lake)
    quarantined = (parsed.quarantine, resolved.conflicts) | "AllQuarantined" >> beam.Flatten()
    # quarantine first: a conflict's losing copy is in quarantine before the winner replaces it
    # upsert: a conflict judged again against a new winner is rewritten (or released: removed)
    kept = quarantined | "WriteQuarantine" >> WriteDelta(
        lake,
        "quarantine",
        "upsert",
        txns,
        batched=True,
        replaced=resolved.released,
        stage_id=run_id,
        in_memory=memory,
    )
    written = resolved.events | "WriteEvents" >> WriteDelta(
        lake,
        "events",
        "insert_new",
        txns,
        batched=True,
        after=kept,
        replaced=resolved.replaced,
        touched=resolved.refold,  # (named in its summary: folded again below)
        stage_id=run_id,
        in_memory=memory,
    )
    # The episodes of the batch, once their events are committed: they are
    # folded from the table, so late events join the ones already there.
    touched = written | "Touched" >> beam.Map(lambda summary: summary["episodes"])
    derived = (
        touched
        | "LoadTouchedEpisodes" >> LoadTouchedEpisodes(lake)
        | "AssembleEpisodes" >> AssembleEpisodes()
    )
    # A stream the fold could not assemble keeps its stored rows; its dead letter is in
    # quarantine before the derived tables record the batch's offsets (a crash re-folds it).
    # (a join, not a side input: runners that read side inputs by recomputing them, Dask's, need none)
    folded = (
        {"ids": touched | "KeyTouched" >> beam.Map(lambda x: (0, x)),
         "bad": derived.failed | "KeyFailed" >> beam.Map(lambda x: (0, x))}
        | "JoinFailed" >> beam.CoGroupByKey()
        | "SkipFailed" >> beam.MapTuple(lambda _, got: sorted(_union(got["ids"]) - _union(got["bad"])))
    )  # fmt: skip
    # (no txn: quarantine already recorded these offsets above; an upsert by log position is idempotent)
    dead = derived.dead_letter | "WriteDeadLetters" >> WriteDelta(
        lake, "quarantine", "upsert", {}, batched=True, skip_empty=True, stage_id=run_id, in_memory=memory
    )
    # Each touched episode's rows are replaced whole: rows its events no longer give (a failure
    # fixed by a late reward, an episode whose only event lost an id conflict) are removed.
    commits = [kept, written, dead]
    for name in EPISODE_TABLES:
        commits.append(
            derived[name]
            | f"Write_{name}"
            >> WriteDelta(
                lake,
                name,
                "replace_episodes",
                txns,
                batched=True,
                touched=folded,
                after=dead,
                stage_id=run_id,
                in_memory=memory,
            )
        )
    # A control stream is one row of its table, upserted by key (the latest event's row).
    # (a stream whose events are all gone loses its row, as an episode does)
    for name in CONTROL_TABLES:
        commits.append(
            derived[name]
            | f"Write_{name}"
            >> WriteDelta(
                lake,
                name,
                "upsert",
                txns,
                batched=True,
                after=dead,
                replaced=derived[f"removed_{name}"],
                stage_id=run_id,
                in_memory=memory,
            )  # fmt: skip
        )
    # One last step that every commit feeds: runners that compute a graph from its final step
    # (Dask's) then run all of it, and the driver gets one summary of the batch.
    _ = gather(tuple(commits) | "AllCommits" >> beam.Flatten(), "Committed")


def _union(lists: Iterable[Iterable[str]]) -> set[str]:
    return {x for xs in lists for x in xs}


@contextlib.contextmanager
def _stderr_to(path: str | None) -> Iterator[None]:
    """Point fd 2 at ``path`` while worker processes are spawned (they inherit it)."""
    if path is None:
        yield
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


STAGING = "_staging"
"""The lake's directory of staged Parquet files, one sub-directory per batch run."""
STALE_STAGING_S = 24 * 3600.0
"""A run's staging directory this old is a crashed run's leftovers (a batch takes minutes)."""


def _sweep_staging(lake: Lake) -> None:
    """Remove the staging directories of runs that crashed a day ago or more.

    A run's directory is named by its start time first: object stores give directories no time.
    """
    import pyarrow.fs as pafs

    fs, base = lake.staging()
    now = time.time()
    with contextlib.suppress(OSError):
        for info in fs.get_file_info(pafs.FileSelector(base, allow_not_found=True)):
            started = info.base_name.split("-", 1)[0]
            if (
                info.type == pafs.FileType.Directory
                and started.isdigit()
                and now - int(started) > STALE_STAGING_S
            ):
                fs.delete_dir(info.path)


def runs_eagerly(cfg: PipelineConfig, records: int) -> bool:
    """Whether a batch of ``records`` runs on :mod:`pipelines.eager` rather than a Beam runner."""
    if cfg.executor not in ("auto", "beam", "eager"):
        raise PipelineError(f"executor {cfg.executor!r} is not one of auto, beam, eager")
    if cfg.runner != "local" or any(a.startswith("--runner") for a in cfg.beam_args):
        return False
    return cfg.executor == "eager" or (cfg.executor == "auto" and records < cfg.in_process_below)


def eager_bound(cfg: PipelineConfig) -> int | None:
    """The most records a batch is planned with so that it runs eagerly (``executor="auto"``).

    On the local runner the eager executor was faster than the ``FnApiRunner``'s worker processes
    at every size measured, so ``auto`` cuts a larger backlog into batches below
    ``in_process_below`` (``None``: no bound; ``beam``, ``eager``, another runner, or 0).
    """
    if cfg.executor != "auto" or cfg.in_process_below <= 0 or not runs_eagerly(cfg, 0):
        return None
    return cfg.in_process_below - 1


def run_batch(ranges: list[OffsetRange], cfg: PipelineConfig) -> BatchResult:
    """Run one micro-batch's pipeline to completion (counted in :mod:`pipelines.metrics`)."""
    try:
        res = _run_batch(ranges, cfg)
    except BaseException:
        metrics.BATCH_FAILURES.inc()
        raise
    metrics.record_batch(res.records, res.seconds, res.counters)
    return res


def _run_batch(ranges: list[OffsetRange], cfg: PipelineConfig) -> BatchResult:
    t0 = time.monotonic()
    records = sum(len(r) for r in ranges)
    if runs_eagerly(cfg, records):
        return _run_eager(ranges, cfg, t0)
    runner, opts = _options(cfg, records)
    p = beam.Pipeline(runner=runner, options=opts) if runner is not None else beam.Pipeline(options=opts)
    run_id = _run_id()
    build(p, ranges, cfg, run_id)
    try:
        with _stderr_to(cfg.worker_log):
            result = p.run()
            try:
                result.wait_until_finish()
            finally:
                client = getattr(result, "client", None)  # the DaskRunner's: one per pipeline, never closed
                if client is not None:
                    client.close()
    finally:
        _remove_staging(cfg, run_id)
    counters: dict[str, int] = {}
    try:
        for c in result.metrics().query()["counters"]:
            key = f"{c.key.metric.namespace}.{c.key.metric.name}"
            counters[key] = counters.get(key, 0) + int(c.committed or c.attempted or 0)
    except Exception:  # metrics are informational; some runners do not report them
        log.debug("no metrics from the runner", exc_info=True)
    return BatchResult(ranges, records, time.monotonic() - t0, counters)


_WORKERS_FROM = 2_000
"""Records in a batch from which the eager executor's worker processes are started ahead of its
first parallel step (a batch of one read unit and one chunk of episodes has nothing to share)."""


def _run_eager(ranges: list[OffsetRange], cfg: PipelineConfig, t0: float) -> BatchResult:
    from pipelines.eager import EagerPipeline
    from pipelines.eager_workers import default_size, shared_pool

    pool = shared_pool(default_size() if cfg.eager_workers < 0 else cfg.eager_workers)
    if pool is not None and ranges and sum(len(r) for r in ranges) >= _WORKERS_FROM:
        pool.workers()  # started now: they import while this process reads the batch from Kafka
    p = EagerPipeline(pool)
    run_id = _run_id()
    # A batch makes millions of short-lived objects and few cycles: the cyclic collector's passes
    # over them were 15-20% of a 100k-event batch. Off for the batch; reference counting frees them.
    collecting = gc.isenabled()
    gc.disable()
    try:
        build(p, ranges, cfg, run_id)  # (each step runs as it is applied)
    finally:
        if collecting:
            gc.enable()
        drop_staged_in_memory(run_id)
        _remove_staging(cfg, run_id)
    return BatchResult(ranges, sum(len(r) for r in ranges), time.monotonic() - t0, dict(p.counters))


def _run_id() -> str:
    """A batch run's name (its staging directory): its start time first, which the sweep reads."""
    return f"{int(time.time())}-{uuid.uuid4().hex[:12]}"


def _remove_staging(cfg: PipelineConfig, run_id: str) -> None:
    with contextlib.suppress(OSError, PipelineError, LakeError):
        fs, base = cfg.lake().staging()
        fs.delete_dir(f"{base}/{run_id}")


@contextlib.contextmanager
def dask_cluster(cfg: PipelineConfig) -> Iterator[PipelineConfig]:
    """``cfg`` with a Dask scheduler to run on: its own, or a local cluster started for the run.

    The local cluster has ``cfg.num_workers`` worker processes (one thread each), so the
    stages run in parallel in other processes as on a real cluster; it is stopped on exit.
    Any other runner: ``cfg`` as it is.

    Raises:
        PipelineError: ``dask.distributed`` is not installed, or the scheduler does not answer.
    """
    if cfg.runner != "dask":
        yield cfg
        return
    try:
        import distributed
    except ImportError as exc:
        raise PipelineError(
            "the dask runner needs dask.distributed: pip install 'apache-beam[dask]'"
        ) from exc
    if cfg.dask_scheduler is not None:
        try:
            with distributed.Client(cfg.dask_scheduler, timeout=10):
                pass
        except (OSError, TimeoutError) as exc:
            raise PipelineError(f"no Dask scheduler answers at {cfg.dask_scheduler}: {exc}") from exc
        yield cfg
        return
    with distributed.LocalCluster(
        n_workers=cfg.num_workers, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        yield dataclasses.replace(cfg, dask_scheduler=cluster.scheduler_address)


def run_once(
    cfg: PipelineConfig, *, on_batch: Callable[[BatchResult], None] | None = None
) -> list[BatchResult]:
    """Process everything in the log up to its end offsets at the start, then return."""
    with dask_cluster(cfg) as cfg, held_snapshots():
        return _run_once(cfg, on_batch=on_batch)


def _run_once(
    cfg: PipelineConfig, *, on_batch: Callable[[BatchResult], None] | None = None
) -> list[BatchResult]:
    lake = cfg.lake()
    refuse_damaged(lake)
    lake.ensure()
    _sweep_staging(lake)
    with contextlib.closing(LogOffsets(cfg.bootstrap)) as offsets:
        return _batches_to(lake, cfg, offsets.ends(cfg.topics), offsets, on_batch)


def _batches_to(
    lake: Lake,
    cfg: PipelineConfig,
    target: dict[tuple[str, int], int],
    offsets: LogOffsets,
    on_batch: Callable[[BatchResult], None] | None,
) -> list[BatchResult]:
    results: list[BatchResult] = []
    previous: list[OffsetRange] | None = None
    while True:
        ranges = plan_batch(lake, cfg, target, offsets)
        if not ranges:
            return results
        if ranges == previous:
            raise PipelineError(f"no progress: the tables did not record the batch {ranges}")
        previous = ranges
        res = run_batch(ranges, cfg)
        results.append(res)
        maintain_between_batches(lake, cfg)
        if on_batch:
            on_batch(res)


def run_follow(
    cfg: PipelineConfig,
    *,
    interval_s: float = 0.5,
    stop: threading.Event | None = None,
    on_batch: Callable[[BatchResult], None] | None = None,
) -> int:
    """Run micro-batches until SIGINT/SIGTERM (or ``stop``); an idle log is asked again every ``interval_s``.

    A signal lets the batch in flight finish (it commits or is re-run later)
    before returning. Returns the number of batches run.
    """
    with dask_cluster(cfg) as cfg, held_snapshots():
        return _run_follow(cfg, interval_s=interval_s, stop=stop, on_batch=on_batch)


REPLAN_IDLE_S = 30.0
"""While the log is idle, ``--follow`` still reads the tables' offsets this often."""


def _run_follow(
    cfg: PipelineConfig,
    *,
    interval_s: float,
    stop: threading.Event | None,
    on_batch: Callable[[BatchResult], None] | None,
) -> int:
    stop = stop or threading.Event()
    previous: dict[signal.Signals, Any] = {}
    _sweep_staging(cfg.lake())
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
    lake = cfg.lake()
    refuse_damaged(lake)
    lake.ensure()
    n = 0
    offsets = LogOffsets(cfg.bootstrap)
    idle: dict[tuple[str, int], int] | None = None  # the log's ends when the lake last held all of it
    planned = 0.0
    try:
        while not stop.is_set():
            ends = offsets.ends(cfg.topics)
            if ends == idle and time.monotonic() - planned < REPLAN_IDLE_S:
                # nothing new in the log: one ListOffsets request, no table opened (and a full plan
                # now and then: a table restored to an older version by hand has work again)
                stop.wait(interval_s)
                continue
            planned = time.monotonic()
            ranges = plan_batch(lake, cfg, ends, offsets)
            if ranges:
                res = run_batch(ranges, cfg)
                n += 1
                maintain_between_batches(lake, cfg)
                if on_batch:
                    on_batch(res)
                idle = None
            else:
                idle = ends
                stop.wait(interval_s)
    finally:
        offsets.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return n


_VACUUMED: dict[str, float] = {}
"""When this process last vacuumed each table (its URI -> ``time.monotonic()``)."""


def maintain_between_batches(lake: Lake, cfg: PipelineConfig) -> dict[str, Any]:
    """What the pipeline does to its tables between batches: compaction, checkpoints, and a VACUUM when due.

    With each checkpoint it writes goes the log's cleanup (:meth:`Lake.cleanup_log`: expired
    commits, but never those a version learner checkpoints trained on needs; no writer of a
    local lake cleans the log on its own), or with the VACUUM where it writes no checkpoints.

    Each is delta-rs's own (``optimize.compact``, ``create_checkpoint``, ``vacuum``), run by the
    driver between two batches: no batch commits meanwhile, and a writer elsewhere waits for at
    most one of them (they take the lake's commit lock where it has one). Returns the tables
    compacted and checkpointed, and the data files vacuumed and log files deleted per table.
    """
    out: dict[str, Any] = {
        "compacted": compact_between_batches(lake, cfg),
        "vacuumed": {},
        "logs_cleaned": {},
        "checkpointed": [],
    }
    for name in PIPELINE_TABLES if cfg.checkpoint_every > 0 else ():
        try:
            if lake.checkpoint(name, every=cfg.checkpoint_every) is not None:
                out["checkpointed"].append(name)
                _clean_log(lake, name, cfg, out)  # (as Delta's writers clean theirs: at a checkpoint)
        except Exception as exc:  # noqa: BLE001 - maintenance never stops the pipeline
            log.warning("checkpoint of %s skipped: %s", name, _first_line(exc))
    if cfg.vacuum_every_s <= 0:
        return out
    now = time.monotonic()
    for name in PIPELINE_TABLES:
        uri = lake.uri(name)
        if uri in _VACUUMED and now - _VACUUMED[uri] < cfg.vacuum_every_s:
            continue
        _VACUUMED[uri] = now  # (tried: one that fails is tried again a period later, not every batch)
        try:
            files = lake.vacuum(name, retain_hours=cfg.vacuum_retain_hours)
        except Exception as exc:  # noqa: BLE001 - maintenance never stops the pipeline (a lost race, ...)
            log.warning("vacuum of %s skipped: %s", name, _first_line(exc))
            continue
        if files:
            out["vacuumed"][name] = len(files)
        if cfg.checkpoint_every <= 0:  # (no checkpoints of the pipeline's own to clean the log at)
            _clean_log(lake, name, cfg, out)
    return out


def _clean_log(lake: Lake, name: str, cfg: PipelineConfig, out: dict[str, Any]) -> None:
    try:
        logs = lake.cleanup_log(name, retain_hours=cfg.log_retain_hours)
    except Exception as exc:  # noqa: BLE001 - maintenance never stops the pipeline
        log.warning("log cleanup of %s skipped: %s", name, _first_line(exc))
        return
    if logs:
        out["logs_cleaned"][name] = len(logs)


def _first_line(exc: BaseException) -> str:
    """An error's first line for a log line (its type when it has no message)."""
    return (str(exc).splitlines() or [type(exc).__name__])[0][:300]


def compact_between_batches(lake: Lake, cfg: PipelineConfig) -> list[str]:
    """Compact the tables that have gathered ``cfg.compact_min_files`` small files; return their names."""
    if cfg.compact_min_files <= 0:
        return []
    return [t for t in PIPELINE_TABLES if lake.compact(t, min_files=cfg.compact_min_files) is not None]


def backlog(cfg: PipelineConfig) -> int:
    """Records in the log that the lake does not hold yet."""
    lake = cfg.lake()
    lake.ensure()
    whole = dataclasses.replace(cfg, max_batch_per_partition=2**62, in_process_below=0)  # (no eager bound)
    return sum(len(r) for r in plan_batch(lake, whole))


def replay(
    cfg: PipelineConfig,
    *,
    from_time: dt.datetime | None = None,
    on_batch: Callable[[BatchResult], None] | None = None,
) -> list[BatchResult]:
    """Rebuild every table of ``cfg.lake_root`` from the log (from offset 0, or ``from_time``).

    The target lake should be new (or a previous replay of the same log): the
    run resumes from what it holds, like any run.
    """
    if from_time is not None:
        cfg = dataclasses.replace(cfg, floor=offsets_for_time(cfg.bootstrap, cfg.topics, from_time))
    return run_once(cfg, on_batch=on_batch)
