"""Counting values into fixed-width bins.

Bins are half-open, ``[edge[i], edge[i + 1])``, except the last bin which is
closed, ``[edge[-2], edge[-1]]`` -- the same convention as ``numpy.histogram``.
"""

from bisect import bisect_right

from .edges import data_range, linear_edges


def bin_index(x, edges):
    """Index of the bin of ``edges`` that contains ``x``, or ``None`` when ``x``
    lies outside ``[edges[0], edges[-1]]``."""
    if x < edges[0] or x >= edges[-1]:
        return None
    return bisect_right(edges, x) - 1


def histogram(values, bins=10, range=None):
    """Count ``values`` into ``bins`` equal-width bins.

    ``range`` is ``(lo, hi)``; by default it is the range of the data. Values
    outside the range are ignored. Returns ``(counts, edges)``.
    """
    values = list(values)
    lo, hi = range if range is not None else data_range(values)
    edges = linear_edges(lo, hi, bins)
    counts = [0] * bins
    for x in values:
        index = bin_index(x, edges)
        if index is not None:
            counts[index] += 1
    return counts, edges


def cumulative(counts):
    """Running totals of ``counts``."""
    total, out = 0, []
    for c in counts:
        total += c
        out.append(total)
    return out
