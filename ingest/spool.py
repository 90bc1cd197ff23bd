"""The durable local spool: an append-only log of events not yet acknowledged by Kafka.

An event is appended here (copied into a shared memory map of the segment file,
that is into the OS page cache; optionally msynced) before it is handed to
Kafka, and forgotten only once Kafka acknowledged it. A worker killed with
SIGKILL, or a broker that is down, therefore loses nothing: whatever is still in
the spool is sent again on restart or when the broker returns. Duplicates after
recovery are expected here; ``event_id`` removes them downstream.

Layout: ``<dir>/LOCK`` (held with ``flock`` by the owning process) and segment
files ``<dir>/seg-<n>.log``, each preallocated (``posix_fallocate``, so a full
disk is an error when a segment is opened, never a SIGBUS on write) and
memory-mapped: an append is a memory copy, no system call, and survives the
process being killed. A segment's size follows the spool's bound (a quarter of
``max_bytes``, at most ``segment_bytes``), so a small spool rotates; a record
larger than a segment gets a segment of its own.

**Frames.** Every byte that matters is checked. A record is the frame
``MAGIC(4) crc32c(4) body_len(u32) topic_len(u16) key_len(u16) topic key value``:
the CRC (Castagnoli) covers the three lengths and the whole body, and the
4-byte magic is a sync marker. A reader that meets bytes that are not a valid
frame (a flipped bit, a zeroed page, a truncated record) looks for the next
magic that starts a valid frame, keeps every intact record after the damage,
and reports the damaged byte range (:class:`FrameScan`); the spool copies those
bytes to ``<dir>/quarantine/`` with a line in its ``index.jsonl`` before the
segment can ever be deleted (:func:`quarantine`). A sealed segment ends with a
``SEAL`` frame (the count of its records), so damage at the end of a sealed
segment is told apart from the torn tail a crash leaves in the segment that was
being written (an append that never returned: nothing acknowledged is in it).

Acknowledgements are counted per segment; a segment is deleted once it is sealed
(full, or closed) and every record in it is acknowledged.

Limits: a value is at most :data:`MAX_VALUE_BYTES` (16 MiB; the broker and the
producers are configured to carry it), a topic :data:`MAX_TOPIC_BYTES`, a key
:data:`MAX_KEY_BYTES`. ``append`` refuses anything larger with
:class:`RecordTooLargeError` before anything is recorded.
"""

from __future__ import annotations

import datetime as dt
import errno
import fcntl
import json
import mmap
import os
import shutil
import struct
import threading
import time
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from crc32c import crc32c

from ingest import metrics
from ingest.errors import (
    RecordTooLargeError,
    SpoolDiskFullError,
    SpoolError,
    SpoolFullError,
    SpoolLockedError,
)
from schemas import fixes

MAGIC = b"\xd7TLr"
"""Starts every frame; a reader re-synchronises on it after damage."""
_HEADER = struct.Struct("<4sIIHH")
HEADER_SIZE = _HEADER.size
_LENGTHS = struct.Struct("<IHH")
MAX_VALUE_BYTES = 16 << 20
"""Largest record value (an event's wire bytes) the spool, the producers and the broker carry."""
MAX_TOPIC_BYTES = 249
"""Kafka's own bound on a topic name."""
MAX_KEY_BYTES = 4096
"""Largest key (episode ids are 36 bytes)."""
MAX_BODY_BYTES = MAX_VALUE_BYTES + MAX_TOPIC_BYTES + MAX_KEY_BYTES
_SEAL = b"SEAL"
_SEAL_BODY = struct.Struct("<4sQ")
QUARANTINE_DIR = "quarantine"
MIN_SEGMENT_BYTES = 64 << 10

FsyncPolicy = Literal["never", "interval", "always"]
DamageKind = Literal["damaged", "torn", "rejected", "truncated", "missing"]
RETIRED = "RETIRED"
"""Ledger of segment numbers deleted once every record in them was acknowledged (see :func:`retire`)."""


@dataclass(frozen=True, slots=True)
class SpoolRecord:
    """One record read back from a segment."""

    segment: Segment
    """The segment holding it."""
    position: int
    """Byte offset of the record's frame in the segment file."""
    topic: str
    """Destination topic."""
    key: bytes
    """Kafka key."""
    value: bytes
    """Kafka value (the event's wire bytes)."""


