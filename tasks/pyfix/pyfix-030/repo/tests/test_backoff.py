import random

import pytest

from backoffkit import Backoff, RetryError, retry_call


def test_exponential_growth_and_cap():
    policy = Backoff(base=0.5, factor=2.0, cap=3.0)
    assert [policy.raw_delay(n) for n in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_full_jitter_within_bounds():
    policy = Backoff(base=1.0, cap=8.0, jitter="full")
    rng = random.Random(1)
    for n in range(6):
        assert 0 <= policy.delay(n, rng) <= policy.raw_delay(n)


def test_retry_gives_up():
    sleeps = []

    def always_fails():
        raise ConnectionError("down")

    with pytest.raises(RetryError) as info:
        retry_call(always_fails, Backoff(), max_attempts=3, sleep=sleeps.append)
    assert info.value.attempts == 3
    assert sleeps == [0.5, 1.0]
    assert isinstance(info.value.__cause__, ConnectionError)
