"""Upcasters: bring an old event's payload up to its type's current version.

Old versions stay in the log as they were written; they are upcast every time
they are read. An upcaster maps a payload dict of version ``n`` of a type to
version ``n + 1``; :func:`upcast` chains them up to the current version.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from schemas.errors import SchemaError
from schemas.events import EVENT_TYPES, current_version

Payload = dict[str, Any]
Upcaster = Callable[[Payload], Payload]

UPCASTERS: dict[tuple[str, int], Upcaster] = {}
"""``(type, from_version) -> function`` producing the ``from_version + 1`` payload."""


def upcaster(event_type: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
    """Register a function as the upcaster of ``event_type`` from ``from_version``."""

    def register(fn: Upcaster) -> Upcaster:
        UPCASTERS[(event_type, from_version)] = fn
        return fn

    return register


_V1_ERROR_KINDS = {
    "timeout": "timeout",
    "timed out": "timeout",
    "sandbox": "sandbox_error",
    "unknown tool": "unknown_tool",
    "invalid arguments": "invalid_arguments",
}


@upcaster("tool_result", 1)
def _tool_result_v1_to_v2(payload: Payload) -> Payload:
    """v1 had one combined ``output`` and a free-text ``error``; v2 splits the streams.

    The combined output becomes ``stdout`` (v1 never separated the streams, so
    nothing can be attributed to stderr); ``error`` becomes an ``error_kind``.
    """
    out = dict(payload)
    output = out.pop("output", "") or ""
    error = out.pop("error", None)
    out["stdout"] = {"text": output, "size": len(output.encode("utf-8"))}
    out["stderr"] = {"text": "", "size": 0}
    kind: str | None = None
    if out.get("timed_out"):
        kind = "timeout"
    elif error:
        lowered = str(error).lower()
        kind = next((v for k, v in _V1_ERROR_KINDS.items() if k in lowered), "sandbox_error")
    elif out.get("exit_code") not in (None, 0):
        kind = "nonzero_exit"
    out["error_kind"] = kind
    return out


@upcaster("model_call", 1)
def _model_call_v1_to_v2(payload: Payload) -> Payload:
    """v2 adds the optional native ``tool_calls`` (of the payload and of assistant messages): none in v1."""
    return dict(payload)


@upcaster("model_call", 2)
def _model_call_v2_to_v3(payload: Payload) -> Payload:
    """v3 adds ``served_by``, ``sampling`` and ``history_break``: not recorded in v2 (semantics unknown)."""
    return dict(payload)


@upcaster("model_call", 3)
def _model_call_v3_to_v4(payload: Payload) -> Payload:
    """v4 adds the optional ``reasoning`` (of the payload and of assistant messages): none before v4."""
    return dict(payload)


def upcast(raw: dict[str, Any]) -> dict[str, Any]:
    """Return ``raw`` (an envelope dict) with its payload at the current version.

    Raises:
        SchemaError: the type is unknown, the version is newer than this code
            knows, or no upcaster covers a step.
    """
    event_type = raw.get("type")
    if not isinstance(event_type, str) or event_type not in EVENT_TYPES:
        raise SchemaError(
            f"unknown event type {event_type!r}; expected one of {sorted(EVENT_TYPES)}",
            [("type", "unknown event type")],
        )
    target = current_version(event_type)
    version = raw.get("schema_version", target)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise SchemaError(
            f"{event_type}: schema_version must be a positive integer, got {version!r}",
            [("schema_version", "must be a positive integer")],
        )
    if version > target:
        raise SchemaError(
            f"{event_type}: schema_version {version} is newer than this reader ({target})",
            [("schema_version", f"newer than {target}")],
        )
    if version == target:
        return raw
    payload = raw.get("payload")
    if not isinstance(payload, dict):
        raise SchemaError(f"{event_type}: payload must be an object", [("payload", "not an object")])
    while version < target:
        step = UPCASTERS.get((event_type, version))
        if step is None:
            raise SchemaError(
                f"{event_type}: no upcaster from schema_version {version}",
                [("schema_version", f"no upcaster from {version}")],
            )
        payload = step(payload)
        version += 1
    return {**raw, "schema_version": target, "payload": payload}
