"""Running statistics per key (endpoint, host, ...)."""

from collections import defaultdict

from .running import RunningStats


class GroupedStats:
    def __init__(self):
        self._groups = defaultdict(RunningStats)

    @classmethod
    def from_pairs(cls, pairs):
        grouped = cls()
        for key, value in pairs:
            grouped.add(key, value)
        return grouped

    def add(self, key, value):
        self._groups[key].push(value)

    def __getitem__(self, key):
        return self._groups[key]

    def keys(self):
        return sorted(self._groups)

    def merge(self, other):
        """Fold the statistics of ``other`` (e.g. another worker) into this one."""
        for key, stats in other._groups.items():
            self._groups[key].update(stats)
        return self

    def summary(self):
        return {key: self._groups[key].as_dict() for key in self.keys()}
