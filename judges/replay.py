"""Scripted trajectories: run given agent actions in a sandbox and keep the events they make.

Golden sets, the reward-hacking corpus and task admission describe what an
agent did as a list of actions; replaying them in a real sandbox gives the
final state and the ``tool_call``/``tool_result`` events a judge looks at,
exactly as a rollout would have produced them.

An action is one of::

    {"bash": "sed -i 's/a - b/a + b/' calc.py"}
    {"write_file": {"path": "calc.py", "content": "..."}}
    {"read_file": "calc.py"}
    "apply_reference"            # the task's reference solution, applied as the agent
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from judges.errors import GoldenSetError
from judges.tasks import Task
from sandboxes.errors import SandboxError
from sandboxes.interface import ExecResult, Sandbox
from schemas.events import (
    EpisodeStarted,
    EpisodeStartedPayload,
    Event,
    PolicyRef,
    Producer,
    TextOutput,
    ToolCall,
    ToolCallPayload,
    ToolResult,
    ToolResultPayload,
)
from schemas.ids import new_id

_PRODUCER = Producer.here("judges-replay")


class Trajectory:
    """Events of one scripted episode, built in memory with contiguous ``seq``."""

    def __init__(self, task: Task, policy: str = "scripted") -> None:
        self.episode_id = new_id()
        self.events: list[Event] = []
        self._add(EpisodeStarted, EpisodeStartedPayload(task=task.ref, policy=PolicyRef(id=policy)))

    def _add(self, cls: Any, payload: Any) -> None:
        self.events.append(
            cls(
                event_id=new_id(),
                episode_id=self.episode_id,
                seq=len(self.events),
                ts=dt.datetime.now(dt.UTC),
                producer=_PRODUCER,
                payload=payload,
            )
        )

    def tool(
        self, tool: str, arguments: dict[str, Any], result: ExecResult | None, error: str | None = None
    ) -> None:
        """Record a tool call and its result."""
        call_id = new_id()
        self._add(ToolCall, ToolCallPayload(call_id=call_id, tool=tool, arguments=arguments))
        if result is not None:
            payload = ToolResultPayload(
                call_id=call_id,
                exit_code=result.exit_code,
                stdout=TextOutput(text=result.stdout[-8192:], size=result.stdout_bytes),
                stderr=TextOutput(text=result.stderr[-8192:], size=result.stderr_bytes),
                duration_s=result.duration_s,
                timed_out=result.timed_out,
                error_kind="timeout" if result.timed_out else ("nonzero_exit" if result.exit_code else None),
            )
        else:
            payload = ToolResultPayload(
                call_id=call_id, exit_code=None if error else 0, stderr=TextOutput(text=error or ""),
                error_kind="invalid_arguments" if error else None,
            )  # fmt: skip
        self._add(ToolResult, payload)


def prepare(task: Task, sandbox: Sandbox) -> list[ExecResult]:
    """Put the sandbox in the task's initial state: its files, then its setup commands.

    Raises:
        SandboxError: the sandbox broke.
        GoldenSetError: a setup command failed (the task's initial state does not build).
    """
    sandbox.reset(workspace=task.initial_dir)
    results = []
    for cmd in task.spec.initial_state.setup:
        r = sandbox.exec(cmd, timeout=300)
        if r.exit_code != 0:
            raise GoldenSetError(f"setup command {cmd!r} failed (exit {r.exit_code}): {r.stderr[-300:]}")
        results.append(r)
    return results


def apply_reference(task: Task, sandbox: Sandbox) -> ExecResult:
    """Apply the task's reference solution in the workspace, as the agent would."""
    ref = task.spec.reference_solution
    data = task.reference_bytes()
    if ref.patch is not None:
        return sandbox.exec(["git", "apply", "--whitespace=nowarn", "-"], stdin=data, timeout=60)
    return sandbox.exec(["sh", "-s"], stdin=data, timeout=300)


def replay(task: Task, sandbox: Sandbox, actions: Sequence[Any], *, policy: str = "scripted") -> Trajectory:
    """Run ``actions`` in ``sandbox`` (already prepared) and return their trajectory."""
    traj = Trajectory(task, policy)
    for action in actions:
        if action == "apply_reference":
            ref = task.spec.reference_solution
            cmd = "git apply <reference patch>" if ref.patch else "sh <reference script>"
            traj.tool("bash", {"command": cmd}, apply_reference(task, sandbox))
            continue
        if not isinstance(action, dict) or len(action) != 1:
            raise GoldenSetError(f"an action is one of bash/write_file/read_file/apply_reference: {action!r}")
        ((tool, arg),) = action.items()
        if tool == "bash":
            traj.tool("bash", {"command": str(arg)}, sandbox.exec(str(arg), timeout=120))
        elif tool == "write_file":
            args = {"path": str(arg["path"]), "content": str(arg["content"])}
            try:
                sandbox.write_file(args["path"], args["content"])
                traj.tool("write_file", args, None)
            except SandboxError as exc:
                traj.tool("write_file", args, None, error=str(exc))
        elif tool == "read_file":
            try:
                sandbox.read_file(str(arg))
                traj.tool("read_file", {"path": str(arg)}, None)
            except (SandboxError, OSError) as exc:
                traj.tool("read_file", {"path": str(arg)}, None, error=str(exc))
        else:
            raise GoldenSetError(f"unknown action {tool!r}")
    return traj