@dataclass(frozen=True, slots=True)
class Frame:
    """One intact record frame found by :func:`scan_frames`."""

    position: int
    """Offset of its magic."""
    end: int
    """Offset just after it."""
    topic: str
    key: bytes
    value: bytes


@dataclass(frozen=True, slots=True)
class Damage:
    """A byte range that holds no valid frame, between or after intact ones."""

    start: int
    end: int
    kind: DamageKind
    """``damaged`` (intact frames follow it, or the segment was sealed), ``torn`` (the unsealed
    tail a crash mid-append leaves: an append that never returned), ``rejected`` (a record Kafka
    refused for good), ``truncated`` (a sealed segment that ends before its seal, at a frame
    boundary: the records after the cut are gone) or ``missing`` (a segment file that is gone
    although its records were never acknowledged)."""
    records_at_least: int
    """Frames that started in the range (their magic survived); at least 1 for ``damaged``."""

    @property
    def size(self) -> int:
        """Bytes in the range."""
        return self.end - self.start


@dataclass
class FrameScan:
    """What :func:`scan_frames` found in a piece of a segment."""

    frames: list[Frame] = field(default_factory=list)
    damage: list[Damage] = field(default_factory=list)
    stop: int = 0
    """Where scanning stopped: the end of the data it could judge (more may come after it)."""
    need: int = 0
    """When more data could complete a frame at ``stop``: the bytes from ``stop`` that frame spans."""
    sealed: bool = False
    """A ``SEAL`` frame was found: nothing valid follows it."""
    sealed_count: int | None = None
    """The number of records the seal says the segment holds."""
    missing_seal: bool = False
    """The segment should have been sealed (a later one exists) and has no seal: it was truncated."""


class Segment:
    """One segment file and its acknowledgement count."""

    __slots__ = (
        "path", "number", "appended", "acked", "size", "sealed", "deleted", "fd", "map", "capacity",
        "times", "since",
    )  # fmt: skip

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
        self.times = array("d")
        """``time.monotonic()`` of each append, in order (empty for a segment an earlier process left)."""
        self.since = time.monotonic()
        """When the segment was started (recovered: its file's last change, on the same clock)."""

    def oldest_unacked(self) -> float:
        """``time.monotonic()`` of the oldest unacknowledged record's append (acknowledgements in order)."""
        return self.times[self.acked] if self.acked < len(self.times) else self.since

    def __repr__(self) -> str:
        return f"Segment({self.path.name}, appended={self.appended}, acked={self.acked})"


# ================================================================== frames


def encode_record(topic: str, key: bytes, value: bytes) -> bytes:
    """Frame one record (see the module docstring).

    Raises:
        RecordTooLargeError: the value, topic or key is over its limit.
    """
    t = topic.encode("utf-8")
    if len(value) > MAX_VALUE_BYTES:
        raise RecordTooLargeError(
            f"a record of {len(value):,} bytes is over the limit of {MAX_VALUE_BYTES:,} bytes (16 MiB) "
            "that the spool, the producers and the broker carry; large texts belong in the blob store "
            "(the recorder moves texts over 8 KiB there by itself)"
        )
    if not t or len(t) > MAX_TOPIC_BYTES or len(key) > MAX_KEY_BYTES:
        raise RecordTooLargeError(
            f"topic {topic[:60]!r} ({len(t)} bytes) or key ({len(key)} bytes) is empty or over its limit "
            f"({MAX_TOPIC_BYTES} / {MAX_KEY_BYTES} bytes)"
        )
    return _frame(t, key, value)


def _frame(t: bytes, key: bytes, value: bytes) -> bytes:
    lengths = _LENGTHS.pack(len(t) + len(key) + len(value), len(t), len(key))
    crc = crc32c(value, crc32c(key, crc32c(t, crc32c(lengths))))
    return MAGIC + struct.pack("<I", crc) + lengths + t + key + value


def _seal_frame(count: int) -> bytes:
    return _frame(b"", b"", _SEAL_BODY.pack(_SEAL, count))


