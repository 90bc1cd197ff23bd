"""A bounded mapping that evicts its least recently used entry."""

from __future__ import annotations

import functools
from collections import OrderedDict
from typing import Any, Callable, Hashable

_MISSING = object()


class LRUCache:
    """Mapping with at most ``capacity`` entries.

    Both :meth:`get` and :meth:`put` mark a key as most recently used; when the
    cache is full, :meth:`put` evicts the least recently used key.
    :meth:`peek` and ``key in cache`` do not change the order.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._data: OrderedDict[Hashable, Any] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, default: Any = None) -> Any:
        value = self._data.get(key, _MISSING)
        if value is _MISSING:
            self.misses += 1
            return default
        self.hits += 1
        return value

    def peek(self, key: Hashable, default: Any = None) -> Any:
        return self._data.get(key, default)

    def put(self, key: Hashable, value: Any) -> None:
        if key in self._data:
            self._data.move_to_end(key)
        self._data[key] = value
        if len(self._data) > self.capacity:
            self._data.popitem(last=False)

    def pop(self, key: Hashable, default: Any = None) -> Any:
        return self._data.pop(key, default)

    def keys(self) -> list[Hashable]:
        """Keys from least to most recently used."""
        return list(self._data)

    def clear(self) -> None:
        self._data.clear()
        self.hits = self.misses = 0

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)


def memoize(capacity: int = 128) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Cache a function's results in an :class:`LRUCache` keyed by its arguments."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        cache = LRUCache(capacity)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            key = (args, tuple(sorted(kwargs.items())))
            result = cache.get(key, _MISSING)
            if result is _MISSING:
                result = fn(*args, **kwargs)
                cache.put(key, result)
            return result

        wrapper.cache = cache  # type: ignore[attr-defined]
        return wrapper

    return decorate
