"""A token bucket: tokens accrue at ``rate`` per second up to ``capacity``."""

from __future__ import annotations

import time
from typing import Callable, Hashable

Clock = Callable[[], float]


class TokenBucket:
    def __init__(self, rate: float, capacity: float, clock: Clock = time.monotonic) -> None:
        if rate <= 0 or capacity <= 0:
            raise ValueError("rate and capacity must be positive")
        self.rate = float(rate)
        self.capacity = float(capacity)
        self._clock = clock
        self._tokens = float(capacity)
        self._last = clock()

    def _refill(self) -> float:
        """Add the tokens earned since the last update; return the current time."""
        now = self._clock()
        elapsed = now - self._last
        if elapsed > 0:
            self._tokens = min(self.capacity, self._tokens + elapsed * self.rate)
        return now

    @property
    def tokens(self) -> float:
        """Tokens available right now."""
        self._refill()
        return self._tokens

    def try_acquire(self, n: float = 1) -> bool:
        """Take ``n`` tokens if available. Never blocks."""
        if n > self.capacity:
            raise ValueError(f"cannot acquire {n} tokens from a bucket of {self.capacity}")
        now = self._refill()
        if self._tokens >= n:
            self._tokens -= n
            self._last = now
            return True
        return False

    def time_until(self, n: float = 1) -> float:
        """Seconds to wait until ``n`` tokens are available (0 if they already are)."""
        if n > self.capacity:
            raise ValueError(f"cannot acquire {n} tokens from a bucket of {self.capacity}")
        self._refill()
        missing = n - self._tokens
        return max(0.0, missing / self.rate)


class KeyedLimiter:
    """One :class:`TokenBucket` per key (user, IP address, ...)."""

    def __init__(self, rate: float, capacity: float, clock: Clock = time.monotonic) -> None:
        self.rate = rate
        self.capacity = capacity
        self._clock = clock
        self._buckets: dict[Hashable, TokenBucket] = {}

    def bucket(self, key: Hashable) -> TokenBucket:
        if key not in self._buckets:
            self._buckets[key] = TokenBucket(self.rate, self.capacity, self._clock)
        return self._buckets[key]

    def allow(self, key: Hashable, n: float = 1) -> bool:
        return self.bucket(key).try_acquire(n)

    def __len__(self) -> int:
        return len(self._buckets)
