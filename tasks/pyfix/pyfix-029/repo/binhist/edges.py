"""Computation of bin edges."""


def data_range(values):
    """Return ``(min, max)`` of ``values``.

    If all values are equal the range is widened by 0.5 on both sides so that
    it still has a non-zero width.
    """
    values = list(values)
    if not values:
        return 0.0, 1.0
    lo, hi = min(values), max(values)
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return lo, hi


def linear_edges(lo, hi, bins):
    """Return ``bins + 1`` equally spaced edges from ``lo`` to ``hi``.

    The last edge is exactly ``hi`` (no floating point drift).
    """
    if bins < 1:
        raise ValueError("bins must be at least 1")
    if not hi > lo:
        raise ValueError("hi must be greater than lo")
    width = (hi - lo) / bins
    return [lo + i * width for i in range(bins)] + [hi]
