"""The durable spool: append, recover, torn tails, acknowledgement, bounds, ownership."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest import RecordTooLargeError, Spool, SpoolDiskFullError, SpoolFullError, SpoolLockedError
from ingest.spool import MAX_VALUE_BYTES, encode_record, quarantined, read_records, scan_frames
from tests.tmpfs import small_tmpfs


def test_records_survive_a_closed_spool_until_acknowledged(tmp_path: Path) -> None:
    sp = Spool(tmp_path)
    tickets = [sp.append("t", b"k%d" % i, b"v%d" % i) for i in range(10)]
    for seg, _ in tickets[:4]:
        sp.ack(seg)
    sp.close()
    sp2 = Spool(tmp_path)
    recovered = sp2.recover()
    # Acks are per segment: the unacknowledged segment comes back whole.
    assert [(r.key, r.value) for r in recovered] == [(b"k%d" % i, b"v%d" % i) for i in range(10)]
    for r in recovered:
        sp2.ack(r.segment)
    sp2.close()
    assert list(tmp_path.glob("seg-*.log")) == []
    assert Spool(tmp_path).recover() == []


def test_fully_acknowledged_segments_are_deleted(tmp_path: Path) -> None:
    sp = Spool(tmp_path, segment_bytes=4096, max_bytes=1 << 20)
    tickets = [sp.append("t", b"k", b"x" * 500) for _ in range(40)]
    assert len(list(tmp_path.glob("seg-*.log"))) > 3
    for seg, _ in tickets:
        sp.ack(seg)
    # Only the active segment remains; it goes on close.
    assert len(list(tmp_path.glob("seg-*.log"))) == 1
    assert sp.pending == 0
    sp.close()
    assert list(tmp_path.glob("seg-*.log")) == []


def test_a_torn_tail_and_damage_are_told_apart(tmp_path: Path) -> None:
    sp = Spool(tmp_path)
    for i in range(5):
        sp.append("topic", b"key", b"value-%d" % i)
    seg = sp._active
    assert seg is not None
    # A crash in the middle of writing a sixth record: the segment was never sealed.
    frame = encode_record("topic", b"key", b"value-5")
    seg.map[seg.size : seg.size + 10] = frame[:10]  # type: ignore[index]
    os.close(sp._lock_fd)  # the process dies: no seal, the lock goes with it
    scan = scan_frames(seg.path.read_bytes(), final=True)
    assert [f.value for f in scan.frames] == [b"value-%d" % i for i in range(5)]
    assert [(d.kind, d.size) for d in scan.damage] == [("torn", len(frame[:10].rstrip(b"\0")))]
    # A flipped byte in the last record of a sealed segment is damage: kept, reported, skipped.
    sp2 = Spool(tmp_path)
    sp2.recover()
    sp2.close()
    sealed = Spool(tmp_path / "b")
    for i in range(5):
        sealed.append("topic", b"key", b"value-%d" % i)
    sseg = sealed._active
    assert sseg is not None
    sealed.close()
    data = bytearray(sseg.path.read_bytes())
    data[-30] ^= 0xFF  # inside the fifth record (the seal frame is the last 28 bytes)
    sseg.path.write_bytes(bytes(data))
    assert [v for _, _, _, v in read_records(sseg.path)] == [b"value-%d" % i for i in range(4)]
    again = Spool(tmp_path / "b")
    assert [r.value for r in again.recover()] == [b"value-%d" % i for i in range(4)]
    [d] = again.damage_found
    assert d.kind == "damaged" and d.records_at_least == 1
    [q] = quarantined(tmp_path / "b")
    kept = (tmp_path / "b" / "quarantine" / str(q["file"])).read_bytes()
    assert kept == bytes(data[d.start : d.end]) and q["kind"] == "damaged"
    again.close()


def test_read_back_a_record_for_redelivery(tmp_path: Path) -> None:
    sp = Spool(tmp_path, segment_bytes=4096, max_bytes=1 << 20)
    tickets = [(sp.append("topic-%d" % i, b"key-%d" % i, os.urandom(300)), i) for i in range(30)]
    for (seg, pos), i in tickets:
        rec = sp.read(seg, pos)
        assert rec.topic == "topic-%d" % i and rec.key == b"key-%d" % i and len(rec.value) == 300
    sp.close()


def test_full_spool_raises_instead_of_dropping(tmp_path: Path) -> None:
    sp = Spool(tmp_path, segment_bytes=4096, max_bytes=8192, full_timeout_s=0.2)
    n = 0
    with pytest.raises(SpoolFullError, match="full"):
        for _ in range(1000):
            sp.append("t", b"k", b"x" * 1000)
            n += 1
    assert 4 <= n < 10
    assert sp.pending == n  # everything accepted is still there
    sp.close()


def test_full_spool_blocks_until_acks_free_space(tmp_path: Path) -> None:
    sp = Spool(tmp_path, segment_bytes=4096, max_bytes=8192, full_timeout_s=10)
    tickets = []
    frame = len(encode_record("t", b"k", b"x" * 1000))
    while sp.disk_bytes + frame <= 8192:
        tickets.append(sp.append("t", b"k", b"x" * 1000))
    done = threading.Event()

    def writer() -> None:
        sp.append("t", b"k", b"x" * 1000)
        done.set()

    th = threading.Thread(target=writer)
    th.start()
    assert not done.wait(0.3)  # blocked: the spool is full
    for seg, _ in tickets:
        sp.ack(seg)
    assert done.wait(5)
    th.join()
    sp.close()


def test_one_owner_per_spool(tmp_path: Path) -> None:
    sp = Spool(tmp_path)
    with pytest.raises(SpoolLockedError):
        Spool(tmp_path)
    sp.close()
    Spool(tmp_path).close()


@pytest.mark.parametrize("policy", ["interval", "always"])
def test_fsync_policies_write_the_same_records(tmp_path: Path, policy: str) -> None:
    sp = Spool(tmp_path, fsync=policy)  # type: ignore[arg-type]
    for i in range(20):
        sp.append("t", b"k", b"%d" % i)
    sp.close()
    assert [r.value for r in Spool(tmp_path).recover()] == [b"%d" % i for i in range(20)]


# ---------------------------------------------------------------- sizes, damage, full disks


SIZES = [1, 255 << 10, 257 << 10, 1 << 20, MAX_VALUE_BYTES]


def test_records_of_every_size_up_to_the_limit_round_trip(tmp_path: Path) -> None:
    sp = Spool(tmp_path, max_bytes=256 << 20)
    values = [bytes([i + 1]) * n for i, n in enumerate(SIZES)]
    for v in values:
        sp.append("t", b"k", v)
    with pytest.raises(RecordTooLargeError, match="over the limit of 16,777,216 bytes"):
        sp.append("t", b"k", b"x" * (MAX_VALUE_BYTES + 1))
    assert sp.pending == len(values)  # the refused one was not recorded
    sp.close()
    assert [r.value for r in Spool(tmp_path, max_bytes=256 << 20).recover()] == values


def test_a_small_spool_rotates_and_never_wedges(tmp_path: Path) -> None:
    # a bound at or under a default segment (8 MiB): segments follow it, acknowledged ones go
    sp = Spool(tmp_path, max_bytes=1 << 20, full_timeout_s=5)
    for _ in range(40):  # 40 x 100 KiB through a 1 MiB spool
        seg, _ = sp.append("t", b"k", b"x" * (100 << 10))
        sp.ack(seg)
    assert sp.pending == 0 and sp.disk_bytes <= 1 << 20
    sp.close()


@given(st.data())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_record_outside_a_damaged_range_is_recovered(tmp_path: Path, data: st.DataObject) -> None:
    import tempfile

    d = Path(tempfile.mkdtemp(dir=tmp_path))  # a fresh spool per example (hypothesis reuses tmp_path)
    sp = Spool(d, segment_bytes=64 << 10)
    sizes = data.draw(st.lists(st.integers(1, 3000), min_size=1, max_size=60))
    tickets = [(sp.append("t", b"k%d" % i, bytes([i % 251 + 1]) * n), i) for i, n in enumerate(sizes)]
    segs = {seg.number: seg for (seg, _), _ in tickets}
    sp.close()
    target = data.draw(st.sampled_from(sorted(segs)))
    path = segs[target].path
    raw = bytearray(path.read_bytes())
    start = data.draw(st.integers(0, len(raw) - 1))
    length = data.draw(st.integers(1, min(4096, len(raw) - start)))
    how = data.draw(st.sampled_from(["flip", "zero", "random", "truncate"]))
    if how == "truncate":
        del raw[start:]
    else:
        for j in range(start, start + length):
            raw[j] = raw[j] ^ 0x5A if how == "flip" else 0 if how == "zero" else (raw[j] * 7 + 13) % 256
    path.write_bytes(bytes(raw))
    end = 1 << 62 if how == "truncate" else start + length  # a truncation loses everything after it
    recovered = Spool(d, segment_bytes=64 << 10)
    got = {(r.segment.number, r.position): r.value for r in recovered.recover()}
    for (seg, pos), i in tickets:
        frame_end = pos + len(encode_record("t", b"k%d" % i, b"x" * sizes[i]))
        untouched = seg.number != target or frame_end <= start or pos >= end
        if untouched:
            assert got.get((seg.number, pos)) == bytes([i % 251 + 1]) * sizes[i], (how, i)
    # the damage found covers the corrupted bytes that held records, and its bytes are kept
    for q in quarantined(d):
        kept = (d / "quarantine" / str(q["file"])).read_bytes()
        assert len(kept) == q["bytes"]
    recovered.close()


@pytest.fixture
def small_disk(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A real 4 MiB filesystem (tmpfs) to fill up."""
    with small_tmpfs(tmp_path / "disk", "4m") as where:
        yield where


