"""Least-recently-used caching."""

from .cache import LRUCache, memoize

__all__ = ["LRUCache", "memoize"]
