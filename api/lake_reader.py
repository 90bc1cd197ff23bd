"""Snapshots of the lake's tables for the API: cached per (table, Delta version).

A request names a table and, optionally, a Delta version. The reader answers
with an immutable :class:`Snapshot` (the Arrow table at that version), reading
through :class:`lake.Lake` only when that version is not cached yet. A
Delta version never changes once committed, so a cached snapshot is never
stale; what can change is which version is the latest, and that is checked on
every request (:meth:`LakeReader.latest`: a stat of the table's ``_delta_log``
directory on a local lake, else ``update_incremental`` on a held handle, which
reads only the commits that are new: about a millisecond, no data).

Tables whose rows are only ever needed a few at a time (``steps``: every event
of every episode) are not cached whole: :meth:`LakeReader.rows_where` reads
the rows matching one column value (the Delta files' statistics prune the
rest) and caches that small result per (table, version, value) instead.

Computations over a snapshot that several requests repeat (a sort, the judge
versions of the rewards table) are memoised beside it with
:meth:`LakeReader.derived`, in an LRU of their own.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from api.errors import LakeUnavailableError, VersionNotFoundError
from lake import Lake, LakeError, TableHandle, TableMissingError, sql_literal
from schemas.tables import TABLES

T = TypeVar("T")

SETTLE_S = 2.0
"""A ``_delta_log`` directory modified more recently than this is always re-read (coarse mtimes)."""


@dataclass(frozen=True)
class Snapshot:
    """One table of the lake at one Delta version."""

    name: str
    """The table."""
    version: int | None
    """Its Delta version; ``None`` when the table does not exist yet (``table`` is then empty)."""
    table: pa.Table
    """The rows, in the table's Arrow schema (:data:`schemas.tables.TABLES`)."""


@dataclass
class CacheStats:
    """What the reader's cache did since it started."""

    reads: int = 0
    """Reads of Delta data (whole snapshots and rows by value) from the lake."""
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    entries: int = 0
    bytes: int = 0


def _weight(value: Any) -> int:
    if isinstance(value, Snapshot):
        return int(value.table.nbytes)
    if isinstance(value, pa.Table | pa.Array | pa.ChunkedArray):
        return int(value.nbytes)
    return 1024  # small derived values: a flat estimate keeps the entry count honest


