"""What an import read and did: :class:`SourceFile`, :class:`ImportReport`, :class:`ReportingEpisode`.

An importer records a foreign trajectory through the ordinary
:class:`~ingest.recorder.Episode` API. It wraps the episode in a
:class:`ReportingEpisode` so that every event it records is counted in the
report by type, and it accounts for every item of the source (a message, an
event of the other agent's log): an item is either *mapped* (it became one or
more first-class events, or fed the ``episode_started`` metadata) or
*unmapped* (it became an ``annotation`` event carrying the raw item, and a
line in :attr:`ImportReport.unmapped` says which item and why). Nothing is
dropped silently.

:class:`SourceFile` is the file the report describes: its bytes, their
sha256 (which is also the file's address in the blob store, where importers
keep the whole source so that fields without an event field stay reachable)
and its decoded JSON.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingest.errors import ImportFormatError
from ingest.recorder import Episode, EpisodeRecorder
from schemas.events import ChatMessage, EpisodeStatus, ToolErrorKind
from schemas.ids import derived_id

UNMAPPED_KEY = "import.unmapped"
"""Annotation key of a source item that has no first-class event type."""


@dataclass(frozen=True)
class SourceFile:
    """A trajectory file as read from disk.

    Attributes:
        path: where it was read from.
        raw: its bytes.
        sha256: hex sha256 of ``raw``.
        data: its decoded JSON.
    """

    path: Path
    raw: bytes
    sha256: str
    data: Any

    @classmethod
    def read(cls, path: Path | str) -> SourceFile:
        """Read and decode a JSON trajectory file.

        Args:
            path: the file.

        Returns:
            The file's bytes, hash and JSON.

        Raises:
            ImportFormatError: the file cannot be read, or is not UTF-8 JSON.
        """
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ImportFormatError(f"{path}: cannot read it ({exc.strerror or exc})") from exc
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ImportFormatError(f"{path}: not a UTF-8 JSON file: {exc}") from exc
        except (RecursionError, ValueError) as exc:  # nested too deep; an integer past Python's digit limit
            why = f"{type(exc).__name__}: {exc}"
            raise ImportFormatError(f"{path}: JSON that cannot be read here: {why}") from exc
        return cls(path=path, raw=raw, sha256=hashlib.sha256(raw).hexdigest(), data=data)

    def keep(self, recorder: EpisodeRecorder) -> bool:
        """Store the whole file in the recorder's blob store (under :attr:`sha256`).

        Returns:
            Whether it was stored (``False`` when the recorder has no blob store).
        """
        if recorder.blobs is None:
            return False
        recorder.blobs.put(self.raw)
        return True

    def ids(
        self, source_format: str, start: dt.datetime | None, episode_id: str | None = None
    ) -> tuple[str, Callable[[int], str]]:
        """The episode id and event ids (by ``seq``) this file imports under: functions of its content.

        Importing the same bytes again sends the same ids, so the pipeline keeps one copy of
        each event (and one episode); :func:`import_episode_id` names the episode from the
        format and the content alone, before anything is parsed. The event ids' time bits are
        the source's first timestamp (0 without one).
        """
        eid = episode_id or import_episode_id(source_format, self.sha256)
        ms = _ms(start)
        return eid, lambda seq: derived_id(ms, f"{eid}/{seq}")

    def metadata(self, recorder: EpisodeRecorder, source_format: str) -> dict[str, Any]:
        """Keep the file (see :meth:`keep`) and return the ``episode_started`` metadata naming it."""
        return {
            "source_format": source_format,
            "source_path": str(self.path),
            "source_sha256": self.sha256,
            "source_in_blob_store": self.keep(recorder),
        }


def source_timestamp(value: Any) -> dt.datetime | None:
    """A source timestamp as an aware UTC datetime, or ``None`` when absent or unreadable.

    ISO strings without a timezone (as OpenHands writes them) are taken as
    UTC; numbers are Unix epoch seconds.
    """
    if isinstance(value, bool) or value is None:
        return None
    try:
        if isinstance(value, (int, float)):
            return dt.datetime.fromtimestamp(value, dt.UTC)
        if isinstance(value, str):
            stamp = dt.datetime.fromisoformat(value)
            if stamp.tzinfo is None:
                return stamp.replace(tzinfo=dt.UTC)
            return stamp.astimezone(dt.UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return None


def dig(value: Any, *keys: str | int) -> Any:
    """``value[k0][k1]...`` through decoded JSON, or ``None`` where a step is missing."""
    for key in keys:
        if isinstance(key, int):
            if not isinstance(value, list) or not -len(value) <= key < len(value):
                return None
            value = value[key]
        elif isinstance(value, dict):
            value = value.get(key)
        else:
            return None
    return value


def json_kind(value: Any) -> str:
    """The JSON name of a decoded value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


