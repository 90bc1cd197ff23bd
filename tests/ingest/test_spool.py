"""The durable spool: append, recover, torn tails, acknowledgement, bounds, ownership."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from ingest import Spool, SpoolFullError, SpoolLockedError
from ingest.spool import encode_record, read_records


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


def test_torn_tail_is_ignored(tmp_path: Path) -> None:
    sp = Spool(tmp_path)
    for i in range(5):
        sp.append("topic", b"key", b"value-%d" % i)
    seg = sp._active
    sp.close()
    # Simulate a crash in the middle of writing a sixth record.
    with open(seg.path, "ab") as fh:
        fh.write(b"\x40\x00\x00\x00\x01\x02")
    values = [v for _, _, _, v in read_records(seg.path)]
    assert values == [b"value-%d" % i for i in range(5)]
    # A flipped byte in the last record ends the segment there.
    data = bytearray(seg.path.read_bytes())
    data[-10] ^= 0xFF
    seg.path.write_bytes(bytes(data))
    assert [v for _, _, _, v in read_records(seg.path)] == [b"value-%d" % i for i in range(4)]


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
