"""streamstats - single-pass (streaming) statistics that can be merged."""

from .grouped import GroupedStats
from .running import RunningStats

__all__ = ["GroupedStats", "RunningStats"]
