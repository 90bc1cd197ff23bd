"""Importers of other agents' trajectories: each file becomes one trajlake episode.

An importer never writes events by hand: it drives the ordinary
:class:`~ingest.recorder.EpisodeRecorder` (so ids, ``seq``, validation, blob
offloading and delivery are those of any rollout worker) and returns an
:class:`ImportReport` that accounts for every item of the source: mapped to
first-class events, or kept verbatim as an ``annotation`` and listed in
:attr:`ImportReport.unmapped`.

Public API: :func:`import_file`, :func:`check_file`, :func:`detect_format`, :func:`formats`,
:class:`TrajectoryFormat`, :class:`ImportReport`. Formats are registered as entry points of the
group ``trajlake.importers`` (this package's own, and any other installed package's).

Usage::

    with recording(bootstrap="127.0.0.1:9092", home=home, worker_id="importer") as rec:
        report = import_file("run.traj.json", rec, format="mini-swe-agent")
        print(report.summary())
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol

from importers.report import ImportReport, SourceFile
from ingest.delivery import Delivery, DeliveryStats
from ingest.errors import ImportFormatError
from ingest.recorder import EpisodeRecorder
from schemas.errors import TrajlakeError

log = logging.getLogger(__name__)

ENTRY_POINTS = "trajlake.importers"
"""The entry-point group a package registers a :class:`TrajectoryFormat` under (its name: the format's)."""


class Importer(Protocol):
    """Records one trajectory file as one episode through a recorder."""

    def __call__(
        self, path: Path | str, recorder: EpisodeRecorder, *, episode_id: str | None = None
    ) -> ImportReport:
        """Import ``path``; raise :class:`ImportFormatError` when it is not in this format."""
        ...


@dataclass(frozen=True)
class TrajectoryFormat:
    """A trajectory format ``trajlake import`` reads.

    Attributes:
        name: the format's name (``--format``; the entry point's name).
        looks_like: whether a decoded JSON document is in this format (detection from content:
            true for this format's documents only).
        import_file: records one file as one episode through a recorder, returning the report
            that accounts for every item of the source.
        description: one line for ``trajlake import --help`` and errors.
    """

    name: str
    looks_like: Callable[[Any], bool]
    import_file: Importer
    description: str = ""


def _builtin() -> dict[str, TrajectoryFormat]:
    from importers import mini_swe_agent, openhands, swe_agent

    return {f.name: f for f in (mini_swe_agent.TRAJECTORY_FORMAT, openhands.TRAJECTORY_FORMAT,
                                swe_agent.TRAJECTORY_FORMAT)}  # fmt: skip


@cache
def formats() -> dict[str, TrajectoryFormat]:
    """Every format: this package's, and those other packages register under :data:`ENTRY_POINTS`.

    An entry point that does not load, or is not a :class:`TrajectoryFormat` named as itself, is
    left out with a warning naming its package (one broken plug-in never stops an import).
    """
    found = _builtin()
    for ep in entry_points(group=ENTRY_POINTS):
        if ep.name in found and ep.value.startswith("importers."):
            continue  # (this package's own, already in)
        try:
            fmt = ep.load()
        except Exception as exc:  # noqa: BLE001 - a third party's code: any error is theirs
            log.warning("trajectory format %r (%s) does not load: %s", ep.name, ep.value, exc)
            continue
        if not isinstance(fmt, TrajectoryFormat) or fmt.name != ep.name:
            log.warning("entry point %r (%s) is not a TrajectoryFormat named %r", ep.name, ep.value, ep.name)
            continue
        found.setdefault(fmt.name, fmt)
    return found


def detect_format(path: Path | str) -> str:
    """Name the format of a trajectory file from its content.

    Args:
        path: the file.

    Returns:
        A name of :func:`formats`.

    Raises:
        ImportFormatError: the file is not JSON, or matches no format (or
            several).
    """
    source = SourceFile.read(path)
    matches = [name for name, f in formats().items() if f.looks_like(source.data)]
    if len(matches) != 1:
        what = "no known trajectory format" if not matches else f"several formats ({matches})"
        raise ImportFormatError(f"{source.path}: matches {what}; known formats: {sorted(formats())}")
    return matches[0]


def check_file(path: Path | str, format: str | None = None) -> str:
    """The format of a trajectory file, checked before anything is recorded.

    Args:
        path: the trajectory file.
        format: the format it must be in (detected from the content when ``None``).

    Returns:
        A name of :func:`formats`.

    Raises:
        ImportFormatError: unreadable, not JSON, an unknown ``format``, or not in that format.
    """
    if format is None:
        return detect_format(path)
    known = formats()
    if format not in known:
        raise ImportFormatError(f"unknown trajectory format {format!r}; known: {sorted(known)}")
    source = SourceFile.read(path)
    if not known[format].looks_like(source.data):
        others = [name for name, f in known.items() if f.looks_like(source.data)]
        hint = f"it looks like {others[0]}" if others else "it matches no known format"
        raise ImportFormatError(f"{source.path}: not a {format} trajectory ({hint})")
    return format


def import_file(
    path: Path | str,
    recorder: EpisodeRecorder,
    *,
    format: str | None = None,
    episode_id: str | None = None,
) -> ImportReport:
    """Record a trajectory file of another agent as one episode through ``recorder``.

    Args:
        path: the trajectory file.
        recorder: the recorder the events go through (it is not closed).
        format: a name of :func:`formats`; detected from the content when ``None``.
        episode_id: the episode id to record under (``None``: derived from the format and the
            content, so a re-import names the same episode and sends the same event ids).

    Returns:
        The report of what was recorded and what was kept only as annotations.

    Raises:
        ImportFormatError: unknown ``format``, or the file is not in that
            format (nothing is recorded then).
    """
    name = format if format is not None else detect_format(path)
    fmt = formats().get(name)
    if fmt is None:
        raise ImportFormatError(f"unknown trajectory format {name!r}; known: {sorted(formats())}")
    # recorded aside first: a file that fails half-way sends nothing (its ids are permanent, and a
    # partial episode under them would make every later import of the file look done)
    staging = _Staging()
    aside = EpisodeRecorder(
        staging, worker_id=recorder.producer.worker_id, topic=recorder.topic, blobs=recorder.blobs,
        inline_limit=recorder.inline_limit, producer=recorder.producer,
    )  # fmt: skip
    try:
        report = fmt.import_file(path, aside, episode_id=episode_id)
    except ImportFormatError:
        raise
    except TrajlakeError as exc:
        raise ImportFormatError(f"{path}: not imported, nothing sent: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - any importer's failure on a file is the file's, said once
        raise ImportFormatError(
            f"{path}: the {name} importer failed on it ({type(exc).__name__}: {exc}); nothing was sent"
        ) from exc
    partitions: dict[bytes, int | None] = {}
    for topic, key, value in staging.records:
        if key not in partitions:
            partitions[key] = recorder.delivery.partition_for(topic, key)
        recorder.delivery.submit(topic, key, value, partition=partitions[key])
    return report


class _Staging(Delivery):
    """A delivery that only keeps what it is given (an import is recorded aside, then sent whole)."""

    def __init__(self) -> None:
        self.records: list[tuple[str, bytes, bytes]] = []
        self.stats = DeliveryStats()

    @property
    def healthy(self) -> bool:  # noqa: D102
        return True

    def partition_for(self, topic: str, key: bytes) -> int | None:  # noqa: D102
        return None

    def submit(self, topic: str, key: bytes, value: bytes, *, partition: int | None = None) -> None:  # noqa: D102
        self.records.append((topic, key, value))

    @property
    def pending(self) -> int:  # noqa: D102
        return 0

    def flush(self, timeout: float | None = 60.0) -> None:  # noqa: D102
        return None

    def close(self, timeout: float | None = 30.0) -> None:  # noqa: D102
        return None


__all__ = [
    "ENTRY_POINTS",
    "ImportReport",
    "Importer",
    "TrajectoryFormat",
    "check_file",
    "detect_format",
    "formats",
    "import_file",
]
