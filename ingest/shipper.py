"""The spool shipper: a sidecar process that tails a worker's spool into Kafka.

With a shipper, recording an event costs the worker a validation, a
serialisation and a memory copy into its spool; everything Kafka costs
(kafka-python's per-record work, compression, network, acknowledgements) runs
in another process, on another core, and the worker never waits for the broker.
This is the default delivery of :meth:`~ingest.recorder.EpisodeRecorder.open`.

Protocol, all through files in the spool directory:

- ``seg-<n>.log``: written only by the worker (see :mod:`ingest.spool`). The
  shipper reads them in order; segment ``n`` is final once ``n + 1`` exists (the
  worker seals a segment before it opens the next) or once the worker is gone.
- ``SHIPPED``: written only by the shipper (atomically, by rename): its
  progress ``{"segment": n, "offset": o, "count": k, ...}``: every record before
  byte ``o`` (the first ``k`` records) of segment ``n``, and every record of
  earlier segments, is acknowledged by Kafka. The worker reads it to release
  spool space; a restarted shipper resumes from it.
- ``LOCK``: held by the worker for its lifetime. A shipper that can take it knows
  the worker is gone: it ships what is left, deletes the shipped segments and
  exits.
- ``SHIPPER.lock``: held by the shipper for its lifetime (one per spool).

Failure handling: a record Kafka fails after its own retries, or no
acknowledgement progress for ``stall_timeout_s``, resets the producer and
rewinds to the acknowledged position; everything after it is sent again, in
order. Duplicates are possible (``event_id`` removes them downstream); loss is not.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from crc32c import crc32c

from ingest.delivery import Delivery, DeliveryStats, count_damage
from ingest.errors import DeliveryTimeoutError, SinkError, SinkRejectedError, SpoolError
from ingest.kafka_sink import KafkaSinkConfig, is_rejection, make_sink
from ingest.metrics import ShipperProgressCounts
from ingest.sink import Receipt
from ingest.spool import (
    HEADER_SIZE,
    Damage,
    FrameScan,
    Spool,
    lock_file,
    lock_is_free,
    missing_segments,
    quarantine,
    retire,
    scan_frames,
    segment_numbers,
    segment_path,
)
from schemas import fixes

log = logging.getLogger(__name__)

PROGRESS = "SHIPPED"
SHIPPER_LOCK = "SHIPPER.lock"
SHIPPER_LOG = "shipper.log"
READ_AHEAD = 256 << 10
"""Bytes read at a time from a segment still being written (a larger frame is read whole)."""
ORPHAN_TIMEOUT_S = 300.0
"""A shipper whose worker is gone gives up after its bootstrap stayed unreachable this long."""


def _progress_crc(fields: dict[str, Any]) -> int:
    return int(crc32c(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()))


@dataclass
class Progress:
    """What the shipper reports in ``SHIPPED``."""

    segment: int = -1
    """Segment of the acknowledged position (-1: nothing yet)."""
    offset: int = 0
    """Byte offset in that segment up to which every record is acknowledged."""
    count: int = 0
    """Records of that segment before ``offset``."""
    acknowledged: int = 0
    """Records acknowledged since this shipper started."""
    sent: int = 0
    """Records handed to Kafka since this shipper started (including re-sends)."""
    failed: int = 0
    """Delivery failures reported by Kafka."""
    resets: int = 0
    """Producer resets (after failures or stalls)."""
    resent: int = 0
    """Records in flight that resets dropped, so handed to Kafka again."""
    healthy: bool = True
    """False while Kafka is unreachable or failing."""
    error: str | None = None
    """The last delivery error."""
    pid: int = 0
    """The shipper's process id."""
    bootstrap: str = ""
    """The Kafka bootstrap servers this shipper sends to."""
    damaged: int = 0
    """Damaged byte ranges found and quarantined by this shipper (intact records after them were sent)."""
    damaged_bytes: int = 0
    """Bytes in those ranges."""
    torn: int = 0
    """Torn tails found (a crash mid-append: nothing acknowledged was in them)."""
    rejected: int = 0
    """Records Kafka refused for good (e.g. over the broker's size limit), quarantined."""
    truncated: int = 0
    """Sealed segments found cut short (their seal missing): what was after the cut is gone."""
    gave_up: bool = False
    """The worker was gone and Kafka unreachable past the orphan timeout: the spool is left for
    ``trajlake spool drain``."""

    @classmethod
    def read(cls, directory: Path) -> Progress | None:
        """The last progress written in ``directory`` (None if none, unreadable or damaged).

        The file carries a CRC32C of its fields: a damaged one (even one that is still valid
        JSON) reads as no progress, so everything is sent again (duplicates, never a loss).
        """
        try:
            data = json.loads((directory / PROGRESS).read_text())
            crc = data.pop("crc")
            if crc != _progress_crc(data):
                log.warning("%s/%s fails its checksum; treating it as no progress", directory, PROGRESS)
                return None
            return cls(**data)
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None

    def write(self, directory: Path) -> bool:
        """Write atomically (readers never see a torn file); False when the disk refused it.

        A full disk must not stop shipping (acknowledged records are in Kafka, the file only
        tells the worker so): the caller keeps the progress and writes it again later.
        """
        tmp = directory / f".{PROGRESS}.{os.getpid()}.tmp"
        fields = asdict(self)
        try:
            tmp.write_text(json.dumps({**fields, "crc": _progress_crc(fields)}))
            tmp.replace(directory / PROGRESS)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            log.warning("cannot write shipper progress to %s (%s); will retry", directory, exc)
            return False
        return True


