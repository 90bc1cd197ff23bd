"""Closed intervals ``[start, end]`` and operations on collections of them."""

from __future__ import annotations

from typing import Iterable, NamedTuple


class Interval(NamedTuple):
    start: float
    end: float

    @property
    def length(self) -> float:
        return self.end - self.start

    def contains(self, point: float) -> bool:
        return self.start <= point <= self.end


def _checked(intervals: Iterable[Interval]) -> list[Interval]:
    result = []
    for iv in intervals:
        iv = Interval(*iv)
        if iv.start > iv.end:
            raise ValueError(f"interval start after end: {iv}")
        result.append(iv)
    return result


def overlaps(a: Interval, b: Interval) -> bool:
    """True if the closed intervals ``a`` and ``b`` share at least one point."""
    return a.start <= b.end and b.start <= a.end


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """Merge overlapping intervals.

    Returns a list of pairwise disjoint intervals, sorted by start, that covers
    exactly the same points as the input.
    """
    ordered = sorted(_checked(intervals))
    if not ordered:
        return []
    merged = []
    cur_start, cur_end = ordered[0]
    for start, end in ordered[1:]:
        if start < cur_end:
            cur_end = max(cur_end, end)
        else:
            merged.append(Interval(cur_start, cur_end))
            cur_start, cur_end = start, end
    merged.append(Interval(cur_start, cur_end))
    return merged


def gaps(intervals: Iterable[Interval]) -> list[Interval]:
    """The open stretches between the merged intervals, as intervals."""
    merged = merge(intervals)
    return [Interval(a.end, b.start) for a, b in zip(merged, merged[1:])]


def total_length(intervals: Iterable[Interval]) -> float:
    """Total length covered by the union of ``intervals``."""
    return sum(iv.length for iv in merge(intervals))
