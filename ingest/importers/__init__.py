"""Importers of other agents' trajectories: each file becomes one trajlake episode.

An importer never writes events by hand: it drives the ordinary
:class:`~ingest.recorder.EpisodeRecorder` (so ids, ``seq``, validation, blob
offloading and delivery are those of any rollout worker) and returns an
:class:`ImportReport` that accounts for every item of the source: mapped to
first-class events, or kept verbatim as an ``annotation`` and listed in
:attr:`ImportReport.unmapped`.

Public API: :func:`import_file`, :func:`check_file`, :func:`detect_format`, :data:`FORMATS`,
:class:`ImportReport`.

Usage::

    with recording(bootstrap="127.0.0.1:9092", home=home, worker_id="importer") as rec:
        report = import_file("run.traj.json", rec, format="mini-swe-agent")
        print(report.summary())
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ingest.errors import ImportFormatError
from ingest.importers import mini_swe_agent, openhands
from ingest.importers.report import ImportReport, SourceFile
from ingest.recorder import EpisodeRecorder


class Importer(Protocol):
    """Records one trajectory file as one episode through a recorder."""

    def __call__(
        self, path: Path | str, recorder: EpisodeRecorder, *, episode_id: str | None = None
    ) -> ImportReport:
        """Import ``path``; raise :class:`ImportFormatError` when it is not in this format."""
        ...


FORMATS: dict[str, Importer] = {
    mini_swe_agent.FORMAT: mini_swe_agent.import_mini_swe_agent,
    openhands.FORMAT: openhands.import_openhands,
}
"""Importer by format name (``mini-swe-agent``, ``openhands``)."""

_SHAPES: dict[str, Callable[[Any], bool]] = {
    mini_swe_agent.FORMAT: mini_swe_agent.looks_like,
    openhands.FORMAT: openhands.looks_like,
}


def detect_format(path: Path | str) -> str:
    """Name the format of a trajectory file from its content.

    Args:
        path: the file.

    Returns:
        A key of :data:`FORMATS`.

    Raises:
        ImportFormatError: the file is not JSON, or matches no format (or
            several).
    """
    source = SourceFile.read(path)
    matches = [name for name, looks_like in _SHAPES.items() if looks_like(source.data)]
    if len(matches) != 1:
        what = "no known trajectory format" if not matches else f"several formats ({matches})"
        raise ImportFormatError(f"{source.path}: matches {what}; known formats: {sorted(FORMATS)}")
    return matches[0]


def check_file(path: Path | str, format: str | None = None) -> str:
    """The format of a trajectory file, checked before anything is recorded.

    Args:
        path: the trajectory file.
        format: the format it must be in (detected from the content when ``None``).

    Returns:
        A key of :data:`FORMATS`.

    Raises:
        ImportFormatError: unreadable, not JSON, an unknown ``format``, or not in that format.
    """
    if format is None:
        return detect_format(path)
    if format not in FORMATS:
        raise ImportFormatError(f"unknown trajectory format {format!r}; known: {sorted(FORMATS)}")
    source = SourceFile.read(path)
    if not _SHAPES[format](source.data):
        others = [name for name, looks_like in _SHAPES.items() if looks_like(source.data)]
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
        format: a key of :data:`FORMATS`; detected from the content when ``None``.
        episode_id: the episode id to record under (``None``: derived from the format and the
            content, so a re-import names the same episode and sends the same event ids).

    Returns:
        The report of what was recorded and what was kept only as annotations.

    Raises:
        ImportFormatError: unknown ``format``, or the file is not in that
            format (nothing is recorded then).
    """
    name = format if format is not None else detect_format(path)
    importer = FORMATS.get(name)
    if importer is None:
        raise ImportFormatError(f"unknown trajectory format {name!r}; known: {sorted(FORMATS)}")
    return importer(path, recorder, episode_id=episode_id)


__all__ = ["FORMATS", "ImportReport", "Importer", "check_file", "detect_format", "import_file"]
