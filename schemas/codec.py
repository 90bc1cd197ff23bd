"""The wire format: UTF-8 JSON of the envelope, parsed with upcasting."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from schemas.errors import SchemaError
from schemas.events import EVENT_ADAPTER, EVENT_TYPES, Event, EventBase
from schemas.upcasting import upcast


def translate_validation_error(
    exc: ValidationError, event_type: str | None, *, prefix: str = ""
) -> SchemaError:
    """Turn a pydantic error into a :class:`SchemaError` naming each field."""
    errors: list[tuple[str, str]] = []
    for err in exc.errors(include_url=False):
        loc = [str(p) for p in err["loc"]]
        # A discriminated union puts the tag first: drop it, it is not a field.
        if loc and loc[0] in EVENT_TYPES:
            loc = loc[1:]
        if prefix:
            loc = [prefix, *loc]
        errors.append((".".join(loc) or "<root>", err["msg"]))
    head = "; ".join(f"{path}: {msg}" for path, msg in errors[:5])
    more = f" (+{len(errors) - 5} more)" if len(errors) > 5 else ""
    prefix = f"invalid {event_type} event" if event_type else "invalid event"
    return SchemaError(f"{prefix}: {head}{more}", errors)


def parse_event(raw: bytes | str | dict[str, Any]) -> Event:
    """Parse and validate one event, upcasting older schema versions.

    Args:
        raw: the wire bytes (UTF-8 JSON), a JSON string, or an already decoded dict.

    Returns:
        The typed event at its type's current schema version.

    Raises:
        SchemaError: the input is not JSON, not an object, or violates the
            schema; ``errors`` names each offending field.
    """
    return parse_event_as_written(raw)[0]


def parse_event_as_written(raw: bytes | str | dict[str, Any]) -> tuple[Event, int | None]:
    """:func:`parse_event`, and the ``schema_version`` the producer wrote (before upcasting).

    The version is the envelope's own field, wherever it sits in the JSON (a payload may hold
    a key of the same name); ``None`` when the envelope has none that is an integer.
    """
    if isinstance(raw, (bytes, bytearray, memoryview, str)):
        try:
            # Fast path: a current-version event validates straight from JSON
            # (each type's ``schema_version`` is a literal: only the current one validates).
            event = EVENT_ADAPTER.validate_json(raw)
            return event, event.schema_version
        except ValidationError as exc:
            if any("recursion" in str(e.get("msg", "")).lower() for e in exc.errors()):
                raise _too_deep() from exc
        try:
            data = json.loads(bytes(raw) if isinstance(raw, memoryview) else raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SchemaError(f"not UTF-8 JSON: {exc}", [("<root>", "not UTF-8 JSON")]) from exc
        except RecursionError as exc:
            raise _too_deep() from exc
    else:
        data = raw
    if not isinstance(data, dict):
        raise SchemaError("an event must be a JSON object", [("<root>", "not an object")])
    version = data.get("schema_version")
    written = version if isinstance(version, int) and not isinstance(version, bool) else None
    data = upcast(data)
    try:
        return EVENT_ADAPTER.validate_python(data), written
    except ValidationError as exc:
        raise translate_validation_error(exc, data.get("type")) from exc
    except RecursionError as exc:
        raise _too_deep() from exc


def _too_deep() -> SchemaError:
    return SchemaError(
        "JSON nested too deeply to be an event (the parser's recursion limit)",
        [("<root>", "nested too deeply")],
    )


def serialize_event(event: EventBase) -> bytes:
    """The wire bytes of ``event``: compact UTF-8 JSON of the envelope."""
    return event.__pydantic_serializer__.to_json(event)


def event_to_dict(event: EventBase) -> dict[str, Any]:
    """The event as JSON-compatible Python data."""
    return event.model_dump(mode="json")