class _Lru:
    """A thread-safe LRU bounded by entries and by bytes, loading each key once."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._loading: dict[Hashable, threading.Lock] = {}
        self.stats = CacheStats()

    def get(self, key: Hashable, load: Callable[[], T]) -> T:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                self.stats.hits += 1
                return self._items[key][0]  # type: ignore[no-any-return]
            gate = self._loading.setdefault(key, threading.Lock())
        # One loader per key: concurrent requests for a version not cached yet
        # wait for the first read instead of all reading the same table.
        with gate:
            with self._lock:
                if key in self._items:
                    self._items.move_to_end(key)
                    self.stats.hits += 1
                    return self._items[key][0]  # type: ignore[no-any-return]
                self.stats.misses += 1
            try:
                value = load()
                self._put(key, value)  # before the gate goes, so no second loader slips in
            finally:
                with self._lock:
                    self._loading.pop(key, None)
            return value

    def peek(self, key: Hashable) -> Any:
        """The cached value of ``key`` or ``None``, without loading (counts as a hit when found)."""
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            self.stats.hits += 1
            return self._items[key][0]

    def _put(self, key: Hashable, value: Any) -> None:
        weight = _weight(value)
        with self._lock:
            if self.max_entries <= 0 or weight > self.max_bytes:
                return  # too big to keep: served once, not cached
            if key in self._items:
                self.stats.bytes -= self._items.pop(key)[1]
            self._items[key] = (value, weight)
            self.stats.bytes += weight
            while len(self._items) > self.max_entries or self.stats.bytes > self.max_bytes:
                _, (_, w) = self._items.popitem(last=False)
                self.stats.bytes -= w
                self.stats.evictions += 1
            self.stats.entries = len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.stats.entries = 0
            self.stats.bytes = 0


def _missing(exc: LakeError) -> bool:
    return isinstance(exc, TableMissingError)


class LakeReader:
    """Read-only, cached access to the tables of one lake.

    Three bounded LRUs, so that many small entries never evict the snapshots
    every request needs: whole snapshots (``cache_entries``, ``cache_bytes``),
    values derived from them (8 x the entries, half the bytes), and rows read
    by value (8 x the entries, a quarter of the bytes). ``cache_entries=0``
    turns caching off (every request reads the lake).

    Args:
        lake: the lake to read.
        cache_entries: most whole-table snapshots kept.
        cache_bytes: most bytes of Arrow data the snapshots keep (a larger one is served, not kept).
    """

    def __init__(self, lake: Lake, *, cache_entries: int = 32, cache_bytes: int = 1 << 30) -> None:
        self.lake = lake
        self._snapshots = _Lru(cache_entries, cache_bytes)
        self._derived = _Lru(8 * cache_entries, cache_bytes // 2)
        self._rows = _Lru(8 * cache_entries, cache_bytes // 4)
        self._reads = 0
        self._handles: dict[str, TableHandle] = {}
        self._stamps: dict[str, tuple[tuple[int, int], int]] = {}
        self._handle_locks = {name: threading.Lock() for name in TABLES}
        self.text_index: Any = None
        """The ``steps`` text index (:class:`api.text_index.TextIndex`) searches use; None: they scan."""

    @property
    def stats(self) -> CacheStats:
        """Reads from the lake, and hits, misses and size of the caches together."""
        out = CacheStats(reads=self._reads)
        for lru in (self._snapshots, self._derived, self._rows):
            for f in ("hits", "misses", "evictions", "entries", "bytes"):
                setattr(out, f, getattr(out, f) + getattr(lru.stats, f))
        return out

    def latest(self, name: str) -> int | None:
        """The table's current Delta version (``None``: the table does not exist yet).

        On a held handle, ``update_incremental`` reads only the commits that are
        new (about a millisecond). On a local lake even that is skipped while the
        table's ``_delta_log`` directory is unchanged: a commit adds a file there,
        which changes the directory's modification time. A directory modified
        within the last :data:`SETTLE_S` seconds is always checked in full, so
        a file system with coarse timestamps cannot hide a commit.

        Raises:
            LakeUnavailableError: the table exists but cannot be opened.
        """
        with self._handle_locks[name]:
            stamp = self._log_stamp(name)
            known = self._stamps.get(name)
            if stamp is not None and known is not None and known[0] == stamp:
                if time.time_ns() - stamp[0] > SETTLE_S * 1e9:
                    return known[1]
            handle = self._handles.get(name)
            try:
                if handle is None:
                    handle = self.lake.table(name)
                    self._handles[name] = handle
                else:
                    handle.update_incremental()
                version = int(handle.version())
            except LakeError as exc:
                if _missing(exc):
                    return None
                raise LakeUnavailableError(str(exc)) from exc
            except Exception as exc:  # delta-rs raises several types for a damaged log
                self._handles.pop(name, None)
                self._stamps.pop(name, None)
                raise LakeUnavailableError(f"cannot refresh table {name}: {exc}") from exc
            if stamp is not None:
                # The stamp was taken before the refresh: a commit landing in
                # between changes the next stamp, so it is never missed.
                self._stamps[name] = (stamp, version)
            return version

    def _log_stamp(self, name: str) -> tuple[int, int] | None:
        """(mtime ns, inode) of a local table's ``_delta_log`` directory; ``None`` elsewhere."""
        if "://" in self.lake.root:
            return None  # object stores: no cheap, reliable directory stamp
        try:
            st = os.stat(os.path.join(self.lake.uri(name), "_delta_log"))
        except OSError:
            return None
        return st.st_mtime_ns, st.st_ino

    def resolve(self, name: str, version: int | None) -> int | None:
        """The version a request for ``version`` of ``name`` reads (``None``: latest).

        Returns:
            The Delta version, or ``None`` when the table does not exist and no
            version was asked for.

        Raises:
            VersionNotFoundError: ``version`` is beyond the table's latest, or the
                table does not exist yet.
        """
        latest = self.latest(name)
        if version is None:
            return latest
        if latest is None:
            raise VersionNotFoundError(f"table {name} does not exist yet, so it has no version {version}")
        if version > latest:
            raise VersionNotFoundError(
                f"table {name} has no version {version}: its latest version is {latest}"
            )
        return version

    def snapshot(self, name: str, version: int | None = None) -> Snapshot:
        """The whole table ``name`` at ``version`` (default: latest), from the cache when possible.

        Raises:
            VersionNotFoundError: no such version (see :meth:`resolve`).
            LakeUnavailableError: the table could not be read.
        """
        resolved = self.resolve(name, version)
        if resolved is None:
            return Snapshot(name, None, TABLES[name].empty_table())
        return self._snapshots.get((name, resolved), lambda: self._read(name, resolved))

    def rows_where(self, name: str, column: str, value: str, version: int | None = None) -> Snapshot:
        """The rows of ``name`` at ``version`` whose ``column`` equals ``value``.

        Served from the whole cached snapshot when there is one; otherwise read
        with a predicate (the Delta file statistics skip files that cannot match)
        and cached on its own.
        """
        resolved = self.resolve(name, version)
        if resolved is None:
            return Snapshot(name, None, TABLES[name].empty_table())
        whole = self._snapshots.peek((name, resolved))
        if isinstance(whole, Snapshot):
            return Snapshot(name, resolved, whole.table.filter(pc.equal(whole.table[column], value)))
        return self._rows.get(
            (name, resolved, column, value),
            lambda: self._read(name, resolved, where=f"{column} = {sql_literal(value)}"),
        )

    def derived(self, snap: Snapshot, purpose: Hashable, compute: Callable[[pa.Table], T]) -> T:
        """``compute(snap.table)``, memoised per (table, version, ``purpose``).

        ``purpose`` must name everything ``compute`` depends on besides the snapshot.
        """
        if snap.version is None:
            return compute(snap.table)
        return self._derived.get((snap.name, snap.version, purpose), lambda: compute(snap.table))

    def row_count(self, name: str, version: int) -> int:
        """Rows of ``name`` at ``version``, from the Delta log's file statistics (cached)."""

        def count() -> int:
            try:
                return self.lake.row_count(name, version)
            except LakeError as exc:
                raise LakeUnavailableError(f"version {version} of {name} cannot be read: {exc}") from exc

        return self._derived.get((name, version, "row_count"), count)

    def problems(self, name: str) -> list[str]:
        """Damage in ``name``'s log or files right now (not cached: a deleted file changes no version)."""
        from lake.check import check_table

        try:
            self.latest(name)
        except LakeUnavailableError as exc:
            return [str(exc)]
        return check_table(self.lake, name, footers=False).problems

    def clear(self) -> None:
        """Drop everything cached (the next request reads from the lake again)."""
        for lru in (self._snapshots, self._derived, self._rows):
            lru.clear()

    def _read(self, name: str, version: int, where: str | None = None) -> Snapshot:
        self._reads += 1  # a plain counter: a lost increment under a race only skews a statistic
        try:
            table = self.lake.read(name, version=version, where=where)
        except LakeError as exc:
            # The version exists (resolve checked it) but its files or log are
            # gone or unreadable (a vacuum, a cleaned log, a broken store).
            raise LakeUnavailableError(f"version {version} of table {name} cannot be read: {exc}") from exc
        return Snapshot(name, version, table.combine_chunks())


def versions_of(*snapshots: Snapshot) -> dict[str, int | None]:
    """``{table: version}`` of the snapshots an answer was computed from."""
    return {s.name: s.version for s in snapshots}
