"""Double-ended queue backed by a circular array that grows on demand."""

from __future__ import annotations

from typing import Any, Iterable, Iterator


class RingDeque:
    """Items live in ``_buf[_head]``, ``_buf[_head + 1]``, ... wrapping around
    the end of ``_buf``; ``_size`` of them are in use."""

    def __init__(self, iterable: Iterable[Any] = (), capacity: int = 8) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._buf: list[Any] = [None] * capacity
        self._head = 0
        self._size = 0
        for item in iterable:
            self.append(item)

    @property
    def capacity(self) -> int:
        return len(self._buf)

    def _slot(self, index: int) -> int:
        """Physical position of logical ``index`` (0 <= index < capacity)."""
        return (self._head + index) % len(self._buf)

    def _grow(self) -> None:
        self._buf.extend([None] * len(self._buf))

    def append(self, item: Any) -> None:
        if self._size == len(self._buf):
            self._grow()
        self._buf[self._slot(self._size)] = item
        self._size += 1

    def appendleft(self, item: Any) -> None:
        if self._size == len(self._buf):
            self._grow()
        self._head = (self._head - 1) % len(self._buf)
        self._buf[self._head] = item
        self._size += 1

    def pop(self) -> Any:
        if not self._size:
            raise IndexError("pop from an empty RingDeque")
        slot = self._slot(self._size - 1)
        item, self._buf[slot] = self._buf[slot], None
        self._size -= 1
        return item

    def popleft(self) -> Any:
        if not self._size:
            raise IndexError("pop from an empty RingDeque")
        item, self._buf[self._head] = self._buf[self._head], None
        self._head = (self._head + 1) % len(self._buf)
        self._size -= 1
        return item

    def __getitem__(self, index: int) -> Any:
        if index < 0:
            index += self._size
        if not 0 <= index < self._size:
            raise IndexError("RingDeque index out of range")
        return self._buf[self._slot(index)]

    def __setitem__(self, index: int, value: Any) -> None:
        if index < 0:
            index += self._size
        if not 0 <= index < self._size:
            raise IndexError("RingDeque index out of range")
        self._buf[self._slot(index)] = value

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        for i in range(self._size):
            yield self._buf[self._slot(i)]

    def __repr__(self) -> str:
        return f"RingDeque({list(self)!r})"

    def clear(self) -> None:
        self._buf = [None] * len(self._buf)
        self._head = 0
        self._size = 0
