"""The durable local spool: an append-only log of events not yet acknowledged by Kafka.

An event is appended here (copied into a shared memory map of the segment file,
that is into the OS page cache; optionally msynced) before it is handed to
Kafka, and forgotten only once Kafka acknowledged it. A worker killed with
SIGKILL, or a broker that is down, therefore loses nothing: whatever is still in
the spool is sent again on restart or when the broker returns. Duplicates after
recovery are expected here; ``event_id`` removes them downstream.

Layout: ``<dir>/LOCK`` (held with ``flock`` by the owning process) and segment
files ``<dir>/seg-<n>.log``, each preallocated (``posix_fallocate``, so a full
disk is an error at allocation rather than a SIGBUS on write) and memory-mapped:
an append is a memory copy, no system call, and survives the process being
killed. A record is ``<body_len:u32><crc32:u32><topic_len:u16><key_len:u16>``
followed by ``topic + key + value``. A torn record at the end of a segment (the
process died mid-write) fails its length or CRC check, and the zeroed
preallocated tail reads as a zero length; both end the segment and are ignored:
an ``append`` that did not return never recorded anything.

Acknowledgements are counted per segment; a segment is deleted once it is sealed
(full, or closed) and every record in it is acknowledged.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ingest.errors import SpoolError, SpoolFullError, SpoolLockedError

_HEADER = struct.Struct("<IIHH")
FsyncPolicy = Literal["never", "interval", "always"]


@dataclass(frozen=True, slots=True)
class SpoolRecord:
    """One record read back from a segment."""

    segment: Segment
    """The segment holding it."""
    position: int
    """Byte offset of the record's header in the segment file."""
    topic: str
    """Destination topic."""
    key: bytes
    """Kafka key."""
    value: bytes
    """Kafka value (the event's wire bytes)."""


class Segment:
    """One segment file and its acknowledgement count."""

    __slots__ = ("path", "number", "appended", "acked", "size", "sealed", "deleted", "fd", "map", "capacity")

    def __init__(self, path: Path, number: int) -> None:
        self.path = path
        self.number = number
        self.appended = 0
        self.acked = 0
        self.size = 0
        self.sealed = False
        self.deleted = False
        self.fd: int | None = None
        self.map: mmap.mmap | None = None
        self.capacity = 0

    def __repr__(self) -> str:
        return f"Segment({self.path.name}, appended={self.appended}, acked={self.acked})"


def encode_record(topic: str, key: bytes, value: bytes) -> bytes:
    """Frame one record: header + topic + key + value."""
    t = topic.encode("utf-8")
    crc = zlib.crc32(value, zlib.crc32(key, zlib.crc32(t)))
    return _HEADER.pack(len(t) + len(key) + len(value), crc, len(t), len(key)) + t + key + value


def read_records(path: Path) -> Iterator[tuple[int, str, bytes, bytes]]:
    """Yield ``(position, topic, key, value)`` for every intact record of a file.

    Stops at the first torn or corrupt record (the tail a crash left behind).
    """
    records, _ = parse_records(path.read_bytes())
    start = 0
    for end, topic, key, value in records:
        yield start, topic, key, value
        start = end


def segment_numbers(directory: Path) -> list[int]:
    """Numbers of the segment files in ``directory``, ascending."""
    out = []
    for p in directory.glob("seg-*.log"):
        try:
            out.append(int(p.stem.split("-")[1]))
        except (IndexError, ValueError):
            continue
    return sorted(out)


def segment_path(directory: Path, number: int) -> Path:
    """Path of segment ``number`` of the spool in ``directory``."""
    return directory / f"seg-{number:012d}.log"


def lock_file(fd: int, timeout_s: float) -> bool:
    """Take an exclusive ``flock`` on ``fd``, waiting up to ``timeout_s``; False if not."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)


def parse_records(data: bytes | memoryview, base: int = 0) -> tuple[list[tuple[int, str, bytes, bytes]], int]:
    """Parse the complete, intact records at the start of ``data``.

    Returns:
        ``([(end_position, topic, key, value), ...], consumed)`` where positions
        are ``base`` + offsets in ``data`` and ``consumed`` is where parsing stopped
        (a zero header, a record not fully in ``data``, or a CRC mismatch).
    """
    out = []
    pos = 0
    end = len(data)
    while pos + _HEADER.size <= end:
        body_len, crc, topic_len, key_len = _HEADER.unpack_from(data, pos)
        start = pos + _HEADER.size
        stop = start + body_len
        if body_len == 0 or stop > end or topic_len + key_len > body_len:
            break
        body = bytes(data[start:stop])
        if zlib.crc32(body) != crc:
            break
        out.append(
            (
                base + stop,
                body[:topic_len].decode("utf-8"),
                body[topic_len : topic_len + key_len],
                body[topic_len + key_len :],
            )
        )
        pos = stop
    return out, pos


def lock_is_free(path: Path) -> bool:
    """Whether no live process holds the ``flock`` on ``path`` (probes without keeping it)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing releases a lock we took
    return True


