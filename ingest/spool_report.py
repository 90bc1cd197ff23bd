"""What a spool directory holds, read without taking it over: for ``trajlake spool status`` and ``drain``.

A spool can be inspected while its worker or shipper runs: segments are only
read, and the numbers are a snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ingest.shipper import Progress, shipper_alive
from ingest.spool import (
    lock_is_free,
    missing_segments,
    quarantined,
    read_next,
    scan_frames,
    segment_numbers,
    segment_path,
)


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
    found: list[dict[str, object]] = field(default_factory=list)
    """Damage seen on disk that nothing has quarantined yet (a drain or a shipper will)."""

    @property
    def damaged(self) -> list[dict[str, object]]:
        """Ranges that lost records (kept or still on disk); torn tails held none."""
        return [q for q in self.quarantine + self.found if q.get("kind") != "torn"]

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
    next_seen = read_next(directory)  # before the listing: see missing_segments
    numbers = segment_numbers(directory)
    rep.quarantine = quarantined(directory)
    known = {(q.get("segment"), q.get("start"), q.get("end")) for q in rep.quarantine}
    for n in missing_segments(directory, numbers, next_seen):
        if (n, 0, 0) not in known:
            rep.found.append({"segment": n, "start": 0, "end": 0, "kind": "missing", "records_at_least": 0,
                              "file": None})  # fmt: skip
    for n in numbers:
        path = segment_path(directory, n)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        rep.segments += 1
        rep.bytes += len(data)
        scan = scan_frames(data, final=True, sealed_expected=n != numbers[-1])
        frames = scan.frames
        for d in scan.damage:
            if (n, d.start, d.end) not in known:
                rep.found.append({"segment": n, "start": d.start, "end": d.end, "kind": d.kind,
                                  "records_at_least": d.records_at_least, "file": None})  # fmt: skip
        if progress is not None and n < progress.segment:
            continue
        if progress is not None and n == progress.segment:
            frames = [f for f in frames if f.end > progress.offset]
        rep.records_left += len(frames)
    return rep


def spool_dirs(root: Path) -> list[Path]:
    """The worker spools under ``root`` (``$TRAJLAKE_HOME/spool``)."""
    if not Path(root).is_dir():
        return []
    return sorted(p for p in Path(root).iterdir() if p.is_dir())
