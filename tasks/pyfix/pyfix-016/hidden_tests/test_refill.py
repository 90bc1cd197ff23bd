import pytest

from throttle import KeyedLimiter, TokenBucket


class FakeClock:
    def __init__(self, t=0.0):
        self.t = t

    def __call__(self):
        return self.t


def test_failed_attempt_does_not_double_refill():
    clock = FakeClock()
    b = TokenBucket(rate=1.0, capacity=2, clock=clock)
    assert b.try_acquire(2)
    clock.t = 0.5
    assert not b.try_acquire()
    clock.t = 0.875
    assert not b.try_acquire()
    clock.t = 1.0
    assert b.try_acquire()
    assert not b.try_acquire()


def test_reading_tokens_is_idempotent():
    clock = FakeClock()
    b = TokenBucket(rate=2.0, capacity=10, clock=clock)
    assert b.try_acquire(10)
    clock.t = 1.0
    assert b.tokens == pytest.approx(2.0)
    assert b.tokens == pytest.approx(2.0)
    assert b.tokens == pytest.approx(2.0)
    clock.t = 1.5
    assert b.tokens == pytest.approx(3.0)


def test_time_until_after_polling():
    clock = FakeClock()
    b = TokenBucket(rate=1.0, capacity=5, clock=clock)
    assert b.try_acquire(5)
    for step in range(1, 4):
        clock.t = step * 0.25
        b.tokens
    clock.t = 1.0
    assert b.time_until(2) == pytest.approx(1.0)
    assert b.time_until(1) == pytest.approx(0.0)


def test_rate_over_many_failed_attempts():
    clock = FakeClock()
    b = TokenBucket(rate=1.0, capacity=1, clock=clock)
    granted = 0
    for i in range(80):
        clock.t = i * 0.125  # 8 attempts per second for 10 s
        granted += b.try_acquire()
    # the initial token plus one per full second elapsed (t goes up to 9.875)
    assert granted == 10


def test_capacity_caps_refill():
    clock = FakeClock()
    b = TokenBucket(rate=5.0, capacity=3, clock=clock)
    clock.t = 100.0
    assert b.tokens == pytest.approx(3.0)
    assert [b.try_acquire() for _ in range(4)] == [True, True, True, False]


def test_refill_after_success():
    clock = FakeClock()
    b = TokenBucket(rate=4.0, capacity=4, clock=clock)
    assert b.try_acquire(4)
    clock.t = 0.5
    assert b.try_acquire(2)
    assert not b.try_acquire()


def test_keyed_limiter_rate_per_key():
    clock = FakeClock()
    lim = KeyedLimiter(rate=1.0, capacity=1, clock=clock)
    assert lim.allow("alice")
    clock.t = 0.25
    assert not lim.allow("alice")
    assert lim.allow("bob")
    clock.t = 0.5
    assert not lim.allow("alice")
    clock.t = 0.75
    assert not lim.allow("alice")
    clock.t = 1.0
    assert lim.allow("alice")
    assert not lim.allow("bob")
