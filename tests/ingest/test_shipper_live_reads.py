"""A shipper's read of the live segment is not a snapshot: it must never skip a record as damage.

The worker appends through a shared memory map; the shipper reads the same file with
``os.pread``, which the kernel copies page by page and may pause between pages. One read can
then hold the pages before some offset as they were and the pages after it as they are now: a
frame the worker was still copying (or zeros), then frames it wrote during the pause. A scan of
that read finds "damage" followed by intact frames. Skipping it lost a run of records from the
log while ``flush()`` returned (the bench's one-time ``produced 200022, pipeline 199942``): the
worker's ack moves past a segment once the shipper leaves it. Damage in a live segment counts
only once a second read from the same place finds it again.

These tests replay both interleavings exactly, by splitting the one ``pread`` and letting the
worker append in between, with the real spool, shipper and worker-side delivery (the sink in
memory). Before the fix they lost 1 and 78 records.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

import ingest.shipper as shipper_mod
from ingest.kafka_sink import KafkaSinkConfig
from ingest.shipper import READ_AHEAD, SHIPPER_LOCK, ShippedDelivery, Shipper
from ingest.sink import MemorySink
from ingest.spool import HEADER_SIZE, Spool, quarantined

TOPIC = "trajlake.episodes"
KEY = b"0190c0de-0000-7000-8000-000000000001"  # 36 bytes like an episode id
PAGE = 4096


def frame_len(value_len: int) -> int:
    return HEADER_SIZE + len(TOPIC.encode()) + len(KEY) + value_len


def value(i: int, size: int) -> bytes:
    head = b'{"event":%d,"text":"' % i
    return head + b"x" * (size - len(head) - 2) + b'"}'


def step(sh: Shipper) -> int:
    n = sh._read_more()
    sh._reap()
    sh._publish(force=True)
    return n


def worker_and_shipper(
    d: Path, segment_bytes: int
) -> tuple[Spool, int, ShippedDelivery, Shipper, MemorySink]:
    """The worker's spool and delivery, and an in-process shipper whose sink is in memory.

    The test holds SHIPPER.lock (returned: close it at the end), standing in for the shipper
    process: ShippedDelivery then starts none.
    """
    spool = Spool(d, segment_bytes=segment_bytes)  # the worker: holds LOCK
    lock_fd = os.open(d / SHIPPER_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    delivery = ShippedDelivery(spool, KafkaSinkConfig(bootstrap_servers="127.0.0.1:1"))
    sh = Shipper(d, KafkaSinkConfig(bootstrap_servers="127.0.0.1:1"))
    sink = MemorySink()
    sh.sink = sink  # type: ignore[assignment]
    return spool, lock_fd, delivery, sh, sink


def test_a_read_split_around_the_writers_frontier_skips_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "spool"
    spool, lock_fd, delivery, sh, sink = worker_and_shipper(d, 64 << 10)  # small segments rotate soon

    recorded: list[bytes] = []

    def record(size: int) -> None:
        v = value(len(recorded), size)
        delivery.submit(TOPIC, KEY, v)
        recorded.append(v)

    # ~1 KB events (as in bench/pipeline.py); the shipper keeps up
    pos = 0
    for _ in range(3):
        record(1000)
        pos += frame_len(1000)
    while step(sh):
        pass
    assert len(sink.records) == len(recorded)  # everything so far shipped
    # more events, the shipper not yet reading: the frontier ends 20 bytes before a page boundary
    while pos + frame_len(1000) < 2 * PAGE - 20 - frame_len(300):
        record(1000)
        pos += frame_len(1000)
    last = 2 * PAGE - 20 - pos  # the frame that leaves the frontier 20 bytes before the boundary
    record(last - frame_len(0))
    pos += last
    assert pos == 2 * PAGE - 20

    # the next pread of the live segment: pages before X copied now, the worker runs, the rest after
    real_pread = os.pread
    x = 2 * PAGE
    done = []

    def split_pread(fd: int, size: int, offset: int) -> bytes:
        if done or size != READ_AHEAD or not offset < x < offset + size:
            return real_pread(fd, size, offset)
        done.append(1)
        first = real_pread(fd, x - offset, offset)  # [frontier, X): still zeros
        for _ in range(3):  # the worker appends A (straddles X), B, C while the reader waits
            record(1000)
        return first + real_pread(fd, size - len(first), x)

    monkeypatch.setattr(shipper_mod.os, "pread", split_pread)
    while step(sh):
        pass
    monkeypatch.setattr(shipper_mod.os, "pread", real_pread)
    assert done, "the split read did not happen"
    # the record is intact on disk: only the read was inconsistent
    on_disk = next(d.glob("seg-*.log")).read_bytes()
    assert all(v in on_disk for v in recorded)
    for _ in range(5):  # the worker goes on; so does the shipper
        record(1000)
    while step(sh):
        pass
    delivery._apply(shipper_mod.Progress.read(d))
    while len(list(d.glob("seg-*.log"))) < 2 or len(recorded) < 80:  # ... until the segment rotates
        record(1000)
        while step(sh):
            pass

    delivery.flush(timeout=10)  # returns: the worker thinks every record is in Kafka
    shipped = {v for _, _, v in sink.records}
    lost = [i for i, v in enumerate(recorded) if v not in shipped]
    assert not quarantined(d) and sh.progress.damaged == 0
    delivery.close(timeout=5)
    os.close(lock_fd)
    assert lost == [], f"records lost without flush() failing: {lost}"


def test_a_frame_being_copied_and_a_paused_read_skip_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same, with the two things measured in a bench-like run:

    1. a live read that meets a frame the worker is still copying (the writer stalls at the first
       write to a fresh page of its MAP_SHARED map: page_mkwrite; ~1% of live reads here), and
    2. the reader descheduled inside that one pread, after the partial frame's page and some pages
       of zeros, while the worker records on (a few ms = dozens of events on a 2-core box).

    The scan calls everything from the partial frame to the first frame copied after the pause
    "damaged": every record whose frame starts in the zeros read before the pause is skipped.
    """
    d = tmp_path / "spool"
    spool, lock_fd, delivery, sh, sink = worker_and_shipper(d, 256 << 10)
    recorded: list[bytes] = []

    def record(size: int = 1000) -> None:
        v = value(len(recorded), size)
        delivery.submit(TOPIC, KEY, v)
        recorded.append(v)

    for _ in range(5):
        record()
    while step(sh):
        pass
    for _ in range(10):  # the shipper a little behind
        record()
    seg = spool._active
    assert seg is not None and seg.map is not None
    f0 = seg.size
    boundary = f0 + PAGE - f0 % PAGE
    if boundary - f0 < 200:
        boundary += PAGE
    # record A is being copied: its bytes up to the page boundary are in, the rest not yet
    a_value = value(len(recorded), boundary - f0 + 500 - frame_len(0))
    from ingest.spool import encode_record

    a_frame = encode_record(TOPIC, KEY, a_value)
    seg.map[f0:boundary] = a_frame[: boundary - f0]
    x = boundary + 20 * PAGE  # where the reader is descheduled: 80 KiB of zeros read after A
    real_pread = os.pread
    done = []

    def paused_pread(fd: int, size: int, offset: int) -> bytes:
        if done or size != READ_AHEAD or not offset < x < offset + size:
            return real_pread(fd, size, offset)
        done.append(1)
        first = real_pread(fd, x - offset, offset)
        # the worker finishes A and records on while the shipper is off the CPU
        delivery.submit(TOPIC, KEY, a_value)
        recorded.append(a_value)
        while spool._active is seg and seg.size < x + 3 * PAGE:
            record()
        return first + real_pread(fd, size - len(first), x)

    monkeypatch.setattr(shipper_mod.os, "pread", paused_pread)
    while step(sh):
        pass
    monkeypatch.setattr(shipper_mod.os, "pread", real_pread)
    assert done
    while len(recorded) < 600:  # recording goes on; segments rotate
        record()
        while step(sh):
            pass
    delivery.flush(timeout=10)
    shipped = {v for _, _, v in sink.records}
    lost = [i for i, v in enumerate(recorded) if v not in shipped]
    assert not quarantined(d) and sh.progress.damaged == 0 and delivery.stats.damaged == 0
    delivery.close(timeout=5)
    os.close(lock_fd)
    assert lost == [], f"{len(lost)} records lost without flush() failing"


def test_real_damage_in_the_live_segment_is_still_skipped_and_counted(tmp_path: Path) -> None:
    """Real damage in the live segment (a flipped byte; intact frames after it) is still skipped, once."""
    d = tmp_path / "spool"
    spool = Spool(d, segment_bytes=64 << 10)
    sh = Shipper(d, KafkaSinkConfig(bootstrap_servers="127.0.0.1:1"))
    sink = MemorySink()
    sh.sink = sink  # type: ignore[assignment]
    recorded = []
    for i in range(10):
        v = value(i, 1000)
        spool.append(TOPIC, KEY, v)
        recorded.append(v)
    seg = spool._active
    assert seg is not None and seg.map is not None
    pos = 3 * frame_len(1000) + 500  # inside the fourth frame
    seg.map[pos] ^= 1
    steps = 0
    while step(sh) or steps < 3:
        steps += 1
    shipped = {v for _, _, v in sink.records}
    lost = [i for i, v in enumerate(recorded) if v not in shipped]
    assert lost == [3] and sh.progress.damaged == 1 and len(quarantined(d)) == 1
    spool.close()
