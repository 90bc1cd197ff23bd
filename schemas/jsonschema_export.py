"""JSON Schema export of the envelope and every event type."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from schemas.events import EVENT_ADAPTER, EVENT_TYPES, ToolResultPayloadV1


def event_json_schemas() -> dict[str, dict[str, Any]]:
    """JSON Schema documents by file stem: one per event type plus ``envelope``.

    ``envelope`` validates any event (a ``oneOf`` discriminated by ``type``);
    each ``<type>`` document validates that type at its current version.
    ``history/tool_result.v1`` documents the superseded version 1 payload.
    """
    docs: dict[str, dict[str, Any]] = {}
    envelope = EVENT_ADAPTER.json_schema()
    envelope["title"] = "trajlake event envelope"
    docs["envelope"] = envelope
    for name, cls in EVENT_TYPES.items():
        schema = cls.model_json_schema()
        schema["title"] = f"trajlake {name} event"
        docs[name] = schema
    v1 = ToolResultPayloadV1.model_json_schema()
    v1["title"] = "trajlake tool_result payload, schema_version 1 (read through an upcaster)"
    docs["history/tool_result.v1.payload"] = v1
    for doc in docs.values():
        doc["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return docs


def export_json_schemas(directory: Path) -> list[Path]:
    """Write every document of :func:`event_json_schemas` as ``<stem>.schema.json``.

    Returns:
        The files written, sorted.
    """
    written: list[Path] = []
    for stem, doc in event_json_schemas().items():
        path = directory / f"{stem}.schema.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        written.append(path)
    return sorted(written)
