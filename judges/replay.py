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
from sandboxes.interface import ExecResult, Sandbox
from sandboxes.tools import ToolAction, ToolOutcome, run_tool
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
REPLAY_TIMEOUT_S = 120.0
"""Wall-clock bound of one replayed ``bash`` step."""


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

    def tool(self, tool: str, arguments: dict[str, Any], result: ExecResult) -> None:
        """Record a command the replay ran itself (the reference solution) and its result."""
        self.record(
            ToolAction(tool, arguments),
            ToolOutcome(
                result.exit_code,
                result.stdout,
                result.stderr,
                result.duration_s,
                result.timed_out,
                stdout_size=result.stdout_bytes,
                stderr_size=result.stderr_bytes,
            ),  # fmt: skip
        )

    def record(self, action: ToolAction, out: ToolOutcome) -> None:
        """Record a tool call and its outcome, as a rollout worker's recorder would."""
        call_id = new_id()
        self._add(ToolCall, ToolCallPayload(call_id=call_id, tool=action.tool, arguments=action.arguments))
        kind = out.error_kind or ("timeout" if out.timed_out else "nonzero_exit" if out.exit_code else None)
        self._add(
            ToolResult,
            ToolResultPayload(
                call_id=call_id,
                exit_code=out.exit_code,
                stdout=TextOutput(text=out.stdout[-8192:], size=_size(out.stdout, out.stdout_size)),
                stderr=TextOutput(text=out.stderr[-8192:], size=_size(out.stderr, out.stderr_size)),
                duration_s=out.duration_s,
                timed_out=out.timed_out,
                error_kind=kind,
            ),
        )


def _size(text: str, size: int | None) -> int:
    return len(text.encode()) if size is None else size


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
        try:
            tool_action = ToolAction.from_spec(action)
        except ValueError as exc:
            raise GoldenSetError(f"{exc} (or apply_reference)") from None
        traj.record(tool_action, run_tool(sandbox, tool_action, timeout=REPLAY_TIMEOUT_S))
    return traj
