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

Tool calls are read as verl's Hermes parser reads them (``<tool_call>`` blocks of one JSON object
``{"name", "arguments"}``), else as trajlake's own action objects (``{"tool", "arguments"}``), else
as the one action :func:`sandboxes.tools.parse_action` finds; tool responses in the text are
outputs, not actions. A ``<tool_call>`` inside a tool response cannot be told apart (the model's
text or the environment's?), so such a response is not scored (0, ``unscored``). At most the task's
``max_steps`` actions run, within its ``time_limit_s``; ``submit`` ends them; arguments no tool can
take (a NUL, text that is not UTF-8) are no action.

The result is verl's dict form: ``score`` (the reward), ``verdict``, ``judge`` and
``judge_version`` (the judge that scored: the task's own), ``judge_version_matches`` (whether it is
the one the export was labelled with), ``actions`` (how many ran) and ``unscored`` (why a response
was not judged, else ``None``).

Settings come from the environment as for every trajlake command (``TRAJLAKE_SANDBOX_BACKEND``,
...); ``TRAJLAKE_TASK_DIRS`` (``:``-separated) says where the tasks are (default: this checkout's
``tasks/``), ``TRAJLAKE_VERL_REWARD_SANDBOXES`` how many sandboxes score at once (default 2; verl
calls from a thread pool, the rest wait) and ``TRAJLAKE_VERL_REWARD_WAIT_S`` how long a call waits
for one (default 3600). verl's ``compute_score_timeout``, if set, must exceed a task's
``time_limit_s`` plus judging.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import threading
import time
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
"""At most this long per action (as a rollout's commands), and never past the task's time limit."""
JSON_SCAN_LIMIT = 1000
"""Positions at most where a response is tried as JSON (its ``{`` characters, in order)."""

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
        if not _tasks:  # all of them or none: a load that fails part-way is retried whole next time
            dirs = [Path(p) for p in os.environ.get("TRAJLAKE_TASK_DIRS", "").split(":") if p]
            found: dict[str, Task] = {}
            for d in find_task_dirs(dirs or [TASKS_DIR]):
                t = load_task(d)
                if t.id in found:
                    raise RewardReferenceError(
                        f"task id {t.id!r} is in both {found[t.id].root} and {t.root}; "
                        "give TRAJLAKE_TASK_DIRS directories whose task ids are unique"
                    )
                found[t.id] = t
            _tasks.update(found)
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


def _writable(value: Any) -> bool:
    """Every string in ``value`` can reach a sandbox (UTF-8, no NUL): what a tool can be given."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return "\0" not in value
    if isinstance(value, dict):
        return all(_writable(k) and _writable(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_writable(v) for v in value)
    return True


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
        except (ValueError, RecursionError):
            return None
    if not isinstance(args, dict) or not _writable(args):
        return None  # what no tool can be given fails in a rollout too: it changes nothing
    return ToolAction(str(tool), dict(args))


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _json_objects(text: str, limit: int = JSON_SCAN_LIMIT) -> list[Any]:
    """The JSON objects in ``text`` (at most ``limit`` tries: degenerate text costs a bounded time)."""
    decoder = json.JSONDecoder()
    out, i, tries = [], text.find("{"), 0
    while i >= 0 and tries < limit:
        tries += 1
        try:
            obj, end = decoder.raw_decode(text, i)
        except (ValueError, RecursionError):
            i = text.find("{", i + 1)
            continue
        out.append(obj)
        i = text.find("{", end)
    return out


def hidden_tool_calls(text: str) -> int:
    """How many ``<tool_call>`` blocks sit inside ``<tool_response>`` spans.

    Whether the model or the environment wrote them cannot be told from the decoded text, so a
    response holding any is not scored (0, ``unscored``): neither running them nor leaving them out
    is sure to be what the rollout did.
    """
    return sum(len(_TOOL_CALL.findall(m.group(0))) for m in _TOOL_RESPONSE.finditer(text))


def response_actions(text: str, max_steps: int | None = None) -> list[ToolAction]:
    """The actions a response asks for, in order (see the module docstring for the forms read).

    A ``<tool_call>`` block is one JSON object and nothing else, as verl's Hermes parser reads it.
    """
    text = _TOOL_RESPONSE.sub("", text)
    blocks = _TOOL_CALL.findall(text)
    if blocks:
        found = [_action(_loads(b.strip())) for b in blocks]
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
    judge = build_judge(task.spec.judge.model_dump())
    same = ref.get("judge") == judge.name and ref.get("judge_version") == judge.version
    out = {"score": 0.0, "verdict": "fail", "judge": judge.name, "judge_version": judge.version,
           "judge_version_matches": same, "actions": 0, "unscored": None}  # fmt: skip
    if hidden_tool_calls(solution_str):
        return {**out, "unscored": "tool_call_in_tool_response"}
    actions = response_actions(solution_str, task.spec.limits.max_steps)
    wait = float(os.environ.get("TRAJLAKE_VERL_REWARD_WAIT_S", "3600"))
    with _sandboxes().lease(
        image=task.spec.initial_state.image, workspace=task.initial_dir, timeout=wait
    ) as sb:
        task.prepare(sb)
        traj = Trajectory(task, "verl")
        deadline = time.monotonic() + task.spec.limits.time_limit_s  # the task's limit, as a rollout's
        for action in actions:
            left = deadline - time.monotonic()
            if action.tool == "submit" or left <= 0:
                break
            traj.record(action, run_tool(sb, action, timeout=min(ACTION_TIMEOUT_S, left)))
        j = judge(JudgeContext(task=task, sandbox=sb, events=traj.events))
    return {**out, "score": float(j.score), "verdict": j.verdict, "actions": len(actions)}