def _frame_at(data: bytes | memoryview, pos: int) -> tuple[str, int, int, int, int, int] | None:
    """Classify the bytes at ``pos``: ``(state, end, body_start, topic_len, key_len, crc)``.

    ``state`` is ``frame`` (a valid frame ends at ``end``), ``short`` (a plausible header whose
    frame runs past the data: ``end`` is where it would end), or ``None`` for no frame.
    """
    n = len(data)
    if n - pos < HEADER_SIZE:
        return (
            ("short", pos + HEADER_SIZE, 0, 0, 0, 0)
            if bytes(data[pos : pos + 4]) == MAGIC[: n - pos]
            else None
        )
    magic, crc, body_len, topic_len, key_len = _HEADER.unpack_from(data, pos)
    if magic != MAGIC or body_len > MAX_BODY_BYTES or topic_len + key_len > body_len:
        return None
    start = pos + HEADER_SIZE
    end = start + body_len
    if end > n:
        return ("short", end, start, topic_len, key_len, crc)
    lengths = bytes(data[pos + 8 : pos + 16])
    if crc32c(data[start:end], crc32c(lengths)) != crc:
        return None
    return ("frame", end, start, topic_len, key_len, crc)


def scan_frames(
    data: bytes | memoryview, base: int = 0, *, final: bool, sealed_expected: bool = False
) -> FrameScan:
    """Find every intact frame in ``data`` (bytes of a segment from offset ``base``).

    Args:
        data: the bytes to scan.
        base: their offset in the segment (positions in the result are segment offsets).
        final: nothing will be appended after ``data`` (a sealed segment, a dead writer's segment,
            or the whole file was read). When not final, an incomplete frame or unwritten (zero)
            space at the end is where scanning stops, to be continued once more is written.
        sealed_expected: the writer sealed this segment (a later one exists), so a tail without a
            seal is damage (a truncated file), not the torn tail of a crash.

    Returns:
        The intact frames, the damaged ranges between and (when final) after them, and where
        scanning stopped.
    """
    if not isinstance(data, bytes):
        data = bytes(data)
    out = FrameScan()
    n = len(data)
    pos = 0
    bad_from: int | None = None  # start of the invalid run being skipped
    while pos < n:
        got = _frame_at(data, pos)
        if got is not None and got[0] == "frame":
            _, end, start, tl, kl, _ = got
            if bad_from is not None:
                out.damage.append(_damage(data, base, bad_from, pos, "damaged"))
                bad_from = None
            body = data[start:end]
            if tl == 0 and kl == 0 and len(body) == _SEAL_BODY.size and bytes(body[:4]) == _SEAL:
                out.sealed = True
                out.sealed_count = _SEAL_BODY.unpack(bytes(body))[1]
                pos = end
                break
            out.frames.append(
                Frame(base + pos, base + end, bytes(body[:tl]).decode("utf-8", "replace"),
                      bytes(body[tl : tl + kl]), bytes(body[tl + kl :]))
            )  # fmt: skip
            pos = end
            continue
        if got is not None and got[0] == "short" and not final and bad_from is None:
            out.need = got[1] - pos
            break  # a frame being written (or one larger than what was read)
        if bad_from is None and not final and not any(data[pos : min(n, pos + 64)]):
            break  # unwritten space of a segment still being appended to
        if bad_from is None:
            bad_from = pos
        nxt = data.find(MAGIC, pos + 1)
        if nxt < 0:
            pos = n
            break
        pos = nxt
    if bad_from is not None:
        tail = data[bad_from:pos]
        if not final:
            pos = bad_from  # maybe a frame being written: judge it once the segment is final
        elif any(tail):
            kind: DamageKind = "damaged" if out.sealed or sealed_expected else "torn"
            # the zeros after the last written byte are preallocated space, not part of the damage
            out.damage.append(_damage(data, base, bad_from, bad_from + len(tail.rstrip(b"\0")), kind))
    out.stop = base + pos
    out.missing_seal = final and sealed_expected and not out.sealed
    if out.missing_seal and not (out.damage and out.damage[-1].end >= base + len(data.rstrip(b"\0"))):
        # cut at a frame boundary: no bad byte to see, but the seal is gone and what followed it
        end = base + len(data.rstrip(b"\0"))
        out.damage.append(Damage(end, end, "truncated", 0))
    if (
        out.sealed and base == 0 and final and not out.damage and out.sealed_count is not None
        and len(out.frames) < out.sealed_count
    ):  # fmt: skip
        # whole frames cut out of a sealed segment: the seal still counts them
        out.damage.append(Damage(out.stop, out.stop, "missing", out.sealed_count - len(out.frames)))
    if out.sealed and final and pos < n and any(data[pos:]):
        out.damage.append(_damage(data, base, pos, n, "damaged"))  # bytes after a seal: never written by us
        out.stop = base + n
    return out


