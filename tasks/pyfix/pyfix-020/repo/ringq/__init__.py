"""A growable circular-buffer deque."""

from .deque import RingDeque

__all__ = ["RingDeque"]
