"""UUIDv7 identifiers (RFC 9562): time-ordered, globally unique, the dedup key."""

from __future__ import annotations

import os
import random
import threading
import time
import uuid

_lock = threading.Lock()
_last_ms = 0
_counter = 0
# Random bits come from a generator seeded from the OS once per process (and again
# in every forked child, so parent and child never share a stream): one
# getrandom() system call per id would dominate the cost of making one.
_rng = random.Random(os.urandom(32))


def _reseed() -> None:
    _rng.seed(os.urandom(32))


os.register_at_fork(after_in_child=_reseed)


def uuid7() -> uuid.UUID:
    """Return a new UUIDv7.

    48 bits of Unix milliseconds, then a 12-bit counter that keeps ids made in the
    same millisecond by this process strictly increasing, then 62 random bits.
    """
    global _last_ms, _counter
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms > _last_ms:
            _last_ms = ms
            _counter = _rng.getrandbits(10)  # random start, headroom to count up
        else:
            _counter += 1
            if _counter > 0xFFF:  # counter overflow: borrow the next millisecond
                _last_ms += 1
                _counter = 0
            ms = _last_ms
        counter = _counter
    return uuid.UUID(int=_uuid7_int(ms, counter))


def _uuid7_int(ms: int, counter: int) -> int:
    rand = _rng.getrandbits(62)
    return ((ms & ((1 << 48) - 1)) << 80) | (0x7 << 76) | (counter << 64) | (0b10 << 62) | rand


def new_id() -> str:
    """A new UUIDv7 as its canonical string (the hot path: no ``uuid.UUID`` object)."""
    global _last_ms, _counter
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms > _last_ms:
            _last_ms = ms
            _counter = _rng.getrandbits(10)
        else:
            _counter += 1
            if _counter > 0xFFF:
                _last_ms += 1
                _counter = 0
            ms = _last_ms
        counter = _counter
    h = f"{_uuid7_int(ms, counter):032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def derived_id(ms: int, key: str) -> str:
    """A UUIDv7 that is a pure function of ``ms`` and ``key``.

    For events a job may send again after a crash (a re-judge reward of one
    episode in one run): the second send carries the same ``event_id``, so the
    pipeline's dedup keeps exactly one. The time bits are ``ms`` (the job's start)
    so the id still sorts by time like every other.
    """
    import hashlib

    digest = int.from_bytes(hashlib.sha256(key.encode()).digest()[:10], "big")  # 80 bits
    counter = digest >> 68  # 12 bits
    rand = digest & ((1 << 62) - 1)
    n = ((ms & ((1 << 48) - 1)) << 80) | (0x7 << 76) | (counter << 64) | (0b10 << 62) | rand
    h = f"{n:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