def _damage(data: bytes | memoryview, base: int, start: int, end: int, kind: DamageKind) -> Damage:
    chunk = bytes(data[start:end])
    starts = chunk.count(MAGIC)
    return Damage(base + start, base + end, kind, max(starts, 1) if kind == "damaged" else starts)


def read_records(path: Path) -> Iterator[tuple[int, str, bytes, bytes]]:
    """Yield ``(position, topic, key, value)`` of every intact record of a segment file.

    Damaged ranges are skipped (see :func:`scan_frames`; :meth:`Spool.recover` also quarantines
    them).
    """
    for f in scan_frames(path.read_bytes(), final=True).frames:
        yield f.position, f.topic, f.key, f.value


# ================================================================== quarantine


def quarantine(directory: Path, segment: int, damage: Damage, data: bytes, *, found_by: str) -> Path:
    """Keep the bytes of a damaged range beside the spool, once, with a line in ``index.jsonl``.

    Idempotent: a range already kept (a restarted shipper scanning the segment again) is not
    written twice.

    Returns:
        The file holding the bytes.

    Raises:
        SpoolError: the bytes could not be written (the caller must not delete the segment).
    """
    qdir = Path(directory) / QUARANTINE_DIR
    name = f"seg-{segment:012d}-{damage.start}-{damage.end}.bin"
    path = qdir / name
    if path.exists() and path.stat().st_size == len(data):
        return path
    try:
        qdir.mkdir(exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        line = {
            "file": name, "segment": segment, "start": damage.start, "end": damage.end, "bytes": damage.size,
            "kind": damage.kind, "records_at_least": damage.records_at_least, "found_by": found_by,
            "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }  # fmt: skip
        with open(qdir / "index.jsonl", "a") as fh:
            fh.write(json.dumps(line) + "\n")
    except OSError as exc:
        raise SpoolError(f"cannot keep the damaged bytes of {name} in {qdir}: {exc}") from exc
    metrics.record_damage(damage.kind, damage.records_at_least)
    return path


def quarantined(directory: Path) -> list[dict[str, object]]:
    """The damaged and torn ranges kept beside a spool (one dict per ``index.jsonl`` line)."""
    index = Path(directory) / QUARANTINE_DIR / "index.jsonl"
    try:
        lines = index.read_text().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


# ================================================================== files and locks


def retire(directory: Path, numbers: list[int], note: str = "") -> None:
    """Note in the ``RETIRED`` ledger that segments were deleted (before deleting them).

    A segment number below ``NEXT`` that is neither on disk nor in the ledger is a segment
    that vanished with unacknowledged records in it (:func:`missing_segments`). ``note``
    marks a line (``missing``: a gap already reported, so it is reported once).
    """
    if not numbers:
        return
    text = "".join(f"{n} {note}".rstrip() + "\n" for n in numbers)
    try:
        with open(Path(directory) / RETIRED, "a") as fh:
            fh.write(text)
    except OSError:
        pass  # a full disk: the worst case is a gap reported later that lost nothing


def _ledger(directory: Path) -> tuple[int, set[int]]:
    """``(first tracked number, retired numbers)`` from the ``RETIRED`` ledger."""
    first, out = 0, set[int]()
    try:
        lines = (Path(directory) / RETIRED).read_text().splitlines()
    except OSError:  # no ledger (or none readable): nothing is judged
        return -1, out
    for line in lines:
        parts = line.split()
        if not parts:
            continue
        try:
            if parts[0] == "from" and len(parts) == 2:
                first = max(first, int(parts[1]))
            else:
                out.add(int(parts[0]))
        except ValueError:
            continue
    return first, out


def read_next(directory: Path) -> int:
    """The next segment number ``NEXT`` records (0 when missing or unreadable)."""
    try:
        return max(0, int((Path(directory) / "NEXT").read_text().strip() or 0))
    except (OSError, ValueError):
        return 0


def missing_segments(
    directory: Path, numbers: list[int] | None = None, next_seen: int | None = None
) -> list[int]:
    """Segment numbers that were allocated and are gone without being retired (lost records).

    Numbers below the ledger's first tracked one (a spool older than the ledger) are not judged.
    ``numbers`` (the files on disk) and ``next_seen`` (``NEXT``) may come from the caller; both
    must then have been read in this function's order, which is what makes it safe while a
    worker rotates and a shipper deletes: ``NEXT`` first (a writer creates a file before it
    raises ``NEXT``, so every number below the value read has a file or had one), then the
    files, then the ledger (a deleter notes a number in the ledger before it unlinks the file,
    so a file the listing missed is already in the ledger read after it).
    """
    top_next = read_next(directory) if next_seen is None else next_seen
    present = set(segment_numbers(directory) if numbers is None else numbers)
    first, retired = _ledger(directory)
    if first < 0:
        return []
    top = max([top_next, *(n + 1 for n in present)], default=0)
    return [n for n in range(first, top) if n not in present and n not in retired]


def _compact_ledger(directory: Path, present: list[int]) -> None:
    """Rewrite a long ledger as ``from K`` plus what is above K (K: first number still in use)."""
    path = Path(directory) / RETIRED
    first, retired = _ledger(directory)
    if first < 0 or len(retired) < 1024:
        return
    k = first
    live = set(present)
    while k in retired and k not in live:
        k += 1
    tmp = path.with_suffix(".tmp")
    try:
        tmp.write_text(f"from {k}\n" + "".join(f"{n}\n" for n in sorted(retired) if n >= k))
        tmp.replace(path)
    except OSError:
        pass


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


def free_bytes(path: Path) -> int:
    """Free bytes on the filesystem holding ``path`` (0 if it cannot be asked)."""
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return 0


# ================================================================== the spool


class Spool:
    """An append-only, size-bounded, crash-safe spool of unacknowledged records.

    Args:
        directory: the spool's own directory (one per worker).
        segment_bytes: a segment is sealed and a new one started past this size (capped at a
            quarter of ``max_bytes``, so that a small spool still rotates).
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
        SpoolError: the directory cannot be used (the lock is released again).
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
        if segment_bytes <= 0 or max_bytes <= 0:
            raise SpoolError("need segment_bytes > 0 and max_bytes > 0")
        self._sent_seen = 0  # records acknowledged so far (one in SEND_SAMPLE_EVERY is timed)
        self.directory = Path(directory)
        self.segment_bytes = min(segment_bytes, max(MIN_SEGMENT_BYTES, max_bytes // 4))
        self.max_bytes = max_bytes
        self.full_timeout_s = full_timeout_s
        self.fsync = fsync
        self.fsync_interval_s = fsync_interval_s
        self._cond = threading.Condition(threading.Lock())
        self._closed = False
        self._last_fsync = time.monotonic()
        self.damage_found: list[Damage] = []
        """Damaged or torn ranges :meth:`recover` quarantined."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._lock_fd = os.open(self.directory / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise self._os_error(f"cannot open the spool at {self.directory}", exc) from exc
        if not lock_file(self._lock_fd, lock_timeout_s):
            os.close(self._lock_fd)
            raise SpoolLockedError(f"spool {self.directory} is owned by another live process")
        try:
            # Segments left behind by an earlier process: recovered, never appended to.
            self._recovered: list[Segment] = []
            numbers = segment_numbers(self.directory)
            for n in numbers:
                seg = Segment(self._segment_path(n), n)
                seg.sealed = True
                st = seg.path.stat()
                seg.size = st.st_size
                # its records were appended before the file last changed: their age is at least this
                seg.since -= max(0.0, time.time() - st.st_mtime)
                self._recovered.append(seg)
            # Segment numbers never go back, even once every segment is gone: a
            # shipper's progress refers to them.
            self._next_path = self.directory / "NEXT"
            first, retired = _ledger(self.directory)
            self._next_number = max(
                [read_next(self.directory), *(n + 1 for n in numbers), *(n + 1 for n in retired)], default=0
            )
            if first < 0:
                # a new spool (or one older than the ledger): gaps are judged from here on
                (self.directory / RETIRED).write_text(f"from {self._next_number}\n")
            else:
                _compact_ledger(self.directory, numbers)
            self._disk_bytes = sum(s.size for s in self._recovered)
            # The active segment is allocated by the first append: opening a spool (to drain what
            # a dead worker left, say) needs no free space.
            self._active: Segment | None = None
            self._live: set[Segment] = set(self._recovered)
        except BaseException:
            os.close(self._lock_fd)
            raise
        metrics.track_spool(self)

    # ------------------------------------------------------------- internals

    def _segment_path(self, n: int) -> Path:
        return segment_path(self.directory, n)

    def reserve(self, number: int) -> None:
        """Never use segment numbers below ``number`` again (a shipper's progress names them)."""
        with self._cond:
            self._next_number = max(self._next_number, number)

    def _os_error(self, what: str, exc: OSError) -> SpoolError:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return SpoolDiskFullError(
                f"{what}: no space left on the disk ({free_bytes(self.directory):,} bytes free at "
                f"{self.directory}); nothing was recorded, nothing recorded before is lost, and recording "
                "resumes by itself once space is freed"
            )
        return SpoolError(f"{what}: {exc.strerror or exc}")

    def _open_segment(self, min_capacity: int = 0) -> Segment:
        seg = Segment(self._segment_path(self._next_number), self._next_number)
        capacity = max(self.segment_bytes, min_capacity + HEADER_SIZE + _SEAL_BODY.size)
        capacity += (-capacity) % mmap.PAGESIZE
        try:
            seg.fd = os.open(seg.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            os.posix_fallocate(seg.fd, 0, capacity)
            # NEXT after the file exists: a number below NEXT that is gone was really lost
            tmp = self._next_path.with_suffix(".tmp")
            tmp.write_text(str(self._next_number + 1))
            tmp.replace(self._next_path)
            # MAP_POPULATE faults the pages in now, not one by one on the append path.
            seg.map = mmap.mmap(
                seg.fd, capacity, mmap.MAP_SHARED | mmap.MAP_POPULATE, mmap.PROT_READ | mmap.PROT_WRITE
            )
        except OSError as exc:
            if seg.fd is not None:
                os.close(seg.fd)
                seg.path.unlink(missing_ok=True)
            raise self._os_error(
                f"cannot allocate a {capacity:,}-byte spool segment {seg.path.name}", exc
            ) from exc
        self._next_number += 1
        seg.capacity = capacity
        return seg

    def _seal(self, seg: Segment) -> None:
        if seg.map is not None:
            seal = _seal_frame(seg.appended)
            seg.map[seg.size : seg.size + len(seal)] = seal
            seg.size += len(seal)
            self._disk_bytes += len(seal)
            if self.fsync != "never":
                seg.map.flush()
            seg.map.close()
            seg.map = None
        if seg.fd is not None:
            # Give back the preallocated tail; recovery needs only the frames.
            os.ftruncate(seg.fd, seg.size)
            os.close(seg.fd)
            seg.fd = None
        seg.sealed = True
        self._maybe_delete(seg)

    def _maybe_delete(self, seg: Segment) -> None:
        # Caller holds the condition's lock.
        if seg.sealed and not seg.deleted and seg.acked >= seg.appended:
            retire(self.directory, [seg.number])
            try:
                seg.path.unlink()
            except FileNotFoundError:
                pass
            seg.deleted = True
            self._disk_bytes -= seg.size
            self._live.discard(seg)
            self._cond.notify_all()

    def _unacked_bytes(self) -> int:
        return sum(s.size for s in self._live if s.appended > s.acked)

    # ------------------------------------------------------------- public API

    def recover(self) -> list[SpoolRecord]:
        """The intact records of segments an earlier process left unacknowledged.

        Damaged ranges are skipped, their bytes quarantined beside the spool and listed in
        :attr:`damage_found`; every intact record after them is returned. Each returned record
        must be acknowledged with :meth:`ack` once delivered; its segment is deleted when all of
        them are. A recovered segment with no intact record is deleted at once.

        Raises:
            SpoolError: damaged bytes could not be quarantined (the segment is kept).
        """
        out: list[SpoolRecord] = []
        with self._cond:
            for n in missing_segments(self.directory, [seg.number for seg in self._recovered]):
                d = Damage(0, 0, "missing", 0)
                quarantine(self.directory, n, d, b"", found_by="recover: the segment file is gone")
                retire(self.directory, [n], "missing")  # reported once
                self.damage_found.append(d)
            last = max((seg.number for seg in self._recovered), default=-1)
            for seg in self._recovered:
                data = seg.path.read_bytes()
                # every segment but the newest was sealed before the next one was opened
                scan = scan_frames(data, final=True, sealed_expected=seg.number != last)
                for d in scan.damage:
                    quarantine(self.directory, seg.number, d, data[d.start : d.end], found_by="recover")
                    self.damage_found.append(d)
                seg.appended = len(scan.frames)
                for f in scan.frames:
                    out.append(SpoolRecord(seg, f.position, f.topic, f.key, f.value))
                self._maybe_delete(seg)
            self._recovered = []
        return out

    def append(self, topic: str, key: bytes, value: bytes) -> tuple[Segment, int]:
        """Durably append one record; return its ``(segment, position)`` ticket.

        Raises:
            RecordTooLargeError: the record is over a limit (nothing was recorded).
            SpoolFullError: the spool stayed over ``max_bytes`` for ``full_timeout_s``.
            SpoolDiskFullError: no disk space for a new segment (nothing was recorded).
            SpoolError: the spool is closed or the disk write failed.
        """
        frame = encode_record(topic, key, value)
        size = len(frame)
        with self._cond:
            if self._closed:
                raise SpoolError("spool is closed")
            if self._disk_bytes + size > self.max_bytes:
                self._make_room(size)
            seg = self._active
            if seg is None or seg.size + size + HEADER_SIZE + _SEAL_BODY.size > seg.capacity:
                if seg is not None:
                    self._seal(seg)
                    self._active = None
                seg = self._active = self._open_segment(size)
                self._live.add(seg)
            position = seg.size
            mm = seg.map
            assert mm is not None
            mm[position : position + size] = frame
            now = time.monotonic()
            if self.fsync == "always":
                self._msync(mm, position, size)
            elif self.fsync == "interval":
                if now - self._last_fsync >= self.fsync_interval_s:
                    mm.flush()
                    self._last_fsync = now
            seg.size = position + size
            seg.appended += 1
            seg.times.append(now)
            self._disk_bytes += size
        return seg, position

    def _make_room(self, size: int) -> None:
        """Wait (lock held) until ``size`` more bytes fit under ``max_bytes``."""
        deadline = time.monotonic() + self.full_timeout_s
        while self._disk_bytes + size > self.max_bytes:
            active = self._active
            if active is not None and active.appended and active.acked >= active.appended:
                # everything in the active segment is acknowledged: rotating it frees its bytes
                self._seal(active)
                self._active = None
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                unacked = sum(s.appended - s.acked for s in self._live)
                raise SpoolFullError(
                    f"spool {self.directory} is full: {unacked} records ({self._unacked_bytes():,} bytes) "
                    f"are not acknowledged by Kafka after {self.full_timeout_s:g} s (bound "
                    f"{self.max_bytes:,} bytes). Nothing was dropped: this record was not recorded and can "
                    "be retried",
                    fix=fixes.BROKER_STATUS,
                )
            self._cond.wait(min(left, 0.5))

    def ack_through(self, segment_number: int, count: int) -> None:
        """Acknowledge every record before the ``count``-th of segment ``segment_number``.

        Used with a shipper, which reports its progress as a position in the
        spool: all records of earlier segments, and the first ``count`` of
        this one, are acknowledged.
        """
        with self._cond:
            for seg in list(self._live):
                if seg.number < segment_number:
                    acked = max(seg.acked, seg.appended)
                elif seg.number == segment_number:
                    acked = max(seg.acked, min(count, seg.appended))
                else:
                    continue
                self._observe_sent(seg, acked)
                seg.acked = acked
                if seg.sealed:
                    self._maybe_delete(seg)
            self._cond.notify_all()

    @staticmethod
    def _msync(mm: mmap.mmap, position: int, size: int) -> None:
        start = position - position % mmap.PAGESIZE
        mm.flush(start, position + size - start)

    def _observe_sent(self, seg: Segment, acked: int) -> None:
        """Time from append to acknowledgement of the records up to ``acked`` (lock held).

        Acknowledgements are counts, so the records are taken in append order: exact for the
        shipper (it acknowledges a prefix) and for in-order receipts. One record in
        :data:`ingest.metrics.SEND_SAMPLE_EVERY` is timed, counted across calls (so single-record
        acknowledgements are sampled too).
        """
        times = seg.times
        lo, hi = seg.acked, min(acked, len(times))
        if lo >= hi:
            return
        every = metrics.SEND_SAMPLE_EVERY
        first = lo + (-self._sent_seen) % every  # the next record whose running number is a multiple
        self._sent_seen += hi - lo
        if first < hi:
            now = time.monotonic()
            for i in range(first, hi, every):
                metrics.SEND_SECONDS.observe(now - times[i])

    def ack(self, segment: Segment, count: int = 1, *, sent: bool = True) -> None:
        """Mark ``count`` records of ``segment`` acknowledged (safe from any thread).

        ``sent=False``: released without Kafka's acknowledgement (set aside), so not timed.
        """
        with self._cond:
            if sent:
                self._observe_sent(segment, segment.acked + count)
            segment.acked += count
            if segment.sealed:
                self._maybe_delete(segment)
            self._cond.notify_all()

    def read(self, segment: Segment, position: int) -> SpoolRecord:
        """Read back the record at ``position`` of ``segment`` (for redelivery).

        Raises:
            SpoolError: there is no intact frame at ``position`` any more.
        """
        with self._cond:
            mm = segment.map
            if mm is not None:
                header = mm[position : position + HEADER_SIZE]
                body_len = _HEADER.unpack_from(header)[2] if len(header) == HEADER_SIZE else 0
                data = mm[position : position + HEADER_SIZE + min(body_len, MAX_BODY_BYTES)]
            else:
                with open(segment.path, "rb") as fh:
                    header = os.pread(fh.fileno(), HEADER_SIZE, position)
                    body_len = _HEADER.unpack_from(header)[2] if len(header) == HEADER_SIZE else 0
                    data = os.pread(fh.fileno(), HEADER_SIZE + min(body_len, MAX_BODY_BYTES), position)
        scan = scan_frames(data, position, final=True)
        if not scan.frames or scan.frames[0].position != position:
            raise SpoolError(f"corrupt spool record at {segment.path}:{position}")
        f = scan.frames[0]
        return SpoolRecord(segment, position, f.topic, f.key, f.value)

    def set_aside(self, segment: Segment, position: int, reason: str) -> None:
        """Keep a record Kafka refuses for good in the quarantine and acknowledge it.

        Raises:
            SpoolError: the record cannot be read or kept (it stays unacknowledged).
        """
        rec = self.read(segment, position)
        frame = encode_record(rec.topic, rec.key, rec.value)
        d = Damage(position, position + len(frame), "rejected", 1)
        quarantine(self.directory, segment.number, d, frame, found_by=reason)
        self.damage_found.append(d)
        self.ack(segment, sent=False)

    @property
    def pending(self) -> int:
        """Records appended (or recovered) and not yet acknowledged."""
        with self._cond:
            return sum(s.appended - s.acked for s in self._live)

    @property
    def oldest_pending_age(self) -> float:
        """Seconds since the oldest record not yet acknowledged was appended (0 when none).

        A record recovered from an earlier process is taken as old as its segment file's last
        change (a lower bound); acknowledgements are taken in append order.
        """
        with self._cond:
            oldest = min((s.oldest_unacked() for s in self._live if s.appended > s.acked), default=None)
        return 0.0 if oldest is None else max(0.0, time.monotonic() - oldest)

    @property
    def disk_bytes(self) -> int:
        """Bytes the spool's segments hold on disk."""
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
            if self._active is not None:
                self._seal(self._active)
        metrics.untrack_spool(self)
        os.close(self._lock_fd)