# ================================================================== the shipper


class Shipper:
    """Ships one spool directory to Kafka until its worker is gone and it is empty.

    Args:
        directory: the spool directory.
        config: Kafka producer settings.
        poll_interval_s: how often an idle shipper looks for new records.
        stall_timeout_s: no acknowledgement progress for this long with records
            in flight resets the producer and rewinds.
        retry_interval_s: back-off while Kafka is unreachable.
        orphan_timeout_s: once the worker is gone, how long Kafka may stay unreachable before
            the shipper gives up and exits (the spool stays for ``trajlake spool drain``).
    """

    def __init__(
        self,
        directory: Path,
        config: KafkaSinkConfig,
        *,
        poll_interval_s: float = 0.003,
        stall_timeout_s: float = 15.0,
        retry_interval_s: float = 0.5,
        orphan_timeout_s: float = ORPHAN_TIMEOUT_S,
    ) -> None:
        self.directory = Path(directory)
        self.config = config
        self.sink = make_sink(config)
        self.poll_interval_s = poll_interval_s
        self.stall_timeout_s = stall_timeout_s
        self.retry_interval_s = retry_interval_s
        self.orphan_timeout_s = orphan_timeout_s
        prev = Progress.read(self.directory)
        self.progress = Progress(pid=os.getpid(), bootstrap=config.bootstrap_servers)
        if prev is not None:
            self.progress.segment, self.progress.offset, self.progress.count = (
                prev.segment,
                prev.offset,
                prev.count,
            )
        # Read position: the next record to send.
        self._seg = self.progress.segment
        self._off = self.progress.offset
        self._cnt = self.progress.count
        self._pending: deque[tuple[Receipt, int, int, int]] = deque()  # receipt, seg, end, count
        self._last_progress = time.monotonic()
        self._last_written = 0.0
        self._dirty = True
        self._stop = False
        self._part_cache: tuple[bytes, int | None] = (b"", None)
        self._seen_damage: set[tuple[int, Damage]] = set()
        self._seal_seen = -1
        """The segment whose seal a scan has passed (a later scan from after it cannot see it)."""
        self._suspect: tuple[int, int, int] | None = None
        """Damage one read of the live segment found ``(segment, start, end)``: real if the next finds it."""

    # ------------------------------------------------------------- reading

    def _next_segment(self, after: int) -> int | None:
        later = [n for n in segment_numbers(self.directory) if n > after]
        return later[0] if later else None

    def _worker_gone(self) -> bool:
        return lock_is_free(self.directory / "LOCK")

    def _read(self, path: Path, final: bool) -> tuple[bytes, bool]:
        """The bytes of ``path`` after the read position.

        All of them when the segment is final (a sealed segment is bounded), else a read-ahead
        window grown to hold a whole frame.
        """
        try:
            with open(path, "rb") as fh:
                fd = fh.fileno()
                if final:
                    return os.pread(fd, max(0, os.fstat(fd).st_size - self._off), self._off), True
                if not any(os.pread(fd, HEADER_SIZE, self._off)):
                    return b"", False  # nothing written after the read position yet: an idle poll
                data = os.pread(fd, READ_AHEAD, self._off)
                scan = scan_frames(data, self._off, final=False)
                if scan.need and scan.stop + scan.need > self._off + len(data):
                    data = os.pread(fd, scan.stop - self._off + scan.need, self._off)
                return data, False
        except FileNotFoundError:
            return b"", final

    def _keep_damage(self, damage: list[Damage], data: bytes) -> None:
        p = self.progress
        for d in damage:
            if (self._seg, d) in self._seen_damage:
                continue  # scanned again (a final segment is read until the shipper moves on)
            quarantine(self.directory, self._seg, d, data[d.start - self._off : d.end - self._off],
                       found_by="shipper")  # fmt: skip
            self._seen_damage.add((self._seg, d))
            if d.kind == "torn":
                p.torn += 1
            elif d.kind == "truncated":
                p.truncated += 1
            else:
                p.damaged += 1
                p.damaged_bytes += d.size
            log.warning("%s %s bytes %d..%d kept in %s/quarantine", "torn tail of" if d.kind == "torn"
                        else "damaged range in", segment_path(self.directory, self._seg).name, d.start, d.end,
                        self.directory)  # fmt: skip
            self._dirty = True

    def _read_more(self) -> int:
        """Send the intact records after the read position; return how many.

        A segment is left only once it is final and scanned to its end, so a record of any size
        (up to the limit) is sent, and damage is skipped frame by frame, its bytes kept in the
        spool's quarantine before the read position passes it.
        """
        if self._seg < 0 or not segment_path(self.directory, self._seg).exists():
            nxt = self._next_segment(self._seg)
            if nxt is None:
                return 0
            self._note_missing(nxt)
            self._seg, self._off, self._cnt = nxt, 0, 0
        path = segment_path(self.directory, self._seg)
        later = self._next_segment(self._seg) is not None
        data, final = self._read(path, later or self._worker_gone())
        if final and not data and self._seal_seen == self._seg:
            # read to its seal already (while it was live): nothing follows a seal, nothing to judge
            scan = FrameScan(stop=self._off, sealed=True)
        elif final and not data and not path.exists():
            return 0  # sealed, acknowledged and deleted under us: the next call moves on
        else:
            scan = scan_frames(data, self._off, final=final, sealed_expected=later)
            if not final:
                self._confirm_live_damage(scan)
        if scan.sealed:
            self._seal_seen = self._seg
        self._keep_damage(scan.damage, data)
        for f in scan.frames:
            ck, cp = self._part_cache
            if f.key != ck:
                cp = self.sink.partition_for(f.topic, f.key)
                self._part_cache = (f.key, cp)
            try:
                receipt = self.sink.send(f.topic, f.key, f.value, partition=cp)
            except SinkRejectedError as exc:
                receipt = _Rejected(exc)
            self._cnt += 1
            if not self._pending:
                self._last_progress = time.monotonic()
            self._pending.append((receipt, self._seg, f.end, self._cnt))
            self._off = f.end
            self.progress.sent += 1
        self._off = max(self._off, scan.stop)
        if final and (scan.sealed or self._off >= self._file_end(path)) and not scan.frames:
            nxt = self._next_segment(self._seg)
            if nxt is not None:
                self._note_missing(nxt)
                self._seg, self._off, self._cnt = nxt, 0, 0
                return self._read_more()
        return len(scan.frames)

    def _confirm_live_damage(self, scan: FrameScan) -> None:
        """Cut a scan of the live segment before damage no earlier read found at the same place.

        One ``pread`` of a segment being written is not a snapshot: the kernel copies it page by
        page, and pages copied after the reader was descheduled can hold frames the worker wrote
        after the earlier pages were copied, so a frame it was still copying (or the zeros after
        it) looks like damage followed by intact frames. Bytes before a frame seen whole are
        final, so the next read, which starts at the cut, finds real damage again, and a
        half-copied frame whole.
        """
        for i, d in enumerate(scan.damage):
            key = (self._seg, d.start, d.end)
            if key == self._suspect:
                continue
            self._suspect = key
            scan.frames = [f for f in scan.frames if f.end <= d.start]
            del scan.damage[i:]
            scan.stop, scan.need, scan.sealed, scan.sealed_count = d.start, 0, False, None
            return

    def _note_missing(self, upto: int) -> None:
        """Segments below ``upto`` that vanished unacknowledged: count them and mark them in quarantine."""
        gone = [n for n in missing_segments(self.directory) if n < upto]
        for n in gone:
            lost = Damage(0, 0, "missing", 0)
            quarantine(self.directory, n, lost, b"", found_by="shipper: the segment file is gone")
            retire(self.directory, [n], "missing")
            self.progress.damaged += 1
            self._dirty = True
            log.error("segment %d of %s is gone, its records never acknowledged", n, self.directory)

    def _file_end(self, path: Path) -> int:
        try:
            return path.stat().st_size
        except FileNotFoundError:
            return 0

    # ------------------------------------------------------------- acks

    def _reap(self) -> None:
        p = self.progress
        while self._pending and self._pending[0][0].is_done:
            receipt, seg, end, cnt = self._pending[0]
            if receipt.exception is not None and not _rejected(receipt.exception):
                p.failed += 1
                p.error = f"{type(receipt.exception).__name__}: {receipt.exception}"
                raise SinkError(p.error)  # left in _pending: the rewind drops it with the others
            self._pending.popleft()
            if receipt.exception is not None:
                self._keep_rejected(seg, end, receipt.exception)
            p.segment, p.offset, p.count = seg, end, cnt
            p.acknowledged += 1
            self._last_progress = time.monotonic()
            self._dirty = True
        if self._pending and time.monotonic() - self._last_progress > self.stall_timeout_s:
            raise SinkError(f"no acknowledgement for {self.stall_timeout_s}s")

    def _keep_rejected(self, seg: int, end: int, exc: BaseException) -> None:
        """A record Kafka refuses for good: keep it in the quarantine, count it, go on."""
        path = segment_path(self.directory, seg)
        try:
            with open(path, "rb") as fh:
                data = os.pread(fh.fileno(), end, 0)
        except FileNotFoundError:
            return
        frame = next((f for f in scan_frames(data, final=True).frames if f.end == end), None)
        if frame is None:
            return
        d = Damage(frame.position, frame.end, "rejected", 1)
        quarantine(self.directory, seg, d, data[frame.position : frame.end], found_by=f"kafka: {exc}")
        self.progress.rejected += 1
        log.error("Kafka refused the record at %s:%d for good (%s); kept in quarantine", path.name,
                  frame.position, exc)  # fmt: skip

    def _publish(self, force: bool = False) -> None:
        now = time.monotonic()
        if self._dirty and (force or now - self._last_written >= 0.005):
            if self.progress.write(self.directory):
                self._dirty = False
            self._last_written = now

    def _rewind(self, why: BaseException) -> None:
        """Drop everything in flight; resume from the acknowledged position."""
        log.warning(
            "delivery failed (%s); resetting the producer and re-sending from %s:%d",
            why,
            self.progress.segment,
            self.progress.offset,
        )
        p = self.progress
        p.resent += len(self._pending)
        self._pending.clear()
        self.sink.reset()
        p.resets += 1
        p.healthy = False
        p.error = str(why)
        self._dirty = True
        self._seg, self._off, self._cnt = p.segment, p.offset, p.count
        self._publish(force=True)
        down_since = time.monotonic()
        while not self._stop and not self.sink.probe():
            if time.monotonic() - down_since > self.orphan_timeout_s and self._worker_gone():
                p.gave_up = True
                p.error = (
                    f"Kafka at {self.config.bootstrap_servers} unreachable for "
                    f"{self.orphan_timeout_s:g} s and the worker is gone; the spool stays: "
                    f"{fixes.SPOOL_DRAIN.render()}"
                )
                log.error("%s", p.error)
                self._dirty = True
                self._stop = True
                break
            time.sleep(self.retry_interval_s)

    # ------------------------------------------------------------- main loop

    def _finish_if_done(self) -> bool:
        """Worker gone and everything shipped: delete the segments and stop."""
        if self._pending or not self._worker_gone():
            return False
        if self._read_more():
            return False
        later = self._next_segment(self._seg)
        if later is not None:
            return False
        fd = os.open(self.directory / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if not lock_file(fd, 0):
                return False  # a new worker arrived
            # Everything up to the read position is acknowledged; nothing follows it.
            self.sink.flush(30)
            self._reap()
            if self._pending:
                return False
            # Every segment up to the read position is done: its records acknowledged, its damage
            # (if any) kept in the quarantine.
            done = [n for n in segment_numbers(self.directory) if n <= max(self.progress.segment, self._seg)]
            retire(self.directory, done)
            for n in done:
                segment_path(self.directory, n).unlink(missing_ok=True)
            self._publish(force=True)
            return True
        finally:
            os.close(fd)

    def run(self) -> None:
        """Ship until the worker is gone and the spool is empty (or SIGTERM)."""
        idle_checks = 0
        while not self._stop:
            if not self.directory.is_dir():
                log.warning("spool %s is gone; stopping", self.directory)
                break
            try:
                n = self._read_more()
                self._reap()
                if not self.progress.healthy and not self._pending:
                    self.progress.healthy, self.progress.error = True, None
                    self._dirty = True
            except SinkError as exc:
                self._rewind(exc)
                continue
            except SpoolError as exc:
                # damaged bytes that cannot be kept yet (a full disk): never pass them, never crash
                # (a restarted shipper would re-send from its last written progress); try again
                self.progress.error = str(exc)
                self._dirty = True
                self._publish()
                log.warning("%s; retrying", exc)
                time.sleep(self.retry_interval_s)
                continue
            self._publish()
            if n == 0:
                idle_checks += 1
                if idle_checks % 50 == 0 and self._finish_if_done():
                    break
                time.sleep(self.poll_interval_s)
            else:
                idle_checks = 0
        self._publish(force=True)
        self.sink.close()

    def stop(self, *_: Any) -> None:
        """Ask the loop to stop after the current step."""
        self._stop = True


class _Rejected:
    """The receipt of a record the sink refused at once, for good."""

    is_done = True

    def __init__(self, exc: BaseException) -> None:
        self.exception: BaseException | None = exc


def _rejected(exc: BaseException) -> bool:
    return isinstance(exc, SinkRejectedError) or is_rejection(exc)


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m ingest.shipper SPOOL_DIR --config JSON``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("directory", type=Path)
    ap.add_argument("--config", default="{}", help="KafkaSinkConfig fields as JSON")
    ap.add_argument("--stall-timeout", type=float, default=15.0)
    ap.add_argument("--orphan-timeout", type=float, default=ORPHAN_TIMEOUT_S)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.ERROR)
    cfg = json.loads(args.config)
    if "api_version" in cfg and cfg["api_version"] is not None:
        cfg["api_version"] = tuple(cfg["api_version"])
    fd = os.open(args.directory / SHIPPER_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    if not lock_file(fd, 2.0):
        log.info("another shipper serves %s", args.directory)
        return 0
    shipper = Shipper(
        args.directory,
        KafkaSinkConfig(**cfg),
        stall_timeout_s=args.stall_timeout,
        orphan_timeout_s=args.orphan_timeout,
    )
    signal.signal(signal.SIGTERM, shipper.stop)
    log.info(
        "shipping %s (pid %d) from %s:%d",
        args.directory,
        os.getpid(),
        shipper.progress.segment,
        shipper.progress.offset,
    )
    shipper.run()
    log.info("done: %d records acknowledged", shipper.progress.acknowledged)
    return 0


# ================================================================== the worker's side


def shipper_alive(directory: Path) -> bool:
    """Whether a shipper holds ``directory``'s shipper lock."""
    return not lock_is_free(Path(directory) / SHIPPER_LOCK)


class ShippedDelivery(Delivery):
    """Delivery through a shipper process: ``submit`` only appends to the spool.

    The worker's side of the shipper protocol: it makes sure a shipper serves
    the spool (starting one, and a new one if it dies), follows its progress to
    release acknowledged records, and waits on it in :meth:`flush`.

    Args:
        spool: the worker's spool (owned: closed by :meth:`close`).
        config: Kafka settings handed to the shipper.
        poll_interval_s: how often progress is read.
        stall_timeout_s: passed to the shipper.
    """

    def __init__(
        self,
        spool: Spool,
        config: KafkaSinkConfig,
        *,
        poll_interval_s: float = 0.005,
        stall_timeout_s: float = 15.0,
        orphan_timeout_s: float = ORPHAN_TIMEOUT_S,
    ) -> None:
        self.spool = spool
        self.config = config
        self.poll_interval_s = poll_interval_s
        self.stall_timeout_s = stall_timeout_s
        self.orphan_timeout_s = orphan_timeout_s
        self.stats = DeliveryStats()
        self.shipper_progress: Progress | None = None
        spool.recover()  # counts the records earlier processes left (the shipper sends them)
        count_damage(self.stats, spool.damage_found)
        self._recovery_damage = (self.stats.damaged, self.stats.damaged_bytes, self.stats.torn)
        progress = Progress.read(spool.directory)
        if progress is not None:
            # numbers the shipper has passed are never used again (a lost NEXT file must not make
            # new records look shipped)
            spool.reserve(progress.segment + 1)
        self._counts = ShipperProgressCounts(spool.directory, progress)
        self._apply(progress)
        self.stats.recovered = spool.pending
        self._closed = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._restarts = 0
        self._next_start = 0.0
        self._ensure_shipper()
        self._thread = threading.Thread(target=self._follow, name="trajlake-shipped", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------- shipper process

    def _ensure_shipper(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return  # ours runs (or is starting)
        now = time.monotonic()
        if now < self._next_start:
            return  # it died recently: back off instead of restarting it in a loop
        if self._proc is not None:
            self._restarts += 1
            log.warning("the shipper of %s exited (%s); starting another (log: %s)", self.spool.directory,
                        self._proc.returncode, self.spool.directory / SHIPPER_LOG)  # fmt: skip
        self._next_start = now + min(30.0, 0.5 * 2**self._restarts)
        if shipper_alive(self.spool.directory):
            other = Progress.read(self.spool.directory)
            if other is None or not other.bootstrap or other.bootstrap == self.config.bootstrap_servers:
                return  # another one serves this spool (e.g. still shipping a dead worker's records)
            # an orphan sending somewhere else (an old configuration): it would keep ours out forever
            log.warning("the shipper of %s (pid %d) sends to %s, not %s; stopping it", self.spool.directory,
                        other.pid, other.bootstrap, self.config.bootstrap_servers)  # fmt: skip
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(other.pid, signal.SIGTERM)
            deadline = time.monotonic() + 30
            while shipper_alive(self.spool.directory) and time.monotonic() < deadline:
                time.sleep(0.05)
            if shipper_alive(self.spool.directory):
                return  # it did not go: the next check tries again
        cfg = {k: v for k, v in asdict(self.config).items() if v is not None}
        logf = open(self.spool.directory / SHIPPER_LOG, "ab")  # noqa: SIM115 - owned by the child
        try:
            self._proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "ingest.shipper",
                    str(self.spool.directory),
                    "--config",
                    json.dumps(cfg),
                    "--stall-timeout",
                    str(self.stall_timeout_s),
                    "--orphan-timeout",
                    str(self.orphan_timeout_s),
                ],
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # survives the worker: it ships what a dead worker left
            )
        finally:
            logf.close()

    def _apply(self, progress: Progress | None) -> None:
        self._counts.observe(progress)
        if progress is None or progress.segment < 0:
            return
        self.shipper_progress = progress
        self.spool.ack_through(progress.segment, progress.count)

    def _follow(self) -> None:
        last_mtime = 0.0
        last_check = time.monotonic()
        path = self.spool.directory / PROGRESS
        while not self._closed:
            try:
                mtime = path.stat().st_mtime_ns
            except FileNotFoundError:
                mtime = 0
            if mtime != last_mtime:
                last_mtime = mtime
                self._apply(Progress.read(self.spool.directory))
            now = time.monotonic()
            if now - last_check > 1.0:
                last_check = now
                self._ensure_shipper()
            time.sleep(self.poll_interval_s)

    # ------------------------------------------------------------- delivery API

    @property
    def healthy(self) -> bool:
        """False while the shipper reports Kafka unreachable or failing."""
        p = self.shipper_progress
        return True if p is None else p.healthy

    def partition_for(self, topic: str, key: bytes) -> int | None:
        """The shipper picks partitions itself."""
        return None

    def submit(self, topic: str, key: bytes, value: bytes, *, partition: int | None = None) -> None:
        """Durably record one record; the shipper sends it.

        Raises:
            SpoolFullError: the spool stayed full (the record was not recorded).
            SpoolError: the spool cannot be written.
        """
        self.spool.append(topic, key, value)
        self.stats.submitted += 1

    @property
    def pending(self) -> int:
        """Records recorded and not yet acknowledged."""
        return self.spool.pending

    def flush(self, timeout: float | None = 60.0) -> None:
        """Wait until the shipper reports every recorded record acknowledged.

        Raises:
            DeliveryTimeoutError: records were still unacknowledged at the
                timeout; they remain in the spool and are not lost.
        """
        if not self.spool.wait_drained(timeout):
            p = self.shipper_progress
            why = f" (shipper: {p.error})" if p is not None and p.error else ""
            raise DeliveryTimeoutError(
                f"{self.spool.pending} records not acknowledged after {timeout}s{why}; "
                f"they stay in the spool at {self.spool.directory} and are sent when the broker answers",
                fix=fixes.SPOOL_DRAIN,
            )
        self._sync_stats()

    def _sync_stats(self) -> None:
        p = self.shipper_progress
        self.stats.acknowledged = self.stats.submitted + self.stats.recovered - self.spool.pending
        if p is not None:
            self.stats.failed = p.failed
            self.stats.sink_resets = p.resets
            self.stats.rejected = p.rejected
            # what the shipper skipped as damage shows here too, beside what recovery found
            damaged, damaged_bytes, torn = self._recovery_damage
            self.stats.damaged = damaged + p.damaged + p.truncated
            self.stats.damaged_bytes = damaged_bytes + p.damaged_bytes
            self.stats.torn = torn + p.torn

    def close(self, timeout: float | None = 30.0) -> None:
        """Flush (best effort) and release the spool; the shipper then exits.

        Records not acknowledged by then stay in the spool; the shipper goes on
        shipping them after this process is gone.
        """
        if self._closed:
            return
        try:
            self.flush(timeout)
        except DeliveryTimeoutError as exc:
            log.warning("%s", exc)
        self._closed = True
        self._thread.join(timeout=5)
        self.spool.close()


if __name__ == "__main__":
    sys.exit(main())
