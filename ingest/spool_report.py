"""What a spool directory holds, read without taking it over: for ``trajlake spool status`` and ``drain``.

A spool can be inspected while its worker or shipper runs: segments are only
read, and the numbers are a snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ingest.shipper import Progress, shipper_alive
from ingest.spool import lock_is_free, quarantined, scan_frames, segment_numbers, segment_path


@dataclass
class SpoolReport:
    """One spool directory, as found on disk."""

    name: str
    """The worker id (the directory's name)."""
    segments: int = 0
    """Segment files left."""
    bytes: int = 0
    """Bytes in them."""
    records_left: int = 0
    """Intact records in them not known to be acknowledged (a shipper's progress says which are)."""
    worker_alive: bool = False
    """A live process owns the spool."""
    shipper_alive: bool = False
    """A shipper serves it."""
    quarantine: list[dict[str, object]] = field(default_factory=list)
    """Damaged, torn and refused ranges kept beside it (``quarantine/index.jsonl``)."""
    shipper_error: str | None = None
    """The last delivery error its shipper reported."""

    @property
    def damaged(self) -> list[dict[str, object]]:
        """Quarantined ranges that lost records (``damaged``, ``rejected``); torn tails held none."""
        return [q for q in self.quarantine if q.get("kind") != "torn"]

    @property
    def ok(self) -> bool:
        """Nothing left to send and nothing damaged."""
        return self.records_left == 0 and not self.damaged


def inspect_spool(directory: Path) -> SpoolReport:
    """Read what ``directory`` holds (see :class:`SpoolReport`)."""
    directory = Path(directory)
    rep = SpoolReport(directory.name)
    progress = Progress.read(directory)
    rep.shipper_error = progress.error if progress else None
    rep.worker_alive = (directory / "LOCK").exists() and not lock_is_free(directory / "LOCK")
    rep.shipper_alive = shipper_alive(directory)
    numbers = segment_numbers(directory)
    for n in numbers:
        path = segment_path(directory, n)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        rep.segments += 1
        rep.bytes += len(data)
        frames = scan_frames(data, final=True, sealed_expected=n != numbers[-1]).frames
        if progress is not None and n < progress.segment:
            continue
        if progress is not None and n == progress.segment:
            frames = [f for f in frames if f.end > progress.offset]
        rep.records_left += len(frames)
    rep.quarantine = quarantined(directory)
    return rep


def spool_dirs(root: Path) -> list[Path]:
    """The worker spools under ``root`` (``$TRAJLAKE_HOME/spool``)."""
    if not Path(root).is_dir():
        return []
    return sorted(p for p in Path(root).iterdir() if p.is_dir())