@dataclass
class ImportReport:
    """The outcome of importing one trajectory file.

    Attributes:
        source: path of the imported file.
        format: the importer that read it (a name in ``importers.formats()``).
        episode_id: the episode the events were recorded under.
        source_items: number of items in the source (messages or events).
        events: number of events recorded, by event type (``episode_started``
            and ``episode_ended`` included).
        mapped: source item index -> the event types it became (an item that
            only fed the ``episode_started`` metadata maps to ``episode_started``).
        unmapped: one human-readable line per source item that has no
            first-class event type; each also became an ``annotation`` event
            (key ``import.unmapped``) carrying the raw item.
        unmapped_items: the source indices of :attr:`unmapped`, in the same order.
        notes: decisions the importer took that a reader should know about
            (e.g. an exit status with no trajlake equivalent).
        status: the ``episode_ended`` status recorded.
        sha256: hex sha256 of the file's bytes (its identity: the ids derive from it).
    """

    source: Path
    format: str
    episode_id: str = ""
    source_items: int = 0
    events: dict[str, int] = field(default_factory=dict)
    mapped: dict[int, list[str]] = field(default_factory=dict)
    unmapped: list[str] = field(default_factory=list)
    unmapped_items: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    status: EpisodeStatus | None = None
    sha256: str = ""

    @property
    def total_events(self) -> int:
        """Number of events recorded, all types together."""
        return sum(self.events.values())

    def count(self, event_type: str) -> None:
        """Count one recorded event of ``event_type``."""
        self.events[event_type] = self.events.get(event_type, 0) + 1

    def map_item(self, index: int, event_type: str) -> None:
        """Record that source item ``index`` became (or fed) an event of ``event_type``."""
        self.mapped.setdefault(index, []).append(event_type)

    def unaccounted(self) -> list[int]:
        """Source indices that are neither mapped nor listed as unmapped (should be empty)."""
        seen = set(self.mapped) | set(self.unmapped_items)
        return [i for i in range(self.source_items) if i not in seen]

    def summary(self) -> str:
        """A few lines saying what was imported, what was not, and why."""
        counts = ", ".join(f"{k}={v}" for k, v in sorted(self.events.items())) or "none"
        lines = [
            f"{self.source} ({self.format}) -> episode {self.episode_id}: "
            f"{self.total_events} events ({counts}), status {self.status}",
            f"source items: {self.source_items}, mapped to first-class events: {len(self.mapped)}, "
            f"unmapped (kept as annotations): {len(self.unmapped)}",
        ]
        lines += [f"  unmapped: {line}" for line in self.unmapped]
        lines += [f"  note: {line}" for line in self.notes]
        return "\n".join(lines)


