import itertools
import random

import pytest

from backoffkit import Backoff, RetryError, retry_call


def test_small_attempts_unchanged():
    policy = Backoff(base=0.5, factor=2.0, cap=30.0)
    assert [policy.raw_delay(n) for n in range(8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


@pytest.mark.parametrize("attempt", [1023, 1024, 1100, 5000, 10 ** 6])
def test_huge_attempt_stays_at_cap(attempt):
    assert Backoff(base=0.5, factor=2.0, cap=30.0).raw_delay(attempt) == 30.0


def test_integer_factor_huge_attempt():
    assert Backoff(base=0.25, factor=3, cap=12.0).raw_delay(2000) == 12.0


def test_factor_one_is_constant():
    assert Backoff(base=2.0, factor=1.0, cap=30.0).raw_delay(10 ** 6) == 2.0


def test_jitter_with_huge_attempt():
    rng = random.Random(42)
    full = Backoff(base=1.0, cap=10.0, jitter="full")
    equal = Backoff(base=1.0, cap=10.0, jitter="equal")
    assert 0 <= full.delay(3000, rng) <= 10.0
    assert 5.0 <= equal.delay(3000, rng) <= 10.0


def test_delays_generator_runs_long():
    policy = Backoff(base=0.5, cap=30.0)
    tail = list(itertools.islice(policy.delays(), 1500))[-3:]
    assert tail == [30.0, 30.0, 30.0]


def test_retry_forever_survives_many_failures():
    calls = {"n": 0}
    sleeps = []

    def flaky():
        calls["n"] += 1
        if calls["n"] <= 1500:
            raise ConnectionError("broker down")
        return "connected"

    result = retry_call(flaky, Backoff(base=0.5, cap=30.0), max_attempts=None, sleep=sleeps.append)
    assert result == "connected"
    assert len(sleeps) == 1500
    assert sleeps[-1] == 30.0
    assert max(sleeps) == 30.0


def test_retry_error_cause_preserved_after_many_attempts():
    def always_fails():
        raise TimeoutError("nope")

    with pytest.raises(RetryError) as info:
        retry_call(always_fails, Backoff(), max_attempts=1200, sleep=lambda s: None)
    assert isinstance(info.value.__cause__, TimeoutError)
    assert info.value.attempts == 1200
