"""The lake: Delta tables written with delta-rs, idempotently and exactly once.

Every write of a micro-batch carries one Delta ``txn`` action per Kafka
partition the batch covers (``app_id`` = ``<pipeline>:<topic>:<partition>``,
``version`` = the last offset of the range). The rows and the ``txn`` actions
commit in one Delta transaction, so a table's ``transaction_version`` says
exactly which offsets it holds. Writes are idempotent on top of that: ``events``
and ``quarantine`` only insert rows whose key is absent (MERGE ... WHEN NOT
MATCHED INSERT), the silver and gold tables upsert by key. A commit whose outcome
is unknown (an exception after the commit may have happened) is resolved by
re-reading the table's ``transaction_version`` before any retry; delta-rs does
not enforce that check itself.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.exceptions import DeltaError, TableNotFoundError
from deltalake.schema import Field as DeltaField
from prometheus_client import Counter

from lake.errors import LakeDamagedError, LakeError, TableMissingError, VersionNotFoundError
from schemas import fixes
from schemas.tables import PARTITION_COLUMNS, PRIMARY_KEYS, TABLES

log = logging.getLogger(__name__)

COMMIT_RETRIES = Counter(
    "trajlake_lake_commit_retries", "Commits to a table retried after an error (or a lost race).", ["table"]
)

PIPELINE_TABLES = (
    "events", "quarantine", "episodes", "steps", "rewards", "failures", "samples", "tasks", "checkpoints",
    "failure_cases", "drift", "review_queue", "reviews", "retractions",
)  # fmt: skip
"""The tables the log pipeline writes: every table of the lake, each a projection of the log."""

CONFLICT_PREFIX = "conflict: event_id "
"""How a conflict's ``quarantine`` row's error starts (then the event id and a space)."""

IN_LIST_MAX = 4000
"""Up to this many ids a read by episode is an exact ``IN`` list (with its ranges), beyond it ranges only."""

IN_PRUNE_MAX = 20
"""DataFusion turns an ``IN`` list into a file-pruning predicate only up to this many values."""

KEY_RANGES_MAX = 8
"""Most ranges a key predicate cuts its values into (at their widest gaps)."""

RANGE_SCAN_MAX_ROWS = 2_000_000
"""A dedup lookup reads the ``event_id`` column of its ranges whole (then matches the ids in Arrow)
while the files its ranges overlap hold at most this many rows; past it (ids that are not time
ordered, say) it asks with exact ``IN`` lists, which filter in the scan but cost ~0.1 s to plan
per 5,000 ids."""

RANGE_SCAN_MAX_BYTES = 32 << 20
"""A read by episode ids reads the files its ranges overlap whole (the columns asked for), then
keeps the ids' rows in Arrow, while those files hold at most this many bytes (compressed); past
it, exact ``IN`` lists filter in the scan."""

COMPACT_MIN_FILES = 32
"""A table is compacted between batches once it holds this many small files (0: never)."""

CHECKPOINT_EVERY = 20
"""Between batches, a table gets a Delta checkpoint once this many commits followed its last one."""

COMPACT_TARGET_BYTES = 128 << 20
"""The size compaction aims at where a table sets none (``events``); files under a quarter of a
table's size count as small."""

RETENTION_HOURS = 168.0
"""Delta's safety bound: a VACUUM keeps the files every version of the last week reads."""

LOG_RETENTION_HOURS = 30 * 24.0
"""Commit and checkpoint files of the log older than this may go (Delta's default log retention),
except those a version learner checkpoints trained on needs (:meth:`Lake.cleanup_log`)."""

LOG_CLEANUP_PROPERTY = "delta.enableExpiredLogCleanup"
LOG_CLEANUP_OFF = {LOG_CLEANUP_PROPERTY: "false"}
"""Table property set on every table of a local lake: no writer (delta-rs at each checkpoint it
writes, Spark at its) deletes old log files on its own, which would make a version a checkpoint's
lineage names unloadable 30 days on; :meth:`Lake.cleanup_log` does it between batches, keeping
those. (An object-store lake keeps Delta's own cleanup: its log is not listed here.)"""

FILE_TARGET_PROPERTY = "delta.targetFileSize"
REWRITTEN_FILE_BYTES = 16 << 20
"""The file size (``delta.targetFileSize``) of every table but ``events``: their MERGEs update rows,
and a MERGE rewrites each file it touches whole, then writes what it copied and what it inserted
as files of this size. At delta-rs's default (100 MiB) a table's newest file grew with every batch
and every batch that updated an episode in it rewrote it all (the 1M replay's last batch copied
295k ``steps`` rows to update 68); now a batch rewrites a few files of at most this size.
Compaction aims at the same size. ``events`` rows are never updated (a copy that loses is
deleted), so its files keep the default."""

WriteMode = Literal["insert_new", "upsert", "replace_episodes"]

TableHandle = DeltaTable
"""An open table (delta-rs's ``DeltaTable``), as :meth:`Lake.table` returns it."""


def app_id(pipeline: str, topic: str, partition: int) -> str:
    """The Delta ``txn`` application id of one Kafka partition of one pipeline."""
    return f"{pipeline}:{topic}:{partition}"


@dataclass(frozen=True)
class OffsetRange:
    """``[start, end)`` of one Kafka topic partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def last(self) -> int:
        """The last offset of the range (the ``txn`` version)."""
        return self.end - 1

    def __len__(self) -> int:
        return max(0, self.end - self.start)


_HELD = threading.local()

Stamp = tuple[int, int, int] | None
"""What identifies one commit file of a local table: see :meth:`Lake._commit_stamp`."""


@contextlib.contextmanager
def held_snapshots() -> Iterator[None]:
    """In this thread, inside the block, :meth:`Lake.table` keeps one open ``DeltaTable`` per table.

    Each later call brings it up to date with ``update_incremental`` (the commits since, read from
    the log; nothing when the next commit file is absent) instead of opening the table again (its
    last checkpoint and the commits after it): a micro-batch opened its tables ~90 times, 2.6 ms
    each on a new lake and 6.2 ms at 500k events. The pipeline's driver holds them; nothing else
    shares them (a thread's own). A time-travel open (``version=``) is never held (one at the
    version held is answered by the held snapshot). The thread keeps them after the block for its
    next one, so that consecutive runs (``run_once`` micro-batches, a long-lived process) do not
    open every table again: each is checked against the log before it is used again
    (:meth:`Lake._still_held`).
    """
    outer = getattr(_HELD, "tables", None)
    if outer is None:
        _HELD.tables, _HELD.used = dict(getattr(_HELD, "warm", None) or {}), set()
    try:
        yield
    finally:
        if outer is None:
            _HELD.warm = _kept(_HELD.tables, _HELD.used)
            _HELD.tables = None


def _kept(
    tables: dict[tuple[str, ...], tuple[DeltaTable, int, Stamp]], used: set[tuple[str, ...]]
) -> dict[tuple[str, ...], tuple[DeltaTable, int, Stamp]]:
    """What a thread keeps of a block's snapshots: those it used, of local tables, stamped where they stand.

    A snapshot's own commits since it was last asked for (a merge, a compaction, a vacuum made
    through it) are stamped too, so a log rolled back under it is seen. On an object store there
    is no stamp to check a kept snapshot by: none is kept there.
    """
    out: dict[tuple[str, ...], tuple[DeltaTable, int, Stamp]] = {}
    for key, (dt, _, _) in tables.items():
        if key not in used or "://" in key[0].removeprefix("file://"):
            continue
        version = int(dt.version())
        stamp = _file_stamp(Path(key[0].removeprefix("file://")) / "_delta_log" / f"{version:020d}.json")
        if stamp is not None:
            out[key] = (dt, version, stamp)
    return out


def _file_stamp(path: Path) -> Stamp:
    """A commit file's identity (inode, size, mtime); ``None`` when it is gone."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def forget_held_snapshots() -> None:
    """Drop the snapshots this thread kept from its last :func:`held_snapshots` block."""
    _HELD.warm = None


