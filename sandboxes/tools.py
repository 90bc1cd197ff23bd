"""The agent's tools, once: what a policy may ask for, and what running it in a sandbox gives.

Rollout workers run a policy's actions with :func:`run_tool` and record what it
returns; golden sets and admission replay scripted actions through the same
function, so a judge sees exactly what a rollout would have recorded.
"""

from __future__ import annotations

import errno
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from sandboxes.errors import SandboxPathError, SandboxQuotaError
from sandboxes.interface import Sandbox
from sandboxes.metrics import TIMEOUTS
from schemas.events import ToolErrorKind

TOOLS = ("bash", "read_file", "write_file", "submit")
"""Tools a sandbox runs (``submit`` ends the episode and runs nothing)."""

READ_LIMIT = 1 << 20
"""Bytes ``read_file`` returns at most."""

_FENCE = re.compile(r"```(?:bash|sh|shell)?\s*\n(.*?)```", re.S)
_JSON = re.compile(r"\{.*\}", re.S)


@dataclass(frozen=True)
class ToolAction:
    """One tool call: a tool of :data:`TOOLS` and its arguments."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_spec(cls, spec: Any) -> ToolAction:
        """The action of a scripted step (golden sets, admission).

        One of ``{"bash": CMD}``, ``{"write_file": {path, content}}``, ``{"read_file": PATH}``
        or ``"submit"``.

        Raises:
            ValueError: not one of these.
        """
        if spec == "submit":
            return cls("submit")
        if not isinstance(spec, dict) or len(spec) != 1:
            raise ValueError(f"an action is one of {', '.join(TOOLS)}: {spec!r}")
        ((tool, arg),) = spec.items()
        if tool == "bash":
            return cls("bash", {"command": str(arg)})
        if tool == "write_file" and isinstance(arg, dict):
            return cls("write_file", {"path": str(arg["path"]), "content": str(arg["content"])})
        if tool == "read_file":
            return cls("read_file", {"path": str(arg)})
        raise ValueError(f"unknown action {tool!r} (tools: {', '.join(TOOLS)})")


@dataclass(frozen=True)
class ToolOutcome:
    """What running one action gave, as its ``tool_result`` event records it."""

    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    timed_out: bool = False
    error_kind: ToolErrorKind | None = None
    """``invalid_arguments`` / ``unknown_tool`` for a call that could not run as asked."""
    stdout_size: int | None = None
    """Bytes the command wrote to stdout, kept or not (``None``: ``len`` of ``stdout``)."""
    stderr_size: int | None = None

    def observation(self, action: ToolAction, limit: int) -> str:
        """What the policy is shown of it."""
        tool = action.tool
        if self.error_kind == "unknown_tool":
            return f"[error] {self.stderr}"[-limit:]
        if self.error_kind is not None:
            return f"[{tool} error] {self.stderr}"[-limit:]
        if tool == "write_file":
            return f"[write_file] wrote {action.arguments.get('path', '')}"[-limit:]
        text = f"[{tool} exit={self.exit_code}{' timed out' if self.timed_out else ''}]\n{self.stdout}"
        if self.stderr:
            text += f"\n[stderr]\n{self.stderr}"
        return text[-limit:]


_AGENT_FAULTS = (
    SandboxPathError,
    SandboxQuotaError,
    FileNotFoundError,
    IsADirectoryError,
    NotADirectoryError,
)
_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def run_tool(sandbox: Sandbox, action: ToolAction, *, timeout: float) -> ToolOutcome:
    """Run one action in the sandbox.

    A call the agent got wrong (a path outside the workspace, a missing file, a full disk,
    missing arguments, an unknown tool) is an outcome with its ``error_kind``, data for the
    policy; a sandbox that broke raises its :class:`~sandboxes.errors.SandboxError`.
    """
    args = action.arguments
    start = time.monotonic()
    try:
        if action.tool == "bash":
            r = sandbox.exec(str(args.get("command", "")), timeout=max(1.0, timeout))
            if r.timed_out:
                TIMEOUTS.labels(sandbox.backend).inc()
            return ToolOutcome(r.exit_code, r.stdout, r.stderr, r.duration_s, r.timed_out,
                               stdout_size=r.stdout_bytes, stderr_size=r.stderr_bytes)  # fmt: skip
        if action.tool == "write_file":
            sandbox.write_file(str(args["path"]), str(args.get("content", "")))
            return ToolOutcome(0, duration_s=time.monotonic() - start)
        if action.tool == "read_file":
            data = sandbox.read_file(str(args["path"]), max_bytes=READ_LIMIT).decode("utf-8", "replace")
            return ToolOutcome(0, stdout=data, duration_s=time.monotonic() - start)
    except KeyError as exc:
        return ToolOutcome(1, stderr=f"missing argument {exc}", error_kind="invalid_arguments")
    except _AGENT_FAULTS as exc:
        return ToolOutcome(1, stderr=str(exc), error_kind="invalid_arguments")
    except OSError as exc:
        if exc.errno in _FULL:
            return ToolOutcome(1, stderr=str(exc), error_kind="invalid_arguments")
        raise
    known = ", ".join(TOOLS)
    return ToolOutcome(1, stderr=f"unknown tool {action.tool!r}; tools: {known}", error_kind="unknown_tool")


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
