"""Streaming mean / variance with Welford's algorithm.

Two accumulators can be combined with the parallel formula of Chan, Golub and
LeVeque, so partial results computed on different shards or workers can be
merged without access to the raw values.
"""

import math


class RunningStats:
    __slots__ = ("n", "mean", "_m2", "min", "max")

    def __init__(self):
        self.n = 0
        self.mean = 0.0
        self._m2 = 0.0  # sum of squared deviations from the mean
        self.min = math.inf
        self.max = -math.inf

    @classmethod
    def from_values(cls, values):
        stats = cls()
        stats.extend(values)
        return stats

    def copy(self):
        other = RunningStats()
        other.n, other.mean, other._m2 = self.n, self.mean, self._m2
        other.min, other.max = self.min, self.max
        return other

    def push(self, x):
        self.n += 1
        delta = x - self.mean
        self.mean += delta / self.n
        self._m2 += delta * (x - self.mean)
        self.min = min(self.min, x)
        self.max = max(self.max, x)

    def extend(self, values):
        for x in values:
            self.push(x)
        return self

    def update(self, other):
        """Merge ``other`` into this accumulator in place and return ``self``."""
        if other.n == 0:
            return self
        if self.n == 0:
            self.n, self.mean, self._m2 = other.n, other.mean, other._m2
            self.min, self.max = other.min, other.max
            return self
        n = self.n + other.n
        self.mean += (other.mean - self.mean) * other.n / n
        delta = other.mean - self.mean
        self._m2 += other._m2 + delta * delta * self.n * other.n / n
        self.n = n
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)
        return self

    def __add__(self, other):
        return self.copy().update(other)

    @property
    def variance(self):
        """Population variance (0.0 for fewer than one value)."""
        return self._m2 / self.n if self.n else 0.0

    @property
    def sample_variance(self):
        """Sample variance with Bessel's correction (0.0 for fewer than two values)."""
        return self._m2 / (self.n - 1) if self.n > 1 else 0.0

    @property
    def stdev(self):
        """Population standard deviation."""
        return math.sqrt(self.variance)

    def as_dict(self):
        return {
            "n": self.n,
            "mean": self.mean,
            "stdev": self.stdev,
            "min": self.min if self.n else None,
            "max": self.max if self.n else None,
        }