class _TxnCache:
    """The ``txn`` versions of each table at the newest version seen, shared by the process.

    delta-rs answers ``transaction_version(app)`` by replaying the log's ``txn`` actions (the last
    checkpoint and the commits after it): 0.75 ms a question at 500k events, and a micro-batch
    asked ~330 of them (every partition's app of every table, when planning and when committing).
    A commit is immutable, so an answer holds for it as long as the commit is the one seen: each
    entry keeps the stamp of its commit file (:meth:`Lake._commit_stamp`) and is dropped when the
    file is not the same (a table removed and made again, or restored from a copy, restarts or
    rewrites its history). Known at version ``v``, the answers at ``w > v`` are those plus the
    ``txn`` actions of commits ``v+1..w`` read from the log. A lake on an object store is not
    cached (delta-rs is asked every time).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[str, tuple[int, Stamp, dict[str, int | None]]] = {}

    def versions(self, lake: Lake, name: str, dt: DeltaTable, apps: Iterable[str]) -> dict[str, int | None]:
        wanted = list(apps)
        version = int(dt.version())
        stamp = lake._commit_stamp(name, version)
        if stamp is None:  # (an object store, or the commit file is gone): nothing to check it by
            return {app: _asked(dt, app) for app in wanted}
        key = lake.uri(name)
        with self._lock:
            have_version, have_stamp, have = self._known.get(key, (-1, None, {}))
        answers: dict[str, int | None] | None = None
        then = stamp if have_version == version else lake._commit_stamp(name, have_version)
        valid = have_version >= 0 and have_stamp == then
        if valid and have_version <= version:
            if have_version == version:
                answers = dict(have)
            elif version - have_version <= 64:  # (further: asking is cheaper than reading the commits)
                log_dir = Path(key.removeprefix("file://")) / "_delta_log"
                answers = _txns_since(log_dir, have_version, version, have)
        if answers is None:
            answers = {}
        for app in wanted:
            if app not in answers:
                answers[app] = _asked(dt, app)
        if version >= have_version or not valid:  # (an older snapshot's answers are not kept)
            with self._lock:
                self._known[key] = (version, stamp, answers)
        return {app: answers[app] for app in wanted}


def _asked(dt: DeltaTable, app: str) -> int | None:
    found = dt.transaction_version(app)
    return None if found is None else int(found)


def _txns_since(
    log_dir: Path, since: int, version: int, known: Mapping[str, int | None]
) -> dict[str, int | None] | None:
    """``known`` (the answers at ``since``) brought to ``version`` by the commits between; None if unread."""
    out = dict(known)
    for v in range(since + 1, version + 1):
        try:
            text = (log_dir / f"{v:020d}.json").read_text()
        except OSError:
            return None  # (cleaned up by log retention, or not readable): ask delta-rs
        for line in text.splitlines():
            if '"txn"' not in line:
                continue
            try:
                txn = json.loads(line).get("txn")
            except ValueError:
                return None
            if isinstance(txn, dict) and isinstance(txn.get("appId"), str):
                out[txn["appId"]] = int(txn["version"])
    return out


_TXNS = _TxnCache()


class Lake:
    """The Delta tables under one directory (``$TRAJLAKE_HOME/lake``) or object-store prefix.

    Args:
        root: the lake directory (or any delta-rs URI: ``s3://bucket/prefix``).
        storage_options: passed to delta-rs for object stores (endpoint, keys, ...).
        commit_lock: serialise this host's commits to the lake through a lock file (default: on
            for an object store). delta-rs detects a concurrent commit by writing the next log
            entry only if it does not exist; on a store that ignores that condition (s3proxy
            2.6) two writers would overwrite each other's commit, so the writers of one host
            take turns. Writers on several hosts need a store that honours conditional writes.
    """

    def __init__(
        self,
        root: str | Path,
        storage_options: dict[str, str] | None = None,
        *,
        commit_lock: bool | None = None,
    ) -> None:
        self.root = str(root).rstrip("/")
        self.storage_options = storage_options
        self.remote = "://" in self.root and not self.root.startswith("file://")
        self.commit_lock = self.remote if commit_lock is None else commit_lock
        self._pins: tuple[int | None, dict[str, set[int]]] = (None, {})

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the lake's commit lock (when it has one) around a write."""
        if not self.commit_lock:
            yield
            return
        import fcntl
        import hashlib

        # every writer of the lake on this host must find the same file: TRAJLAKE_LOCK_DIR names a
        # directory they share (containers: a shared volume); the key is the store, not its spelling
        shared = os.environ.get("TRAJLAKE_LOCK_DIR")
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        base = Path(shared) if shared else Path(cache) / "trajlake" / "locks"
        base.mkdir(parents=True, exist_ok=True)
        endpoint = (self.storage_options or {}).get("AWS_ENDPOINT_URL", "")
        key = endpoint.rstrip("/") + "|" + self.root.replace("s3a://", "s3://", 1).rstrip("/")
        path = base / (hashlib.sha256(key.encode()).hexdigest()[:20] + ".lock")
        with open(path, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def staging(self) -> tuple[Any, str]:
        """Where the pipeline stages files for a commit: ``(pyarrow filesystem, base path)``.

        Inside the lake, so every worker of a distributed runner sees what another staged.
        """
        import pyarrow.fs as pafs

        if not self.remote:
            return pafs.LocalFileSystem(), f"{self.root.removeprefix('file://')}/_staging"
        opts = {k.upper(): v for k, v in (self.storage_options or {}).items()}
        scheme, _, rest = self.root.partition("://")
        if scheme not in ("s3", "s3a"):
            fs, path = pafs.FileSystem.from_uri(self.root)
            return fs, f"{path}/_staging"
        try:
            import s3fs
        except ImportError as exc:
            raise LakeError("a lake on S3 stages files through s3fs: pip install 'trajlake[s3]'") from exc
        # fsspec's S3 client, not Arrow's: Arrow's multipart uploads fail content checks on s3proxy 2.6
        client: dict[str, str] = {"region_name": opts.get("AWS_REGION", "us-east-1")}
        if opts.get("AWS_ENDPOINT_URL"):
            client["endpoint_url"] = opts["AWS_ENDPOINT_URL"]
        fs = s3fs.S3FileSystem(key=opts.get("AWS_ACCESS_KEY_ID"), secret=opts.get("AWS_SECRET_ACCESS_KEY"),
                               client_kwargs=client)  # fmt: skip
        return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), f"{rest}/_staging"

    def uri(self, table: str) -> str:
        """Location of ``table``."""
        return f"{self.root}/{table}"

    def ensure(self, tables: Sequence[str] = PIPELINE_TABLES) -> None:
        """Create the (empty) tables that do not exist yet."""
        if "://" not in self.root:
            Path(self.root).mkdir(parents=True, exist_ok=True)
        for name in tables:
            try:
                existing: DeltaTable | None = self.table(name)
            except TableMissingError:
                existing = None
                try:
                    with self.writing():
                        self._create(name)
                except DeltaError as exc:
                    raise LakeError(f"cannot create table {name} at {self.uri(name)}: {exc}") from exc
            if existing is not None:
                with self.writing():
                    self._add_new_columns(name, existing)
                    self._set_file_target(name, existing)

    def _properties(self, name: str) -> dict[str, str]:
        """The table properties a table of this lake is made with."""
        props = {} if self.remote else dict(LOG_CLEANUP_OFF)
        if name != "events":
            props[FILE_TARGET_PROPERTY] = str(REWRITTEN_FILE_BYTES)
        return props

    def _create(self, name: str) -> None:
        if self.exists(name):  # another writer made it while this one waited for the lock
            return
        DeltaTable.create(
            self.uri(name),
            schema=TABLES[name],
            partition_by=list(PARTITION_COLUMNS.get(name, ())) or None,
            mode="ignore",
            configuration=self._properties(name) or None,
            storage_options=self.storage_options,
        )

    def _set_file_target(self, name: str, dt: DeltaTable) -> None:
        """A table made by an older trajlake gets its file size (one commit; a size set by hand stays)."""
        want = self._properties(name).get(FILE_TARGET_PROPERTY)
        if want is None or FILE_TARGET_PROPERTY in dt.metadata().configuration:
            return
        self._upgrade(
            name,
            lambda: dt.alter.set_table_properties({FILE_TARGET_PROPERTY: want}, raise_if_not_exists=False),
            lambda now: FILE_TARGET_PROPERTY in now.metadata().configuration,
            f"cannot set the file size of table {name}",
        )

    def _upgrade(
        self, name: str, change: Callable[[], Any], landed: Callable[[DeltaTable], bool], failure: str
    ) -> None:
        """Make ``change`` (one metadata commit to an older table); ``failure: error`` if it fails.

        Two processes upgrading one table at once both try: the commit that loses raises, and is
        no failure when the table it finds (``landed``) has the change the other one made.
        """
        try:
            change()
        except DeltaError as exc:
            if landed(DeltaTable(self.uri(name), storage_options=self.storage_options)):
                return
            raise LakeError(f"{failure}: {exc}") from exc

    def file_target(self, name: str) -> int:
        """The file size ``name``'s writes and compaction aim at (its ``delta.targetFileSize``)."""
        return _file_target(self.table(name))

    def _add_new_columns(self, name: str, dt: DeltaTable) -> None:
        """A table made by an older trajlake gets the nullable columns added since (null in old rows)."""
        have = set(dt.schema().to_arrow().names)
        missing = [f for f in TABLES[name] if f.name not in have]
        if not missing:
            return
        if any(not f.nullable for f in missing):
            required = [f.name for f in missing if not f.nullable]
            raise LakeError(
                f"table {name} at {self.uri(name)} lacks required columns {required}", fix=fixes.REPLAY_INTO
            )
        self._upgrade(
            name,
            lambda: dt.alter.add_columns([DeltaField.from_arrow(f) for f in missing]),
            lambda now: {f.name for f in missing} <= set(now.schema().to_arrow().names),
            f"cannot add columns {[f.name for f in missing]} to table {name}",
        )

    def _commit_stamp(self, name: str, version: int) -> Stamp:
        """Identity of table ``name``'s commit ``version`` on a local lake (inode, size, mtime).

        Delta writes each commit file once, so the same stamp means the same history up to it; a
        table removed and made again, or restored from a copy, has new files. ``None`` on an object
        store (not checked) and for a commit file that is gone (log cleanup, or removed).
        """
        if self.remote:
            return None
        return _file_stamp(self._log_dir(name) / f"{version:020d}.json")

    def _log_dir(self, name: str) -> Path:
        """The ``_delta_log`` directory of table ``name`` on a local lake."""
        return Path(self.uri(name).removeprefix("file://")) / "_delta_log"

    def _still_held(self, name: str, dt: DeltaTable, at: int, stamp: Stamp) -> bool:
        """Whether a held snapshot, read at version ``at``, still stands on this table's history.

        The commit it read is still the one in the log: the table was not removed and made again,
        nor restored from a copy (``update_incremental`` would apply another table's commits on top
        of it). Commits the ``DeltaTable`` made itself since (a merge, a compaction) are its own.
        """
        return stamp == self._commit_stamp(name, at) and int(dt.version()) >= at

    def table(self, name: str, version: int | None = None) -> DeltaTable:
        """Open ``name`` (at a Delta ``version`` for time travel).

        Inside :func:`held_snapshots` the thread's open ``DeltaTable`` is brought up to date
        instead (or, asked for the version it stands at, returned as it is): the object is the
        thread's shared one, so use it before this thread's next call, which may move it on.

        Raises:
            LakeError: no such table (or version).
        """
        held: dict[tuple[str, ...], tuple[DeltaTable, int, Stamp]] | None = getattr(_HELD, "tables", None)
        key: tuple[str, ...] = ()
        if held is not None:
            key = (self.uri(name), *sorted(f"{k}={v}" for k, v in (self.storage_options or {}).items()))
            _HELD.used.add(key)
        if held is not None and key in held:
            dt, at, stamp = held[key]
            if self._still_held(name, dt, at, stamp):
                try:
                    if version is not None:
                        if dt.version() == version:
                            return dt  # (a time-travel read of the version held: the same snapshot)
                    else:
                        if self.remote or self._commit_stamp(name, int(dt.version()) + 1) is not None:
                            dt.update_incremental()  # (a local table with no next commit is up to date)
                        held[key] = (dt, int(dt.version()), self._commit_stamp(name, int(dt.version())))
                        return dt
                except Exception:  # noqa: BLE001 - (a damaged or vacuumed log): opened again, as without
                    del held[key]
            else:
                del held[key]
        try:
            dt = DeltaTable(self.uri(name), storage_options=self.storage_options)
        except TableNotFoundError as exc:
            raise TableMissingError(
                f"the lake at {self.root} has no table {name}", fix=fixes.FOLD_LOG
            ) from exc
        except Exception as exc:  # delta-rs raises several types (and panics) for a damaged log
            raise self._damaged(name, exc) from exc
        if version is None:
            if held is not None:
                held[key] = (dt, int(dt.version()), self._commit_stamp(name, int(dt.version())))
            return dt
        latest = dt.version()
        if not 0 <= version <= latest:
            raise VersionNotFoundError(f"table {name} has no version {version}: its versions are 0..{latest}")
        try:
            dt.load_as_version(version)
        except DeltaError as exc:
            raise VersionNotFoundError(
                f"version {version} of table {name} cannot be loaded ({exc}); it may have been vacuumed"
            ) from exc
        return dt

    def _damaged(self, name: str, exc: BaseException) -> LakeError:
        """The error of a table that does not open: what is wrong with its log, and the fix."""
        from lake.check import REBUILD, check_table

        found = check_table(self, name)
        what = found.problems[0] if found.problems else str(exc).strip().splitlines()[0][:200]
        at = f" at version {found.version}" if found.version is not None else ""
        return LakeDamagedError(
            f"table {name} of the lake at {self.root} is damaged{at}: {what}", fix=REBUILD
        )

    def exists(self, name: str) -> bool:
        """Whether ``name`` is a Delta table (a damaged one raises :class:`LakeDamagedError`)."""
        try:
            self.table(name)  # (held for the run inside held_snapshots)
            return True
        except TableMissingError:
            return False

    def read(
        self,
        name: str,
        *,
        version: int | None = None,
        where: str | None = None,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """Read ``name`` (at Delta ``version``; optionally ``WHERE <where>``; only ``columns``) into Arrow.

        Runs on delta-rs's own query engine (DataFusion), which reads only the
        columns asked for and prunes files by the predicate; the result has the
        table's Arrow schema from :mod:`schemas.tables` (those columns of it).
        """
        from deltalake import QueryBuilder

        schema = TABLES[name]
        if columns is not None:
            unknown = [c for c in columns if c not in schema.names]
            if unknown:
                raise LakeError(f"table {name} has no columns {unknown}")
            schema = pa.schema([schema.field(c) for c in columns])
        dt = self.table(name, version)
        have = set(dt.schema().to_arrow().names)
        picked = ", ".join(f'"{c}"' for c in schema.names if c in have)
        sql = f'SELECT {picked or "*"} FROM "{name}"' + (f" WHERE {where}" if where else "")
        try:
            reader = QueryBuilder().register(name, dt).execute(sql)
            table = pa.table(reader)
            if SCAN_LOG_ENV in os.environ:
                _log_scan(name, "read", _files_opened(QueryBuilder().register(name, dt), sql))
        except Exception as exc:
            from lake.check import check_table

            if not check_table(self, name).ok:
                raise self._damaged(name, exc) from exc
            raise LakeError(f"cannot read {name}: {str(exc).strip()[:500]}") from exc
        return _conform(table, schema)

    def read_episodes_rows(
        self,
        name: str,
        episode_ids: Sequence[str],
        *,
        version: int | None = None,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """The rows of ``name`` (a table with an ``episode_id`` column) of these episodes, only ``columns``.

        The scan reads only those columns, and DataFusion prunes files and row groups by
        the ids' ranges (:func:`key_predicate`: a late straggler among new episodes' time-ordered
        ids adds its own range, not the span between); for up to a few thousand ids the exact
        ``IN`` list filters rows in the scan, for more the exact set is kept in Arrow. A learner
        reading its new episodes does not decode the rest of the table.
        """
        import pyarrow.compute as pc

        schema = TABLES[name]
        if columns is not None:
            schema = pa.schema([schema.field(c) for c in columns])
        if not episode_ids:
            return pa.Table.from_pylist([], schema)
        ids = sorted(set(episode_ids))
        narrow = len(ids) > IN_PRUNE_MAX and (
            rows_in_ranges(
                self.table(name, version), "episode_id", _key_ranges(ids, KEY_RANGES_MAX), "size_bytes"
            )
            <= RANGE_SCAN_MAX_BYTES
        )  # the files the ranges overlap are small: read them whole, no IN list to plan
        if len(ids) <= IN_LIST_MAX and not narrow:
            chunks = [ids[i : i + 1000] for i in range(0, len(ids), 1000)]
            parts = [
                self.read(
                    name, version=version, columns=schema.names, where=key_predicate("episode_id", chunk)
                )
                for chunk in chunks
            ]
            return pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        wanted = list(schema.names) + ([] if "episode_id" in schema.names else ["episode_id"])
        where = key_predicate("episode_id", ids, exact=False)
        table = self.read(name, version=version, columns=wanted, where=where)
        table = table.filter(pc.is_in(table.column("episode_id"), value_set=pa.array(ids, type=pa.string())))
        return table.select(schema.names)

    def read_events_by_id(self, event_ids: Sequence[str], version: int | None = None) -> pa.Table:
        """The ``events`` rows of these event ids, whatever their ``event_date`` partition.

        The dedup lookup of every batch: first the ``event_id`` column alone of the files whose
        statistics the ids' ranges cannot rule out (:func:`key_predicate`; time-ordered UUIDv7 ids
        of one batch touch the newest files, whatever the table's size), then whole rows of the
        ids found (none, unless a batch is read again or a producer re-sends).
        """
        import pyarrow.compute as pc

        if not event_ids or not self.exists("events"):
            return pa.Table.from_pylist([], TABLES["events"])
        dt = self.table("events", version)
        version = int(dt.version())
        if not pa.table(dt.get_add_actions(flatten=True)).num_rows:
            return pa.Table.from_pylist([], TABLES["events"])  # no file yet: nothing to find
        ids = sorted(set(event_ids))
        hits: list[str] = []
        if len(ids) > IN_PRUNE_MAX and rows_in_ranges(
            dt, "event_id", _key_ranges(ids, KEY_RANGES_MAX)
        ) <= max(RANGE_SCAN_MAX_ROWS, 4 * len(ids)):
            # the ids of the files the ranges can be in, matched here: one scan, no IN list to plan
            col = self.read(
                "events",
                version=version,
                columns=["event_id"],
                where=key_predicate("event_id", ids, exact=False),
            ).column(0)
            hits = col.filter(pc.is_in(col, value_set=pa.array(ids, type=pa.string()))).to_pylist()
        else:
            for i in range(0, len(ids), IN_LIST_MAX):  # bounded IN lists (see read_episodes_rows)
                where = key_predicate("event_id", ids[i : i + IN_LIST_MAX])
                hits += (
                    self.read("events", version=version, columns=["event_id"], where=where)
                    .column(0)
                    .to_pylist()
                )
        if not hits:
            return pa.Table.from_pylist([], TABLES["events"])
        chunks = [hits[i : i + IN_LIST_MAX] for i in range(0, len(hits), IN_LIST_MAX)]
        parts = [self.read("events", version=version, where=key_predicate("event_id", c)) for c in chunks]
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    def read_conflicts(self, event_ids: Iterable[str]) -> list[dict[str, Any]]:
        """The ``quarantine`` rows of copies that conflicted with these event ids.

        One read of the conflicts' rows (a few, where producers behave), matched here by the id
        their error names: a batch of any size costs one scan.
        """
        wanted = set(event_ids)
        if not wanted or not self.exists("quarantine"):
            return []
        rows = self.read(
            "quarantine", where=f"starts_with(error, {sql_literal(CONFLICT_PREFIX)})"
        ).to_pylist()
        return [r for r in rows if r["error"][len(CONFLICT_PREFIX) :].split(" ", 1)[0] in wanted]

    def read_episodes_events(self, episode_ids: Sequence[str], version: int | None = None) -> pa.Table:
        """Every ``events`` row of the given episodes."""
        if not episode_ids:
            return pa.Table.from_pylist([], TABLES["events"])
        return self.read_episodes_rows("events", episode_ids, version=version)

    def versions(self) -> dict[str, int]:
        """Current Delta version of every existing pipeline table."""
        out = {}
        for name in TABLES:
            try:
                out[name] = DeltaTable(self.uri(name), storage_options=self.storage_options).version()
            except TableNotFoundError:
                continue
            except Exception as exc:
                raise self._damaged(name, exc) from exc
        return out

    def read_pinned(self, name: str, version: int | None = None) -> tuple[pa.Table, int]:
        """The whole table at ``version`` (default: the current one) and the version read."""
        if version is None:
            version = int(self.table(name).version())
        return self.read(name, version=version), version

    def row_count(self, name: str, version: int | None = None) -> int:
        """Rows of ``name`` from the file statistics in the Delta log (no data read).

        Falls back to reading the table when a file carries no statistics.
        """
        counts = pa.table(self.table(name, version).get_add_actions(flatten=True)).column("num_records")
        if counts.null_count:
            return int(self.read(name, version=version).num_rows)
        return int(sum(counts.to_pylist()))

    def txn_version(self, name: str, app: str) -> int | None:
        """``transaction_version(app)`` of table ``name`` (None: never committed)."""
        return self.txn_versions(name, [app])[app]

    def txn_versions(self, name: str, apps: Iterable[str]) -> dict[str, int | None]:
        """``transaction_version`` of each of ``apps`` in table ``name`` now (None: never committed).

        Answered from what this process learned of the table's earlier versions where it can
        (see :class:`_TxnCache`).

        Raises:
            TableMissingError: no such table.
        """
        return _TXNS.versions(self, name, self.table(name), apps)

    def write(
        self,
        name: str,
        rows: pa.Table,
        *,
        mode: WriteMode,
        txns: Mapping[str, int] | None = None,
        max_attempts: int = 5,
        episodes: Sequence[str] = (),
        replacing: Sequence[tuple[Any, ...]] = (),
    ) -> bool:
        """Commit ``rows`` to ``name`` with ``txns`` (app id -> version), exactly once.

        Args:
            name: the table.
            rows: rows in the table's schema (cast if needed).
            mode: ``insert_new`` (only rows whose key is absent), ``upsert``, or
                ``replace_episodes`` (upsert, and delete the rows of the episodes
                in ``rows`` that ``rows`` no longer contains).
            episodes: with ``replace_episodes``, the episodes whose rows ``rows``
                replaces (those with no row left are emptied).
            txns: the ``txn`` actions committed with the rows.
            max_attempts: commit attempts (conflicts, unknown outcomes).
            replacing: keys of stored rows removed: ``(event_id, event_date)`` for ``events``,
                the primary key for other tables. For ``events``: the stored rows that ``rows``
                replace. They are removed in the commit that adds ``rows`` (a reader never sees
                an event in neither copy), unless ``rows`` holds the same key (then updated).

        Returns:
            True if this call committed, False if the table already held these
            transactions (a re-run), in which case nothing is written.

        Raises:
            LakeError: the commit kept failing.
        """
        with self.writing():
            return self._write(name, rows, mode=mode, txns=dict(txns or {}), max_attempts=max_attempts,
                               episodes=episodes, replacing=replacing)  # fmt: skip

    def _write(
        self,
        name: str,
        rows: pa.Table,
        *,
        mode: WriteMode,
        txns: dict[str, int],
        max_attempts: int,
        episodes: Sequence[str],
        replacing: Sequence[tuple[Any, ...]],
    ) -> bool:
        if txns and self._holds(name, txns):
            return False
        schema = TABLES[name]
        data = rows.select(schema.names).cast(schema) if rows.num_rows else pa.Table.from_pylist([], schema)
        keys = PRIMARY_KEYS[name]
        props = CommitProperties(
            app_transactions=[Transaction(app_id=a, version=v) for a, v in sorted(txns.items())],
            custom_metadata={"trajlake.rows": str(data.num_rows)},
        )
        attempt = 0
        while True:
            attempt += 1
            try:
                self._commit(name, data, keys, mode, props, episodes, replacing)
                return True
            except (DeltaError, OSError) as exc:
                # The outcome is unknown: the commit may have landed before the error.
                if txns and self._holds(name, txns):
                    log.info("commit to %s raised (%s) but had landed", name, exc)
                    return True
                if attempt >= max_attempts:
                    raise LakeError(f"commit to {name} failed after {attempt} attempts: {exc}") from exc
                log.warning("commit to %s failed (%s); retrying", name, exc)
                COMMIT_RETRIES.labels(name).inc()
                time.sleep(0.05 * 2**attempt)

    def small_files(self, name: str) -> int:
        """Small files of ``name`` that compaction can merge: those sharing a partition with another."""
        dt = self.table(name)
        actions = pa.table(dt.get_add_actions(flatten=True))
        parts = [c for c in actions.column_names if c.startswith("partition.")]
        groups: dict[tuple[Any, ...], int] = {}
        sizes = actions.column("size_bytes").to_pylist()
        keys = (
            list(zip(*(actions.column(c).to_pylist() for c in parts), strict=True))
            if parts
            else [()] * len(sizes)
        )
        small = _file_target(dt) // 4
        for size, key in zip(sizes, keys, strict=True):
            if size < small:
                groups[key] = groups.get(key, 0) + 1
        return sum(n for n in groups.values() if n > 1)

    def compact(self, name: str, *, min_files: int = COMPACT_MIN_FILES) -> dict[str, Any] | None:
        """Compact ``name``'s small files with delta-rs (``optimize.compact``) once it has ``min_files``.

        Returns delta-rs's metrics, or None when nothing was due (or a writer's commit won).
        delta-rs bins neighbouring files in commit order, so the narrow key ranges of
        time-ordered ids stay narrow per file and batches still prune. Readers at earlier
        versions keep their files until a vacuum; a writer that committed meanwhile either
        does not conflict (new files only) or is retried by its own commit loop, and a
        compaction that loses is skipped until the next batch. On a lake with a commit lock
        (object stores) the lock is held while it runs, so writers wait for one compaction of
        a bounded number of files.
        """
        if min_files <= 0 or not self.exists(name):
            return None
        if self.small_files(name) < min_files:
            return None
        with self.writing():
            try:
                metrics = self.table(name).optimize.compact(
                    target_size=self.file_target(name), max_concurrent_tasks=1
                )
            except DeltaError as exc:
                log.info("compaction of %s skipped: %s", name, exc)
                return None
        log.info(
            "compacted %s: %s files into %s",
            name,
            metrics.get("numFilesRemoved"),
            metrics.get("numFilesAdded"),
        )
        return dict(metrics)

    def _relative(self, name: str, paths: Iterable[str]) -> list[str]:
        """Data file paths delta-rs gave (relative to the table, or whole) relative to table ``name``."""
        root = self.uri(name).removeprefix("file://").rstrip("/") + "/"
        return [p.removeprefix("file://").removeprefix(root) for p in paths]

    def _present(self, name: str, relative: Sequence[str]) -> list[str]:
        """Of data files of ``name`` (relative paths, as delta-rs names them), those still there.

        One listing call on an object store (the filesystem the pipeline stages through).
        """
        from urllib.parse import unquote

        if not self.remote:
            base = Path(self.uri(name).removeprefix("file://"))
            return [f for f in relative if (base / unquote(f)).exists()]
        if not relative:
            return []
        import pyarrow.fs as pafs

        fs, staging = self.staging()
        base = staging.removesuffix("/_staging") + f"/{name}"
        infos = fs.get_file_info([f"{base}/{unquote(f)}" for f in relative])
        return [f for f, info in zip(relative, infos, strict=True) if info.type != pafs.FileType.NotFound]

    def pinned_versions(self, name: str) -> list[int]:
        """Versions of ``name`` that learner checkpoints trained on (the ``checkpoints`` table's lineage).

        A VACUUM keeps their files whatever their age, so that a checkpoint's training data can be
        read again. Versions any checkpoint names for a table of this name count (its ``lake_uri``
        may spell this lake another way): keeping a version more deletes fewer files, never more.
        """
        if name == "checkpoints" or not self.exists("checkpoints"):
            return []
        version = int(self.table("checkpoints").version())
        if self._pins[0] != version:  # (one read per version of the table)
            pins: dict[str, set[int]] = {}
            for raw in (
                self.read("checkpoints", version=version, columns=["table_versions"]).column(0).to_pylist()
            ):
                try:
                    named = json.loads(raw or "{}")
                except (ValueError, RecursionError):
                    continue  # (a row the fold kept as written: not a lineage this can use)
                for table, v in named.items() if isinstance(named, dict) else ():
                    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**63:
                        pins.setdefault(table, set()).add(v)
            self._pins = (version, pins)
        return sorted(self._pins[1].get(name, ()))

    def checkpoint(self, name: str, *, every: int = CHECKPOINT_EVERY) -> int | None:
        """Write a Delta checkpoint of ``name`` once ``every`` commits followed its last one; its version.

        A reader that opens a table reads its last checkpoint and replays the commits after it:
        60 commits past a checkpoint opened in 17 ms, 3.5 ms right after one (measured here).
        delta-rs checkpoints every 100 commits on its own; the pipeline, committing every table
        each batch, checkpoints more often between batches. A checkpoint is not a commit: writers
        and readers go on. Local lakes only (``None`` elsewhere, and when none is due).
        """
        if self.remote or every <= 0 or not self.exists(name):
            return None
        log_dir = self._log_dir(name)
        try:
            last = int(json.loads((log_dir / "_last_checkpoint").read_text())["version"])
        except (OSError, ValueError, KeyError, TypeError):
            last = -1
        dt = self.table(name)
        version = int(dt.version())
        if version - last < every:
            return None
        try:
            dt.create_checkpoint()
        except DeltaError as exc:
            raise LakeError(f"checkpoint of {name} at version {version} failed: {exc}") from exc
        return version

    def _loadable(self, name: str, versions: Sequence[int]) -> list[int]:
        """Of ``versions`` of ``name``, those its log can still load (a VACUUM keeps only those).

        A version past the latest (a lineage of another lake of this name) is none; nor, on a
        local lake, one whose commit was removed by delta-rs's log cleanup (older than the log's
        retention, 30 days by default) or with no checkpoint at or before it to start from.
        """
        latest = int(self.table(name).version())
        wanted = [v for v in versions if v <= latest]
        if self.remote or not wanted:
            return wanted
        log_dir = self._log_dir(name)
        names = {p.name for p in log_dir.iterdir()}
        starts = sorted(
            int(n.split(".", 1)[0]) for n in names if ".checkpoint." in n and n.split(".", 1)[0].isdigit()
        )
        out = []
        for v in wanted:
            start = max((c for c in starts if c <= v), default=None)
            first = start + 1 if start is not None else 0
            if start is None and f"{0:020d}.json" not in names:
                continue
            if all(f"{w:020d}.json" in names for w in range(first, v + 1)):
                out.append(v)
        return out

    def cleanup_log(self, name: str, *, retain_hours: float = LOG_RETENTION_HOURS) -> list[str]:
        """Delete the log files of ``name`` older than ``retain_hours`` that no version still needs.

        Delta's own cleanup deletes every expired file below the newest checkpoint, so a version a
        learner checkpoint trained on (:meth:`pinned_versions`) stops loading once its commits are
        30 days old, even though a VACUUM kept its data files. Here the files kept start at the
        checkpoint the oldest pinned version loads from (the newest one below everything pinned
        and the latest version): a prefix of the log goes, never a gap, and the oldest file kept is
        a checkpoint, so every version from there on loads (delta-rs and Spark alike). Files go
        only below a checkpoint whose own commit is older than ``retain_hours``. First sets
        :data:`LOG_CLEANUP_OFF` on a table made without it (one commit), so no writer cleans up
        on its own. Local lakes only (``[]`` elsewhere).

        Returns:
            The names of the log files deleted, oldest first.
        """
        if self.remote or not self.exists(name):
            return []
        dt = self.table(name)
        if dt.metadata().configuration.get(LOG_CLEANUP_PROPERTY) != "false":
            with self.writing():
                try:
                    self.table(name).alter.set_table_properties(
                        dict(LOG_CLEANUP_OFF), raise_if_not_exists=False
                    )
                except DeltaError as exc:
                    raise LakeError(f"cannot turn the writers' log cleanup off on {name}: {exc}") from exc
            dt = self.table(name)
        log_dir = self._log_dir(name)
        files = {p: _log_version(p.name) for p in log_dir.iterdir()}
        checkpoints = sorted({v for p, v in files.items() if v is not None and ".checkpoint." in p.name})
        needed = [int(dt.version()), *self._loadable(name, self.pinned_versions(name))]
        floor = min(max((c for c in checkpoints if c <= v), default=0) for v in needed)
        cutoff = time.time() - retain_hours * 3600
        start = 0
        for c in reversed([c for c in checkpoints if 0 < c <= floor]):
            commit = log_dir / f"{c:020d}.json"
            anchor = commit if commit.exists() else log_dir / f"{c:020d}.checkpoint.parquet"
            with contextlib.suppress(OSError):
                if anchor.stat().st_mtime < cutoff:
                    start = c
                    break
        gone = sorted((p for p, v in files.items() if v is not None and v < start), key=lambda p: p.name)
        for p in gone:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        if gone:
            log.info("log of %s: %d files before version %d deleted", name, len(gone), start)
        return [p.name for p in gone]

    def vacuum(
        self,
        name: str,
        *,
        retain_hours: float = RETENTION_HOURS,
        allow_short_retention: bool = False,
        dry_run: bool = False,
    ) -> list[str]:
        """Delete the files of ``name`` that only versions older than ``retain_hours`` read (delta-rs).

        delta-rs's full VACUUM: files no version of the last ``retain_hours`` reads and older than
        that are deleted (so never a file a writer's commit in flight is about to name), and the
        versions learner checkpoints trained on keep theirs (:meth:`pinned_versions`, those the
        log can still load). It commits only when it deletes (a VACUUM START and END); with
        nothing due it lists the table's files and returns.

        Returns:
            The files deleted (with ``dry_run``, those that would be), relative to the table.

        Raises:
            LakeError: a retention under :data:`RETENTION_HOURS` without ``allow_short_retention``
                (files of versions a reader pins by number, e.g. the API's ``?version=``, could go).
        """
        if retain_hours < RETENTION_HOURS and not allow_short_retention:
            raise LakeError(
                f"a retention of {retain_hours:g} h is under Delta's safety bound of {RETENTION_HOURS:g} h: "
                "files of versions readers still pin could be deleted; stop the writers and allow it "
                "explicitly"
            )
        if not self.exists(name):
            return []
        keep = self._loadable(name, self.pinned_versions(name))

        def run(dt: DeltaTable, dry: bool) -> list[str]:
            # full: the files no version within the retention reads, listed from the table's
            # directory. The lite mode only sees files whose `remove` is still in the log, and a
            # checkpoint drops a `remove` once it is as old as the retention: exactly when its
            # file is due, so most would never be deleted.
            return self._relative(name, dt.vacuum(
                retention_hours=math.ceil(retain_hours), dry_run=dry, full=True,
                enforce_retention_duration=retain_hours >= RETENTION_HOURS, keep_versions=keep or None,
            ))  # fmt: skip

        with self.writing():
            try:
                # delta-rs lists a removed file again after it deleted it (until its tombstone
                # expires), and commits a VACUUM START and END for it each time: only files still
                # there count, and with none nothing is committed
                files = self._present(name, run(self.table(name), True))
                if files and not dry_run:
                    done = set(run(self.table(name), False))
                    files = [f for f in files if f in done]
            except DeltaError as exc:  # (its commit lost to a writer's: the files are deleted next time)
                raise LakeError(f"vacuum of {name} did not finish: {exc}") from exc
        if files and not dry_run:
            log.info("vacuumed %s: %d files deleted (kept %d pinned versions)", name, len(files), len(keep))
        return list(files)

    def _holds(self, name: str, txns: Mapping[str, int]) -> bool:
        have = self.txn_versions(name, txns)
        return all((h := have[app]) is not None and h >= version for app, version in txns.items())

    def _commit(
        self,
        name: str,
        data: pa.Table,
        keys: Sequence[str],
        mode: WriteMode,
        props: CommitProperties,
        episodes: Sequence[str] = (),
        replacing: Sequence[tuple[Any, ...]] = (),
    ) -> None:
        """One commit: ``data`` merged by ``keys`` per ``mode``, reading only the files it touches.

        The rows the commit removes (with ``replace_episodes``, the stored rows of ``episodes``
        that ``data`` no longer holds; the rows ``replacing`` names that ``data`` does not hold)
        join the merge's source as tombstones, matched by key and deleted. A MERGE with a ``not
        matched by source`` clause cannot prune (delta-rs turns its file filter off for one) and
        scans the whole table; here every clause matches by key, and the merge predicate bounds
        the target by the source's ranges of each key column (:func:`key_predicate`) and
        partitions, so the files read are those whose statistics can hold the batch's keys.
        """
        from deltalake import write_deltalake

        dt = self.table(name)
        before = dt.version()
        parts = PARTITION_COLUMNS.get(name, ())
        cols = [*keys, *(p for p in parts if p not in keys)]
        named = {tuple(k) for k in replacing}
        stored = None
        if mode == "replace_episodes" and episodes:
            # chunked: DataFusion's SQL path overflows its stack on an IN list of ~25k values (a segfault)
            stored = self.read_episodes_rows(name, episodes, version=before, columns=cols)
        # keys compared in Arrow (a batch's 100k rows as Python tuples cost 0.1 s a table)
        stale = _keys_missing(named, data, cols)
        if stored is not None:
            stale |= _keys_missing(stored, data, cols)
        if data.num_rows or stale:
            if mode == "insert_new" and named:  # a replaced row's new copy under its key takes its place
                replaced = _rows_keyed(data, named, cols)
                ops = ["upsert" if i in replaced else "insert" for i in range(data.num_rows)]
            elif mode == "insert_new":
                ops = ["insert"] * data.num_rows
            else:
                ops = ["upsert"] * data.num_rows
            loose = pa.schema([f.with_nullable(True) for f in data.schema])
            tomb = {c: [k[i] for k in sorted(stale)] for i, c in enumerate(cols)}
            tombs = pa.Table.from_pydict(
                {f.name: tomb.get(f.name, [None] * len(stale)) for f in loose}, schema=loose
            )
            source = pa.concat_tables([data.cast(loose), tombs]).append_column(
                "_trajlake_op", pa.array(ops + ["delete"] * len(stale), pa.string())
            )
            # every key column bounds the target: a lead key of one value (quarantine's topic)
            # prunes nothing, the next one (its offsets) does
            bounds = [key_predicate(c, source.column(c), alias="t.", exact=False) for c in keys]
            predicate = " AND ".join([*bounds, *(f"t.{c} = s.{c}" for c in cols)])
            metrics = (
                dt.merge(
                    source=source,
                    predicate=predicate,
                    source_alias="s",
                    target_alias="t",
                    commit_properties=props,
                )  # fmt: skip
                .when_matched_delete(predicate="s._trajlake_op = 'delete'")
                .when_matched_update(
                    updates={f.name: f"s.{f.name}" for f in data.schema},
                    predicate="s._trajlake_op = 'upsert'",
                )
                .when_not_matched_insert(
                    updates={f.name: f"s.{f.name}" for f in data.schema},
                    predicate="s._trajlake_op <> 'delete'",
                )
                .execute()
            )
            if SCAN_LOG_ENV in os.environ:
                _log_scan(name, "merge", int(metrics.get("num_target_files_scanned", 0)),
                          skipped=int(metrics.get("num_target_files_skipped_during_scan", 0)),
                          copied=int(metrics.get("num_target_rows_copied", 0)))  # fmt: skip
        # A MERGE that changes nothing commits nothing, and an empty batch has no
        # rows to merge: the offsets must still be recorded, with an empty commit.
        if self.table(name).version() == before:
            write_deltalake(
                self.table(name),
                data.slice(0, 0),
                mode="append",
                commit_properties=props,
                storage_options=self.storage_options,
            )


def _file_target(dt: DeltaTable) -> int:
    """The table's ``delta.targetFileSize``; :data:`COMPACT_TARGET_BYTES` where it sets none."""
    got = dt.metadata().configuration.get(FILE_TARGET_PROPERTY)
    return int(got) if got and got.isdigit() and int(got) > 0 else COMPACT_TARGET_BYTES


def _log_version(file_name: str) -> int | None:
    """The version a ``_delta_log`` file is of; None for others (``_last_checkpoint``, temp files).

    Versions are zero-padded to 20 digits: ``…0042.json``, ``…0042.checkpoint.parquet``, ``…0042.crc``.
    """
    head = file_name.split(".", 1)[0]
    return int(head) if len(head) == 20 and head.isdigit() and "." in file_name else None


SCAN_LOG_ENV = "TRAJLAKE_SCAN_LOG"
"""Set to a file path: every read and merge appends ``{table, op, files}`` there, the files it
opened as DataFusion's and delta-rs's own metrics count them (``files_opened`` of an ``EXPLAIN
ANALYZE`` of the same query, ``num_target_files_scanned`` of a merge). For benchmarks: each
read then runs twice."""


def _log_scan(table: str, op: str, files: int, **more: int) -> None:
    line = json.dumps({"table": table, "op": op, "files": files, "pid": os.getpid(), **more}) + "\n"
    fd = os.open(os.environ[SCAN_LOG_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())  # one short append: lines of concurrent writers do not mix
    finally:
        os.close(fd)


def _files_opened(qb: Any, sql: str) -> int:
    """Files the query opens, from DataFusion's metrics (its scans' ``files_opened``)."""
    import re

    plan = " ".join(
        str(v) for row in pa.table(qb.execute(f"EXPLAIN ANALYZE {sql}")).to_pylist() for v in row.values()
    )
    return sum(int(n) for n in re.findall(r"\bfiles_opened=(\d+)", plan))


def _key_tuples(table: pa.Table, cols: Sequence[str]) -> list[tuple[Any, ...]]:
    """The rows of ``table`` as tuples of ``cols``."""
    return list(zip(*(table.column(c).to_pylist() for c in cols), strict=True)) if table.num_rows else []


_JOIN_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)


class _NullKey(Exception):
    """A key column holds a null: Arrow's join never matches it, Python's tuples do."""


def _no_nulls(table: pa.Table, cols: Sequence[str]) -> pa.Table:
    if any(table.column(c).null_count for c in cols):
        raise _NullKey
    return table


def _keys_table(keys: Iterable[tuple[Any, ...]], like: pa.Table, cols: Sequence[str]) -> pa.Table:
    """Key tuples as a table of ``cols``, typed as ``like``'s columns."""
    rows = list(keys)
    # inferred, then cast safely: a value of another kind (1.5 for an integer key, a datetime for
    # a date) fails to cast (and is compared in Python) instead of becoming an equal key
    return pa.table(
        {c: pa.array([k[i] for k in rows]).cast(like.schema.field(c).type) for i, c in enumerate(cols)}
    )


def _same_keys(table: pa.Table, like: pa.Table, cols: Sequence[str]) -> pa.Table:
    keys = table.select(list(cols))
    want = pa.schema([like.schema.field(c) for c in cols])
    return keys if keys.schema.equals(want) else keys.cast(want)


def _keys_missing(
    keys: pa.Table | set[tuple[Any, ...]], data: pa.Table, cols: Sequence[str]
) -> set[tuple[Any, ...]]:
    """The distinct keys ``cols`` of ``keys`` (a table's rows, or tuples) that no row of ``data`` has."""
    if not len(keys):
        return set()
    try:
        table = keys if isinstance(keys, pa.Table) else _keys_table(keys, data, cols)
        if not data.num_rows:
            return set(_key_tuples(table, cols))
        left = _no_nulls(_same_keys(table, data, cols), cols)
        right = _no_nulls(_same_keys(data, data, cols), cols)
        missing = left.join(right, keys=list(cols), join_type="left anti")
    except (*_JOIN_ERRORS, _NullKey):  # (a key type Arrow's join does not take: compared in Python)
        tuples = set(_key_tuples(keys, cols)) if isinstance(keys, pa.Table) else keys
        return tuples - set(_key_tuples(data, cols))
    return set(_key_tuples(missing, cols))


def _rows_keyed(data: pa.Table, keys: set[tuple[Any, ...]], cols: Sequence[str]) -> set[int]:
    """Indices of ``data``'s rows whose ``cols`` are one of ``keys``."""
    try:
        rows = pa.array(range(data.num_rows), pa.int64())
        indexed = _no_nulls(_same_keys(data, data, cols), cols).append_column("__row", rows)
        wanted = _no_nulls(_same_keys(_keys_table(keys, data, cols), data, cols), cols)
        hit = indexed.join(wanted, keys=list(cols), join_type="left semi")
    except (*_JOIN_ERRORS, _NullKey):
        return {i for i, k in enumerate(_key_tuples(data, cols)) if k in keys}
    return set(hit.column("__row").to_pylist())


def key_predicate(column: str, values: Iterable[Any], *, alias: str = "", exact: bool = True) -> str:
    """A predicate selecting rows whose ``column`` is one of ``values``, that prunes files.

    DataFusion prunes files and row groups by their min/max statistics for ranges, and for an
    ``IN`` list only up to :data:`IN_PRUNE_MAX` values: past that an ``IN`` list reads every
    file. So the values, sorted, are cut into at most :data:`KEY_RANGES_MAX` ranges at their
    widest gaps (strings: where neighbours share the shortest prefix, so a straggler of an old
    UUIDv7 episode gets a range of its own instead of stretching one over the table), and the
    ``IN`` list is added (``exact``) to select exactly. ``alias``: a table alias such as ``t.``.
    """
    if isinstance(values, pa.Array | pa.ChunkedArray):  # distinct and sorted by Arrow (a batch's 100k keys)
        import pyarrow.compute as pc

        try:
            vals = pc.unique(values).drop_null().sort().to_pylist()
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError):  # (a type Arrow does not sort)
            vals = sorted({v for v in values.to_pylist() if v is not None})
    else:
        vals = sorted(set(values))
    if not vals:
        return "FALSE"
    col = f"{alias}{column}"
    listed = f"{col} IN (" + ", ".join(sql_literal(v) for v in vals) + ")"
    if len(vals) <= IN_PRUNE_MAX:
        return listed
    ranges = " OR ".join(
        f"{col} = {sql_literal(lo)}"
        if lo == hi
        else f"({col} >= {sql_literal(lo)} AND {col} <= {sql_literal(hi)})"
        for lo, hi in _key_ranges(vals, KEY_RANGES_MAX)
    )
    return f"({ranges}) AND {listed}" if exact else f"({ranges})"


def _key_ranges(vals: Sequence[Any], most: int) -> list[tuple[Any, Any]]:
    """Sorted ``vals`` as at most ``most`` runs ``(first, last)``, cut at their widest gaps."""

    def gap(a: Any, b: Any) -> float:
        if isinstance(a, str) and isinstance(b, str):
            return -float(len(os.path.commonprefix([a, b])))
        return float(b - a)

    gaps = _prefix_gaps(vals)
    if gaps is None:
        gaps = [gap(vals[i - 1], vals[i]) for i in range(1, len(vals))]
    score = dict(enumerate(gaps, start=1))
    narrowest = min(score.values(), default=0.0)
    wide = sorted((i for i in score if score[i] > narrowest), key=lambda i: score[i], reverse=True)
    cuts = sorted(wide[: most - 1])  # only gaps wider than neighbours' usual distance
    starts = [0, *cuts]
    ends = [*cuts, len(vals)]
    return [(vals[a], vals[b - 1]) for a, b in zip(starts, ends, strict=True)]


def rows_in_ranges(
    dt: DeltaTable, column: str, ranges: Sequence[tuple[Any, Any]], measure: str = "num_records"
) -> int:
    """Rows of the files of ``dt`` whose ``column`` statistics overlap any of ``ranges`` (from the log).

    ``measure="size_bytes"`` sums their bytes instead. A file without statistics for the column
    counts whole; a table without them at all, as everything.
    """
    import pyarrow.compute as pc

    actions = pa.table(dt.get_add_actions(flatten=True))
    rows = actions.column(measure) if measure in actions.column_names else None
    lo_col, hi_col = f"min.{column}", f"max.{column}"
    if rows is None or lo_col not in actions.column_names or hi_col not in actions.column_names:
        return sys.maxsize
    lo, hi = actions.column(lo_col), actions.column(hi_col)
    unknown = pc.or_(pc.is_null(lo), pc.is_null(hi))
    hit = unknown
    for a, b in ranges:
        hit = pc.or_(hit, pc.and_(pc.less_equal(lo, b), pc.greater_equal(hi, a)))
    picked = pc.sum(pc.if_else(pc.fill_null(hit, True), pc.fill_null(rows, sys.maxsize // 4096), 0)).as_py()
    return int(picked or 0)


def _prefix_gaps(vals: Sequence[Any]) -> list[float] | None:
    """``-len(common prefix)`` of each neighbouring pair of ASCII strings, at once (else ``None``).

    What :func:`_key_ranges` asks of every pair of a batch's sorted keys (50,000 event ids: a
    third of a second one pair at a time).
    """
    if len(vals) < 2 or not all(isinstance(v, str) and "\0" not in v for v in vals):
        return None  # (a NUL would read as the padding of a shorter string)
    import numpy as np

    try:
        arr = np.array(vals, dtype="S")  # ASCII only: another character raises
    except UnicodeEncodeError:
        return None
    width = arr.dtype.itemsize
    if width == 0:
        return None
    m = arr.view(np.uint8).reshape(len(vals), width)
    diff = m[1:] != m[:-1]
    first = np.where(diff.any(axis=1), diff.argmax(axis=1), width)
    return [-float(x) for x in first.tolist()]


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` in ``schema``: its columns, in order, cast (a column added after it was written: nulls)."""
    if table.num_rows == 0:
        return pa.Table.from_pylist([], schema)
    for f in schema:
        if f.name not in table.column_names and f.nullable:
            table = table.append_column(f.name, pa.nulls(table.num_rows, f.type))
    return table.select(schema.names).cast(schema)


def sql_literal(value: Any) -> str:
    """``value`` as a SQL literal for delta-rs predicates and queries (a string quoted, quotes doubled)."""
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


def consistent_versions(
    lake: Lake, tables: Sequence[str], *, apps: Sequence[str] | None = None, max_back: int = 64
) -> dict[str, int]:
    """Versions of ``tables`` that hold the same Kafka offsets (or fewer): a consistent snapshot.

    One micro-batch commits every pipeline table with the same ``txn`` actions,
    one table after another; a reader that opens each table's latest version
    while a batch commits can see ``episodes`` from batch N beside ``rewards``
    from batch N-1. This picks, for each table, the newest version that holds
    no offset beyond those of the least advanced table (walking back at most
    ``max_back`` versions): every row a reader joins from the others is there.

    Args:
        lake: the lake.
        tables: the tables read together.
        apps: the ``txn`` app ids to compare (default: those of the tables' recent commits).
        max_back: most versions walked back per table.

    Raises:
        LakeError: the tables hold no common offsets within ``max_back`` versions.
    """
    handles = {t: lake.table(t) for t in tables}
    if apps is None:
        from lake.check import recent_app_ids

        found: set[str] = set()
        for t in tables:
            found |= recent_app_ids(lake, t)
        apps = sorted(found)
    if not apps:
        return {t: int(h.version()) for t, h in handles.items()}

    def position(h: DeltaTable) -> tuple[int, ...]:
        return tuple(-1 if (v := h.transaction_version(a)) is None else int(v) for a in apps)

    def within(p: tuple[int, ...], target: tuple[int, ...]) -> bool:
        return all(a <= b for a, b in zip(p, target, strict=True))

    positions = {t: position(h) for t, h in handles.items()}
    target = tuple(min(p[i] for p in positions.values()) for i in range(len(apps)))
    out: dict[str, int] = {}
    for t, h in handles.items():
        version = int(h.version())
        steps = 0
        # the newest version holding no offset beyond the least advanced table's (a table that
        # skipped a batch it already held has no version at exactly those offsets)
        while not within(positions[t], target):
            steps += 1
            if version == 0 or steps > max_back:
                at = dict(zip(apps, target, strict=True))
                raise LakeError(
                    f"tables {', '.join(tables)} of the lake at {lake.root} hold no common Kafka offsets "
                    f"({t} is at none of {at} in its last {max_back} versions)",
                    fix=fixes.LAKE_CHECK,
                )
            version -= 1
            try:
                h.load_as_version(version)
            except DeltaError as exc:
                raise LakeError(
                    f"version {version} of table {t} cannot be loaded ({exc}); it may be vacuumed"
                ) from exc
            positions[t] = position(h)
        out[t] = version
    return out
