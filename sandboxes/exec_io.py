"""Output capture shared by the backends: capped buffers and exit statuses."""

from __future__ import annotations

import os


class CappedBuffer:
    """Keeps the first ``limit`` bytes written to it and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._parts: list[bytes] = []
        self._kept = 0

    def feed(self, data: bytes) -> None:
        """Append a chunk; what exceeds the limit is only counted."""
        self.total += len(data)
        room = self.limit - self._kept
        if room > 0:
            piece = data[:room]
            self._parts.append(piece)
            self._kept += len(piece)

    @property
    def truncated(self) -> bool:
        """More was written than kept."""
        return self.total > self.limit

    def text(self) -> str:
        """What was kept, as text (undecodable bytes replaced)."""
        return b"".join(self._parts).decode("utf-8", "replace")


def exit_code_of(status: int) -> int:
    """Shell-style exit code of a wait status: ``128 + n`` for a signal ``n``."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.waitstatus_to_exitcode(status)
