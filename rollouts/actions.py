"""The tools a policy can use, and reading an action out of a model's completion."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

TOOLS = ("bash", "read_file", "write_file", "submit")
"""Tools the worker executes in the sandbox (``submit`` ends the episode)."""

_FENCE = re.compile(r"```(?:bash|sh|shell)?\s*\n(.*?)```", re.S)
_JSON = re.compile(r"\{.*\}", re.S)


@dataclass(frozen=True)
class ToolAction:
    """One tool call the policy asks for."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)


def parse_action(text: str) -> ToolAction | None:
    """The action a completion asks for, or ``None`` when it asks for none the worker knows.

    Understood, in order: a JSON object ``{"tool": ..., "arguments": {...}}``; a
    fenced ``bash`` block (run as a command); a completion that is just
    ``submit``.
    """
    stripped = text.strip()
    if stripped.lower() in ("submit", "<submit>", "done"):
        return ToolAction("submit")
    m = _JSON.search(text)
    if m:
        try:
            obj = json.loads(m.group(0))
        except ValueError:
            obj = None
        if isinstance(obj, dict) and obj.get("tool") in TOOLS:
            args = obj.get("arguments") or {}
            return ToolAction(str(obj["tool"]), dict(args) if isinstance(args, dict) else {})
    fence = _FENCE.search(text)
    if fence and fence.group(1).strip():
        return ToolAction("bash", {"command": fence.group(1).strip()})
    return None