def test_a_full_disk_is_the_spools_own_error_and_recording_resumes(small_disk: Path) -> None:
    sp = Spool(small_disk / "spool", segment_bytes=1 << 20, max_bytes=64 << 20)
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (3 << 20) + b"\0" * (600 << 10))  # leaves less than a segment
    accepted = 0
    with pytest.raises(SpoolDiskFullError, match="no space left on the disk") as err:
        for _ in range(100):
            sp.append("t", b"k", b"x" * (200 << 10))
            accepted += 1
    assert str(small_disk / "spool") in str(err.value) and "bytes free" in str(err.value)
    assert sp.pending == accepted  # what was accepted is all there
    filler.unlink()  # space comes back: the next append just works
    sp.append("t", b"k", b"after")
    sp.close()
    assert len(Spool(small_disk / "spool").recover()) == accepted + 1


def test_opening_a_spool_needs_no_free_space_and_a_failed_open_frees_the_lock(small_disk: Path) -> None:
    sp = Spool(small_disk / "spool", segment_bytes=1 << 20)
    for _ in range(5):
        sp.append("t", b"k", b"x" * 1000)
    sp.close()
    filler = small_disk / "filler"
    with open(filler, "wb", buffering=0) as fh, contextlib.suppress(OSError):
        while True:
            fh.write(b"\0" * (64 << 10))  # the disk is now completely full
    again = Spool(small_disk / "spool")  # drain needs this to work with no space at all
    assert len(again.recover()) == 5
    with pytest.raises(SpoolDiskFullError):
        again.append("t", b"k", b"more")
    again.close()
    Spool(small_disk / "spool").close()  # the lock was released: a retry in the same process opens it


