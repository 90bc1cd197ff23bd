"""Closed-interval arithmetic."""

from .intervals import Interval, gaps, merge, overlaps, total_length

__all__ = ["Interval", "gaps", "merge", "overlaps", "total_length"]
