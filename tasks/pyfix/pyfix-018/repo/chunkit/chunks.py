"""Split iterables into batches, even parts and sliding windows."""

from __future__ import annotations

from collections import deque
from itertools import islice
from typing import Any, Iterable, Iterator


def _check_positive(name: str, value: int) -> None:
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")


def _count(iterable: Iterable[Any]) -> int:
    """Number of items in ``iterable``; works for sized and unsized inputs."""
    try:
        return len(iterable)  # type: ignore[arg-type]
    except TypeError:
        return sum(1 for _ in iterable)


def batched(iterable: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """Yield successive lists of ``size`` items; the last one may be shorter."""
    _check_positive("size", size)
    it = iter(iterable)
    while batch := list(islice(it, size)):
        yield batch


def split_evenly(iterable: Iterable[Any], parts: int) -> list[list[Any]]:
    """Split into ``parts`` contiguous lists whose lengths differ by at most one.

    Earlier parts get the extra items, e.g. 5 items into 2 parts -> sizes 3, 2.
    If there are fewer items than parts, the trailing parts are empty.
    """
    _check_positive("parts", parts)
    total = _count(iterable)
    base, extra = divmod(total, parts)
    it = iter(iterable)
    return [list(islice(it, base + (1 if i < extra else 0))) for i in range(parts)]


def windowed(iterable: Iterable[Any], size: int) -> Iterator[tuple[Any, ...]]:
    """Sliding windows of ``size`` consecutive items."""
    _check_positive("size", size)
    window: deque[Any] = deque(maxlen=size)
    for item in iterable:
        window.append(item)
        if len(window) == size:
            yield tuple(window)


def chunk_stats(iterable: Iterable[Any], size: int) -> dict[str, int]:
    """How :func:`batched` would split ``iterable`` into chunks of ``size``."""
    _check_positive("size", size)
    items = _count(iterable)
    chunks = [len(b) for b in batched(iterable, size)]
    return {
        "items": items,
        "chunks": len(chunks),
        "last_chunk": chunks[-1] if chunks else 0,
    }