def test_a_live_segment_waits_for_a_frame_being_written_and_skips_damage_behind_valid_frames() -> None:
    frames = [encode_record("t", b"k", b"v%d" % i) for i in range(6)]
    written = b"".join(frames)
    half = frames[5][: len(frames[5]) // 2]
    # the writer is in the middle of the sixth frame; the rest is preallocated zeros
    scan = scan_frames(written[: -len(frames[5])] + half + bytes(4096), final=False)
    assert [f.value for f in scan.frames] == [b"v%d" % i for i in range(5)] and not scan.damage
    assert scan.stop == len(written) - len(frames[5])  # resume exactly there
    # a flipped byte in the third frame, with intact frames after it: damage, even while live
    bad = bytearray(written)
    bad[len(frames[0]) + len(frames[1]) + 18] ^= 1  # inside the third frame (20 bytes each)
    scan = scan_frames(bytes(bad) + bytes(4096), final=False)
    assert [f.value for f in scan.frames] == [b"v%d" % i for i in (0, 1, 3, 4, 5)]
    [d] = scan.damage
    assert (d.start, d.end, d.kind) == (len(frames[0]) + len(frames[1]), sum(map(len, frames[:3])), "damaged")


def test_segments_rotated_and_deleted_while_a_reader_looks_are_never_called_missing(tmp_path: Path) -> None:
    """A reader racing a worker that rotates and deletes segments finds no gap that is not there.

    A writer creates a segment's file before it raises ``NEXT``; a deleter notes the number in
    the ledger before it unlinks the file. A reader that listed the files after reading the
    ledger called a segment deleted in between "gone" (a CI run saw it, under the shipper).
    """
    from ingest.spool import missing_segments, read_next
    from ingest.spool_report import inspect_spool

    sp = Spool(tmp_path, segment_bytes=4096, max_bytes=1 << 20)
    stop = threading.Event()

    def work() -> None:
        while not stop.is_set():
            seg, _ = sp.append("t", b"k", b"x" * 1500)  # a rotation every 2 records
            sp.ack(seg)

    worker = threading.Thread(target=work)
    worker.start()
    try:
        seen = []
        # at least 3000 looks, and on until the worker has rotated past 100 segments (a loaded
        # machine gives the worker thread fewer turns per look)
        i, deadline = 0, time.monotonic() + 120
        while i < 3000 or (read_next(tmp_path) <= 100 and time.monotonic() < deadline):
            seen += missing_segments(tmp_path)
            if i % 100 == 0:
                seen += [f["segment"] for f in inspect_spool(tmp_path).found]
            i += 1
    finally:
        stop.set()
        worker.join()
        sp.close()
    assert seen == []
    assert read_next(tmp_path) > 100  # the worker rotated (and deleted) all along
