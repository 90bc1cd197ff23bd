"""This home's record of what ``trajlake import`` imported: file content -> episode.

The lake says which episodes exist once the pipeline folded them; the ledger says so at once, so
a second import of the same file right after the first is skipped too. It is a hint, never the
truth: a copy that is imported anyway (another home, a lost ledger) carries the same event ids,
which the pipeline keeps once.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any


class ImportLedger:
    """Append-only JSON lines: ``{episode_id, sha256, format, source, at}`` per imported file."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def known(self, episode_ids: set[str]) -> set[str]:
        """Which of ``episode_ids`` the ledger holds (an unreadable line is skipped)."""
        if not episode_ids or not self.path.exists():
            return set()
        found = set()
        with self.path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    eid = json.loads(line).get("episode_id")
                except (ValueError, AttributeError):
                    continue
                if isinstance(eid, str) and eid in episode_ids:
                    found.add(eid)
        return found

    def add(self, reports: Iterable[Any]) -> None:
        """Record imported files (``ImportReport``s), after their events were acknowledged."""
        lines = [
            json.dumps(
                {
                    "episode_id": r.episode_id,
                    "sha256": r.sha256,
                    "format": r.format,
                    "source": str(r.source),
                    "at": dt.datetime.now(dt.UTC).isoformat(),
                }
            )  # fmt: skip
            for r in reports
        ]
        if not lines:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