class ReportingEpisode:
    """An :class:`~ingest.recorder.Episode` whose every recorded event is counted in a report.

    Each method records through the wrapped episode (so the recorder assigns
    ids, ``seq`` and validation as for any worker) and attributes the event to
    the source item ``index`` it came from.

    Args:
        episode: the episode being recorded (already started).
        report: the report to count into.
        source_format: the importer's format name, stamped on annotations.
    """

    def __init__(self, episode: Episode, report: ImportReport, source_format: str) -> None:
        self.episode = episode
        self.report = report
        self.source_format = source_format
        report.episode_id = episode.episode_id
        report.count("episode_started")

    def model_call(
        self,
        index: int,
        *,
        completion: str,
        messages: Sequence[ChatMessage] | None,
        finish_reason: str | None = None,
        latency_s: float = 0.0,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        model: str | None = None,
        tool_calls: Sequence[Mapping[str, Any]] | None = None,
        reasoning: str | None = None,
        ts: dt.datetime | None = None,
    ) -> str:
        """Record a ``model_call`` for source item ``index``; return its event id."""
        event_id = self.episode.model_call(
            completion=completion,
            messages=messages,
            finish_reason=finish_reason,
            latency_s=latency_s,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            model=model,
            tool_calls=tool_calls,
            reasoning=reasoning,
            ts=ts,
        )
        self._counted(index, "model_call")
        return event_id

    def tool_call(
        self,
        index: int,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        call_id: str | None = None,
        ts: dt.datetime | None = None,
    ) -> str:
        """Record a ``tool_call`` for source item ``index``; return its call id."""
        cid = self.episode.tool_call(tool, arguments, call_id=call_id, ts=ts)
        self._counted(index, "tool_call")
        return cid

    def tool_result(
        self,
        index: int,
        call_id: str,
        *,
        exit_code: int | None = None,
        stdout: str = "",
        stderr: str = "",
        timed_out: bool = False,
        error_kind: ToolErrorKind | None = None,
        duration_s: float = 0.0,
        ts: dt.datetime | None = None,
    ) -> str:
        """Record a ``tool_result`` for source item ``index``; return its event id."""
        event_id = self.episode.tool_result(
            call_id,
            exit_code=exit_code,
            stdout=stdout,
            stderr=stderr,
            timed_out=timed_out,
            error_kind=error_kind,
            duration_s=duration_s,
            ts=ts,
        )
        self._counted(index, "tool_result")
        return event_id

    def annotate(self, key: str, value: Any, *, ts: dt.datetime | None = None) -> str:
        """Record an ``annotation`` that is not itself a source item (e.g. a format error)."""
        event_id = self.episode.annotate(key, value, author=f"import:{self.source_format}", ts=ts)
        self.report.count("annotation")
        return event_id

    def unmapped(
        self,
        index: int,
        *,
        label: str,
        reason: str,
        item: Any,
        ts: dt.datetime | None = None,
    ) -> str:
        """Keep source item ``index`` as an annotation with the raw item, and list it in the report.

        Args:
            index: position of the item in the source.
            label: what the item is, as a reader of the source would name it
                (e.g. ``"event id 7: observation 'agent_state_changed'"``).
            reason: why it has no first-class event type.
            item: the raw item, recorded verbatim in the annotation.
            ts: event time of the item, when the source has one.

        Returns:
            The annotation's event id.
        """
        event_id = self.annotate(
            UNMAPPED_KEY,
            {
                "source_format": self.source_format,
                "index": index,
                "label": label,
                "reason": reason,
                "item": item,
            },
            ts=ts,
        )
        self.report.unmapped.append(f"item {index} ({label}): {reason}")
        self.report.unmapped_items.append(index)
        return event_id

    def end(self, status: EpisodeStatus, *, reason: str | None, ts: dt.datetime | None = None) -> str:
        """Record ``episode_ended``; the report keeps the status."""
        event_id = self.episode.end(status, reason=reason, ts=ts)
        self.report.count("episode_ended")
        self.report.status = status
        return event_id

    def _counted(self, index: int, event_type: str) -> None:
        self.report.count(event_type)
        self.report.map_item(index, event_type)


def _ms(start: dt.datetime | None) -> int:
    return 0 if start is None else max(0, int(start.timestamp() * 1000))


def import_episode_id(source_format: str, sha256: str) -> str:
    """The episode id of an import of the file whose content hashes to ``sha256`` in ``source_format``.

    A UUIDv7 whose time bits are 0: it is a function of the content, which has no time of its own.
    """
    return derived_id(0, f"import/{source_format}/{sha256}")
