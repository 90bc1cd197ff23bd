"""Exponential backoff with an upper bound and optional jitter."""

import random
from dataclasses import dataclass

JITTER_MODES = ("none", "full", "equal")


@dataclass(frozen=True)
class Backoff:
    base: float = 0.5     # delay before the first retry, in seconds
    factor: float = 2.0   # growth per attempt
    cap: float = 30.0     # upper bound for any delay
    jitter: str = "none"  # "none", "full" (0..d) or "equal" (d/2..d)

    def __post_init__(self):
        if self.jitter not in JITTER_MODES:
            raise ValueError(f"jitter must be one of {JITTER_MODES}")
        if self.base < 0 or self.cap < 0 or self.factor < 1:
            raise ValueError("base and cap must be >= 0 and factor >= 1")

    def raw_delay(self, attempt):
        """Delay before retry number ``attempt`` (0-based), without jitter:
        ``base * factor ** attempt``, but never more than ``cap``."""
        if attempt < 0:
            raise ValueError("attempt must be >= 0")
        return min(self.cap, self.base * self.factor ** attempt)

    def delay(self, attempt, rng=None):
        """Delay before retry number ``attempt`` with jitter applied."""
        d = self.raw_delay(attempt)
        if self.jitter == "none":
            return d
        rng = rng or random
        if self.jitter == "full":
            return rng.uniform(0, d)
        return d / 2 + rng.uniform(0, d / 2)

    def delays(self, max_attempts=None, rng=None):
        """Yield successive delays; forever when ``max_attempts`` is None."""
        attempt = 0
        while max_attempts is None or attempt < max_attempts:
            yield self.delay(attempt, rng)
            attempt += 1