class Spool:
    """An append-only, size-bounded, crash-safe spool of unacknowledged records.

    Args:
        directory: the spool's own directory (one per worker).
        segment_bytes: a segment is sealed and a new one started past this size.
        max_bytes: bound on the spool's size on disk; see ``full_timeout_s``.
        full_timeout_s: how long ``append`` blocks waiting for acknowledgements
            when the spool is full before raising :class:`SpoolFullError`
            (0 raises at once). Nothing is ever dropped.
        fsync: ``never`` (written to the OS: survives a killed process),
            ``interval`` (also fsynced every ``fsync_interval_s``) or ``always``
            (fsynced on every append: survives power loss, slow).
        fsync_interval_s: period of the ``interval`` policy.
        lock_timeout_s: how long to wait for the directory's lock (a shipper
            finishing off a dead worker's spool holds it for a moment).

    Raises:
        SpoolLockedError: another live process owns ``directory``.
    """

    def __init__(
        self,
        directory: Path,
        *,
        segment_bytes: int = 8 << 20,
        max_bytes: int = 1 << 30,
        full_timeout_s: float = 30.0,
        fsync: FsyncPolicy = "never",
        fsync_interval_s: float = 0.2,
        lock_timeout_s: float = 5.0,
    ) -> None:
        if segment_bytes <= 0 or max_bytes < segment_bytes:
            raise SpoolError("need 0 < segment_bytes <= max_bytes")
        self.directory = Path(directory)
        self.segment_bytes = segment_bytes
        self.max_bytes = max_bytes
        self.full_timeout_s = full_timeout_s
        self.fsync = fsync
        self.fsync_interval_s = fsync_interval_s
        self._cond = threading.Condition(threading.Lock())
        self._closed = False
        self._last_fsync = time.monotonic()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._lock_fd = os.open(self.directory / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise SpoolError(f"cannot open spool at {self.directory}: {exc}") from exc
        if not lock_file(self._lock_fd, lock_timeout_s):
            os.close(self._lock_fd)
            raise SpoolLockedError(f"spool {self.directory} is owned by another live process")
        # Segments left behind by an earlier process: recovered, never appended to.
        self._recovered: list[Segment] = []
        numbers = segment_numbers(self.directory)
        for n in numbers:
            seg = Segment(self._segment_path(n), n)
            seg.sealed = True
            seg.size = seg.path.stat().st_size
            self._recovered.append(seg)
        # Segment numbers never go back, even once every segment is gone: a
        # shipper's progress refers to them.
        self._next_path = self.directory / "NEXT"
        try:
            persisted = int(self._next_path.read_text() or 0)
        except (OSError, ValueError):
            persisted = 0
        self._next_number = max(persisted, (numbers[-1] + 1) if numbers else 0)
        self._disk_bytes = sum(s.size for s in self._recovered)
        self._active: Segment = self._open_segment()
        self._live: set[Segment] = set(self._recovered) | {self._active}

    # ------------------------------------------------------------- internals

    def _segment_path(self, n: int) -> Path:
        return segment_path(self.directory, n)

    def _open_segment(self, min_capacity: int = 0) -> Segment:
        seg = Segment(self._segment_path(self._next_number), self._next_number)
        self._next_number += 1
        tmp = self._next_path.with_suffix(".tmp")
        tmp.write_text(str(self._next_number))
        tmp.replace(self._next_path)
        capacity = max(self.segment_bytes, min_capacity)
        capacity += (-capacity) % mmap.PAGESIZE
        try:
            seg.fd = os.open(seg.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            os.posix_fallocate(seg.fd, 0, capacity)
            # MAP_POPULATE faults the pages in now, not one by one on the append path.
            seg.map = mmap.mmap(
                seg.fd, capacity, mmap.MAP_SHARED | mmap.MAP_POPULATE, mmap.PROT_READ | mmap.PROT_WRITE
            )
        except OSError as exc:
            if seg.fd is not None:
                os.close(seg.fd)
                seg.path.unlink(missing_ok=True)
            raise SpoolError(f"cannot allocate spool segment {seg.path}: {exc}") from exc
        seg.capacity = capacity
        return seg

    def _seal(self, seg: Segment) -> None:
        if seg.map is not None:
            if self.fsync != "never":
                seg.map.flush()
            seg.map.close()
            seg.map = None
        if seg.fd is not None:
            # Give back the preallocated tail; recovery needs only the records.
            os.ftruncate(seg.fd, seg.size)
            os.close(seg.fd)
            seg.fd = None
        seg.sealed = True
        self._maybe_delete(seg)

    def _maybe_delete(self, seg: Segment) -> None:
        # Caller holds the condition's lock.
        if seg.sealed and not seg.deleted and seg.acked >= seg.appended:
            try:
                seg.path.unlink()
            except FileNotFoundError:
                pass
            seg.deleted = True
            self._disk_bytes -= seg.size
            self._live.discard(seg)
            self._cond.notify_all()

    # ------------------------------------------------------------- public API

    def recover(self) -> list[SpoolRecord]:
        """The intact records of segments an earlier process left unacknowledged.

        Each returned record must be acknowledged with :meth:`ack` once delivered;
        its segment is deleted when all of them are. A recovered segment with no
        intact record is deleted at once.
        """
        out: list[SpoolRecord] = []
        with self._cond:
            for seg in self._recovered:
                records = list(read_records(seg.path))
                seg.appended = len(records)
                for pos, topic, key, value in records:
                    out.append(SpoolRecord(seg, pos, topic, key, value))
                self._maybe_delete(seg)
            self._recovered = []
        return out

    def append(self, topic: str, key: bytes, value: bytes) -> tuple[Segment, int]:
        """Durably append one record; return its ``(segment, position)`` ticket.

        Raises:
            SpoolFullError: the spool stayed over ``max_bytes`` for ``full_timeout_s``.
            SpoolError: the spool is closed or the disk write failed.
        """
        frame = encode_record(topic, key, value)
        size = len(frame)
        with self._cond:
            if self._closed:
                raise SpoolError("spool is closed")
            if self._disk_bytes + size > self.max_bytes:
                deadline = time.monotonic() + self.full_timeout_s
                while self._disk_bytes + size > self.max_bytes:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise SpoolFullError(
                            f"spool {self.directory} is full ({self._disk_bytes} of "
                            f"{self.max_bytes} bytes unacknowledged for {self.full_timeout_s}s); "
                            "is the broker reachable?"
                        )
                    self._cond.wait(left)
            seg = self._active
            if seg.size + size > seg.capacity:
                self._seal(seg)
                seg = self._active = self._open_segment(size)
                self._live.add(seg)
            position = seg.size
            mm = seg.map
            assert mm is not None
            mm[position : position + size] = frame
            if self.fsync == "always":
                self._msync(mm, position, size)
            elif self.fsync == "interval":
                now = time.monotonic()
                if now - self._last_fsync >= self.fsync_interval_s:
                    mm.flush()
                    self._last_fsync = now
            seg.size = position + size
            seg.appended += 1
            self._disk_bytes += size
        return seg, position

    def ack_through(self, segment_number: int, count: int) -> None:
        """Acknowledge every record before the ``count``-th of segment ``segment_number``.

        Used with a shipper, which reports its progress as a position in the
        spool: all records of earlier segments, and the first ``count`` of
        this one, are acknowledged.
        """
        with self._cond:
            for seg in list(self._live):
                if seg.number < segment_number:
                    seg.acked = max(seg.acked, seg.appended)
                elif seg.number == segment_number:
                    seg.acked = max(seg.acked, min(count, seg.appended))
                else:
                    continue
                if seg.sealed:
                    self._maybe_delete(seg)
            self._cond.notify_all()

    @staticmethod
    def _msync(mm: mmap.mmap, position: int, size: int) -> None:
        start = position - position % mmap.PAGESIZE
        mm.flush(start, position + size - start)

    def ack(self, segment: Segment, count: int = 1) -> None:
        """Mark ``count`` records of ``segment`` acknowledged (safe from any thread)."""
        with self._cond:
            segment.acked += count
            if segment.sealed:
                self._maybe_delete(segment)

    def read(self, segment: Segment, position: int) -> SpoolRecord:
        """Read back the record at ``position`` of ``segment`` (for redelivery)."""
        with self._cond:
            mm = segment.map
            if mm is not None:
                body_len, crc, topic_len, key_len = _HEADER.unpack_from(mm, position)
                start = position + _HEADER.size
                body = mm[start : start + body_len]
            else:
                with open(segment.path, "rb") as fh:
                    fh.seek(position)
                    body_len, crc, topic_len, key_len = _HEADER.unpack(fh.read(_HEADER.size))
                    body = fh.read(body_len)
        if len(body) != body_len or zlib.crc32(body) != crc:
            raise SpoolError(f"corrupt spool record at {segment.path}:{position}")
        return SpoolRecord(
            segment,
            position,
            body[:topic_len].decode("utf-8"),
            body[topic_len : topic_len + key_len],
            body[topic_len + key_len :],
        )

    @property
    def pending(self) -> int:
        """Records appended (or recovered) and not yet acknowledged."""
        with self._cond:
            return sum(s.appended - s.acked for s in self._live)

    @property
    def disk_bytes(self) -> int:
        """Bytes the spool occupies on disk."""
        return self._disk_bytes

    def wait_drained(self, timeout: float | None) -> bool:
        """Block until every record is acknowledged; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while any(s.appended > s.acked for s in self._live):
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(0.05 if left is None else min(left, 0.05))
        return True

    def close(self) -> None:
        """Seal the active segment (deleted if fully acknowledged) and release the lock.

        Unacknowledged records stay on disk for the next owner to recover.
        """
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._seal(self._active)
        os.close(self._lock_fd)
