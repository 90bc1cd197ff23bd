"""Iteration over calendar dates."""

from datetime import timedelta

ONE_DAY = timedelta(days=1)


def date_range(start, end, step=ONE_DAY):
    """Yield every date from ``start`` to ``end``, both inclusive.

    Yields nothing when ``end`` is before ``start``.
    """
    if step <= timedelta(0):
        raise ValueError("step must be positive")
    current = start
    while current < end:
        yield current
        current += step
