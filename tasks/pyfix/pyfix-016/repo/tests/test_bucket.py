import pytest

from throttle import KeyedLimiter, TokenBucket


class FakeClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_starts_full_and_drains():
    clock = FakeClock()
    b = TokenBucket(rate=1, capacity=3, clock=clock)
    assert [b.try_acquire() for _ in range(4)] == [True, True, True, False]


def test_refills_after_successful_acquire():
    clock = FakeClock()
    b = TokenBucket(rate=2, capacity=2, clock=clock)
    assert b.try_acquire(2)
    clock.t += 1.0
    assert b.try_acquire(2)


def test_too_many_tokens_rejected():
    b = TokenBucket(rate=1, capacity=2, clock=FakeClock())
    with pytest.raises(ValueError):
        b.try_acquire(3)


def test_keyed_limiter_separate_buckets():
    lim = KeyedLimiter(rate=1, capacity=1, clock=FakeClock())
    assert lim.allow("a") and lim.allow("b")
    assert not lim.allow("a")
    assert len(lim) == 2
