"""A reward function verl loads as it is, scoring each response with its task's trajlake judge.

verl configuration (``trajlake export --format verl`` writes the path into ``lineage.json`` and
a copy of these lines into the export's ``README.md``)::

    reward.custom_reward_function.path=<this file>
    reward.custom_reward_function.name=compute_score

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info)`` once per
response. ``ground_truth`` is the reference the export wrote (``{"task_id", "family", "judge",
"judge_version"}``, JSON). The response is never believed: the tool calls it holds are run again,
in order, in a fresh sandbox of the task (the same tools and the same :func:`sandboxes.tools.run_tool`
a trajlake rollout uses), and the task's own judge scores the state they leave, as it scores a
rollout. Text that only claims success earns what doing nothing earns.

Tool calls are read as verl's Hermes parser reads them (``<tool_call>{"name", "arguments"}
</tool_call>``), else as trajlake's own action objects (``{"tool", "arguments"}``), else as the one
action :func:`sandboxes.tools.parse_action` finds; tool responses in the text are outputs, not
actions, and are ignored. At most the task's ``max_steps`` actions run; ``submit`` ends them.

The result is verl's dict form: ``score`` (the reward), ``verdict``, ``judge_version`` (the
version that scored), ``judge_version_matches`` (whether it is the one the export was judged with)
and ``actions`` (how many ran). Settings come from the environment as for every trajlake command
(``TRAJLAKE_SANDBOX_BACKEND``, ...); ``TRAJLAKE_TASK_DIRS`` (``:``-separated) says where the
tasks are (default: this checkout's ``tasks/``) and ``TRAJLAKE_VERL_REWARD_SANDBOXES`` how many
sandboxes score at once (default 2).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import threading
from pathlib import Path
from typing import Any

from judges.context import JudgeContext
from judges.registry import build_judge
from judges.replay import Trajectory
from judges.tasks import Task, find_task_dirs, load_task
from sandboxes.tools import TOOLS, ToolAction, parse_action, run_tool
from schemas.errors import TrajlakeError

TASKS_DIR = Path(__file__).resolve().parents[1] / "tasks"
ACTION_TIMEOUT_S = 120.0

_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
_TOOL_RESPONSE = re.compile(r"<tool_response>.*?</tool_response>", re.S)

_lock = threading.Lock()
_pool: Any = None
_tasks: dict[str, Task] = {}


class RewardReferenceError(TrajlakeError, ValueError):
    """A ``ground_truth`` that does not name a trajlake task, or a task that cannot be found."""


def _reference(ground_truth: Any) -> dict[str, Any]:
    try:
        ref = json.loads(ground_truth) if isinstance(ground_truth, str) else dict(ground_truth)
    except (TypeError, ValueError):
        ref = None
    if not isinstance(ref, dict) or not ref.get("task_id"):
        raise RewardReferenceError(
            f"ground_truth {str(ground_truth)[:80]!r} is not a trajlake task reference; export the "
            "dataset with `trajlake export --format verl`, whose reward_model.ground_truth names the task"
        )
    return ref


def _task(task_id: str) -> Task:
    with _lock:
        if not _tasks:
            dirs = [Path(p) for p in os.environ.get("TRAJLAKE_TASK_DIRS", "").split(":") if p]
            for d in find_task_dirs(dirs or [TASKS_DIR]):
                t = load_task(d)
                _tasks[t.id] = t
        task = _tasks.get(task_id)
    if task is None:
        where = os.environ.get("TRAJLAKE_TASK_DIRS") or str(TASKS_DIR)
        raise RewardReferenceError(
            f"task {task_id!r} is not under {where}; set TRAJLAKE_TASK_DIRS to the directories holding it"
        )
    return task


def _sandboxes() -> Any:
    global _pool
    with _lock:
        if _pool is None:
            from rollouts.runner import ROLLOUT_SPEC
            from sandboxes import SandboxPool
            from trajlake.preflight import require_backend
            from trajlake.settings import Settings

            size = int(os.environ.get("TRAJLAKE_VERL_REWARD_SANDBOXES", "2"))
            _pool = SandboxPool(require_backend(Settings()), ROLLOUT_SPEC, max_size=max(1, size))
            atexit.register(_pool.close)  # verl's workers end with the process: no sandbox outlives it
        return _pool


def _action(obj: Any) -> ToolAction | None:
    """A tool call object (``{"name"|"tool": ..., "arguments": {...} | "json"}``) as an action."""
    if not isinstance(obj, dict):
        return None
    tool = obj.get("name", obj.get("tool"))
    if tool not in TOOLS:
        return None
    args = obj.get("arguments") or {}
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None
    return ToolAction(str(tool), dict(args) if isinstance(args, dict) else {})


def _json_objects(text: str) -> list[Any]:
    decoder = json.JSONDecoder()
    out, i = [], text.find("{")
    while i >= 0:
        try:
            obj, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        out.append(obj)
        i = text.find("{", end)
    return out


def response_actions(text: str, max_steps: int | None = None) -> list[ToolAction]:
    """The actions a response asks for, in order (see the module docstring for the forms read)."""
    text = _TOOL_RESPONSE.sub("", text)
    blocks = _TOOL_CALL.findall(text)
    if blocks:
        found = [_action(o) for b in blocks for o in _json_objects(b)[:1]]
    else:
        found = [_action(o) for o in _json_objects(text)]
        if not any(found):
            found = [parse_action(text)]
    actions: list[ToolAction] = []
    for a in found:
        if a is None:
            continue
        if max_steps is not None and len(actions) >= max_steps:
            break
        actions.append(a)
        if a.tool == "submit":
            break
    return actions


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:  # fmt: skip
    """Verl's reward function: the task's trajlake judge on the state the response's tool calls leave.

    Raises:
        RewardReferenceError: ``ground_truth`` names no trajlake task, or the task is not found.
        SandboxUnavailableError: no sandbox backend runs here.
    """
    ref = _reference(ground_truth)
    task = _task(str(ref["task_id"]))
    actions = response_actions(solution_str, task.spec.limits.max_steps)
    judge = build_judge(task.spec.judge.model_dump())
    with _sandboxes().lease(image=task.spec.initial_state.image, workspace=task.initial_dir) as sb:
        task.prepare(sb)
        traj = Trajectory(task, "verl")
        for action in actions:
            if action.tool == "submit":
                break
            traj.record(action, run_tool(sb, action, timeout=ACTION_TIMEOUT_S))
        j = judge(JudgeContext(task=task, sandbox=sb, events=traj.events))
    same = ref.get("judge") == j.judge_name and ref.get("judge_version") == j.judge_version
    return {
        "score": float(j.score),
        "verdict": j.verdict,
        "judge": j.judge_name,
        "judge_version": j.judge_version,
        # the export's samples were judged by this very judge (a changed judge scores differently)
        "judge_version_matches": same,
        "actions": len(actions),
    }
