"""A heap-based event scheduler with lazy cancellation."""

from __future__ import annotations

import heapq
import itertools
from typing import Any, Callable


class Scheduler:
    """Runs callbacks at points of a virtual clock.

    Cancelled events are not removed from the heap right away (that would be
    O(n)); their ids are remembered in ``_cancelled`` and the entries are
    discarded when they reach the top of the heap.
    """

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self._heap: list[tuple[float, int, Callable[..., Any], tuple[Any, ...]]] = []
        self._ids = itertools.count()
        self._pending: set[int] = set()
        self._cancelled: set[int] = set()

    def schedule(self, at: float, callback: Callable[..., Any], *args: Any) -> int:
        """Run ``callback(*args)`` at time ``at``; returns an id for :meth:`cancel`."""
        if at < self.now:
            raise ValueError(f"cannot schedule in the past ({at} < {self.now})")
        event_id = next(self._ids)
        heapq.heappush(self._heap, (at, event_id, callback, args))
        self._pending.add(event_id)
        return event_id

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any) -> int:
        return self.schedule(self.now + delay, callback, *args)

    def cancel(self, event_id: int) -> bool:
        """Cancel a pending event. Returns False if it already ran or is unknown."""
        if event_id not in self._pending:
            return False
        self._pending.discard(event_id)
        self._cancelled.add(event_id)
        return True

    def __len__(self) -> int:
        """Number of pending (not cancelled, not yet run) events."""
        return len(self._pending)

    def next_time(self) -> float | None:
        """Time of the earliest pending event, or None if there is none."""
        if not self._heap:
            return None
        return self._heap[0][0]

    def _pop_and_run(self) -> None:
        at, event_id, callback, args = heapq.heappop(self._heap)
        if event_id in self._cancelled:
            self._cancelled.discard(event_id)
            return
        self._pending.discard(event_id)
        self.now = at
        callback(*args)

    def run_until(self, until: float) -> None:
        """Run every event due at or before ``until``, then set ``now`` to it."""
        while self._heap and self._heap[0][0] <= until:
            self._pop_and_run()
        self.now = max(self.now, until)

    def run_next(self) -> bool:
        """Run the earliest pending event. Returns False if there is none."""
        if self.next_time() is None:
            return False
        self._pop_and_run()
        return True
