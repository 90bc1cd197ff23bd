"""Events as the fold reads them: the envelope's columns and the payload decoded once, no model.

An ``events`` row was validated when it entered the lake (:mod:`schemas.codec`, at its type's
current schema version), and its ``payload`` column is that model's own JSON. So the fold
decodes the payload once (``orjson``) and reads plain values: no pydantic model is built again
per event. A payload whose keys are not exactly its current model's fields (a row written by
another version of the schema) is the one exception: it is validated into the current model,
the same value a fresh parse would give.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

import orjson

from schemas.errors import SchemaError
from schemas.events import PAYLOAD_TYPES, EventBase

_FIELDS = {t: frozenset(m.model_fields) for t, m in PAYLOAD_TYPES.items()}
_DIGITS = bytes(48 if 48 <= i <= 57 else i for i in range(256))
"""A ``bytes.translate`` table: every ASCII digit becomes ``0``, every other byte stays."""
_LONG_NUMBER = b"0" * 19
"""A run of digits orjson may not read as Python does (an integer past 64 bits becomes a float)."""


def _loads(payload: str | bytes) -> Any:
    """The payload's JSON as ``json.loads`` reads it (what the fold always read); orjson where they agree.

    orjson reads an integer past 64 bits as a float (or refuses it) and refuses a lone surrogate
    escape; ``json`` keeps both, so a payload with a long run of digits, or one orjson refuses,
    is read by ``json``.
    """
    raw = payload.encode("utf-8", "surrogatepass") if isinstance(payload, str) else payload
    # (a table lookup per byte, then one substring search: 0.3 us a payload against 4.3 us for
    # a regex; JSON numbers are ASCII digits, so a run of 19 of them is what is looked for)
    if raw.translate(_DIGITS).find(_LONG_NUMBER) < 0:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(payload if isinstance(payload, str) else payload.decode())


class EventView:
    """One event as plain values: the envelope's columns, the payload's JSON and its decoded dict ``p``."""

    __slots__ = ("episode_id", "event_id", "p", "payload", "seq", "ts", "type")

    def __init__(
        self,
        event_id: str,
        episode_id: str,
        seq: int,
        type_: str,
        ts: dt.datetime,
        payload: str,
        p: dict[str, Any],
    ) -> None:  # noqa: D107
        self.event_id = event_id
        self.episode_id = episode_id
        self.seq = seq
        self.type = type_
        self.ts = ts
        self.payload = payload
        self.p = p

    def __repr__(self) -> str:
        return f"EventView({self.type} {self.episode_id}#{self.seq} {self.event_id})"


def decode_payload(event_type: str, payload: str | bytes) -> tuple[str, dict[str, Any]]:
    """``(payload JSON, decoded dict)`` of a stored payload, at the current schema of ``event_type``.

    Raises:
        SchemaError: the type is unknown or the payload does not validate.
    """
    try:
        p = _loads(payload)
    except ValueError as exc:  # (orjson's and json's decode errors, an integer past json's digit limit)
        raise SchemaError(
            f"a stored {event_type} payload is not JSON: {exc}", [("payload", "not JSON")]
        ) from exc
    fields = _FIELDS.get(event_type)
    if fields is not None and isinstance(p, dict) and len(p) == len(fields) and p.keys() == fields:
        return payload if isinstance(payload, str) else payload.decode(), p
    model = PAYLOAD_TYPES.get(event_type)
    if model is None:
        raise SchemaError(f"unknown event type {event_type!r}", [("type", "unknown event type")])
    from pydantic import ValidationError

    from schemas.codec import translate_validation_error

    try:
        text = model.model_validate(p).model_dump_json()
    except ValidationError as exc:
        raise translate_validation_error(exc, event_type, prefix="payload") from exc
    return text, _loads(text)


def view_of_row(row: Mapping[str, Any]) -> EventView:
    """The view of an ``events`` row."""
    payload, p = decode_payload(row["type"], row["payload"])
    return EventView(row["event_id"], row["episode_id"], row["seq"], row["type"], row["ts"], payload, p)


def view_of_event(event: EventBase) -> EventView:
    """The view of a parsed event: what its ``events`` row reads as."""
    payload = event.payload.model_dump_json()  # type: ignore[attr-defined]
    return EventView(
        event.event_id,
        event.episode_id,
        event.seq,
        event.type,  # type: ignore[attr-defined]
        event.ts,
        payload,
        _loads(payload),
    )


def as_view(event: EventBase | EventView | Mapping[str, Any]) -> EventView:
    """A view of a parsed event, an ``events`` row, or a view."""
    if isinstance(event, EventView):
        return event
    if isinstance(event, EventBase):
        return view_of_event(event)
    return view_of_row(event)
