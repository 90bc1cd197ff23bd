"""Importer of SWE-agent trajectories (``*.traj``).

A ``.traj`` is one JSON object: ``trajectory``, the agent's steps (``action``, ``observation``,
``response``, ``thought``, and, by version, ``execution_time``, ``state``, ``query``, ``extra_info``);
``history``, the conversation the model saw (``role``, ``content``, and on the assistant's turns
``thought``, ``action``, ``tool_calls``; demonstrations marked ``is_demo``; tool turns
``tool_call_ids``); ``info`` (``exit_status``, ``submission``, ``model_stats``, edited files);
and ``environment`` and ``replay_config`` (the run's configuration).

Mapping (every step of ``trajectory`` is a source item, accounted for in the :class:`ImportReport`):

* ``episode_started``: the task is the file's instance (its name without ``.traj``), the policy
  the model the replay configuration names (else ``swe-agent``), the metadata the instruction
  (the first non-demonstration user turn of ``history``), the system prompt, ``exit_status`` and
  ``model_stats``;
* each step -> ``model_call`` (completion: ``response``; ``thought`` as its reasoning when it
  differs; the prompt: the step's ``query`` when recorded, else the ``history`` before the
  step's assistant turn, with native ``tool_calls`` kept on both) -> ``tool_call`` (the
  assistant turn's native tool call: its function and arguments; else ``bash`` with the
  ``action``; ``submit`` for SWE-agent's submit command) -> ``tool_result`` (``observation``;
  ``execution_time`` as its duration; the exit code is not recorded by SWE-agent: null);
  a step's ``state`` (open file, working directory) -> an ``annotation`` when it changed;
* ``info`` (the submission, edited files, ...) and the configuration stay on the episode as
  an ``import.source_info`` annotation; ``exit_status`` sets the episode's status
  (``submitted...`` -> ``success``, not judged; running out of cost or context ->
  ``truncated``; anything else -> ``aborted``, with a note).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from importers import TrajectoryFormat
from importers.mini_swe_agent import text_of
from importers.report import ImportReport, ReportingEpisode, SourceFile, dig, json_kind
from ingest.errors import ImportFormatError
from ingest.recorder import EpisodeRecorder
from schemas.events import ChatMessage, EpisodeStatus, PolicyRef, TaskRef

FORMAT = "swe-agent"
"""Name of this format in ``importers.formats()``."""

FAMILY = "imported/swe-agent"
"""Task family of imported episodes."""

DEFAULT_POLICY = "swe-agent"
"""Policy id when the trajectory does not name its model."""

TRUNCATED = ("exit_cost", "exit_context", "exit_total_execution_time", "exit_command_timeout")
"""``exit_status`` values (or their ``(...)`` part) that mean the run hit a limit."""

_ROLES = {"system", "user", "assistant", "tool"}


def looks_like(data: Any) -> bool:
    """Whether decoded JSON has the shape of a SWE-agent trajectory (a ``trajectory`` of steps)."""
    if not isinstance(data, dict) or not isinstance(data.get("trajectory"), list):
        return False
    steps = data["trajectory"]
    return all(isinstance(s, dict) and "action" in s and "observation" in s for s in steps) and (
        bool(steps) or isinstance(data.get("history"), list)
    )


def import_swe_agent(
    path: Path | str, recorder: EpisodeRecorder, *, episode_id: str | None = None
) -> ImportReport:
    """Record a SWE-agent trajectory as one episode through ``recorder``.

    Args:
        path: the ``.traj`` file.
        recorder: the recorder the events go through.
        episode_id: the episode id to record under (``None``: derived from the format and the
            content, so a re-import names the same episode and sends the same event ids).

    Returns:
        What was recorded, and what could only be kept as annotations.

    Raises:
        ImportFormatError: the file is not a SWE-agent trajectory (nothing is recorded then).
    """
    source = SourceFile.read(path)
    data = source.data
    if not looks_like(data):
        raise ImportFormatError(
            f"{source.path}: a SWE-agent trajectory is an object with a 'trajectory' list of steps "
            f"(each with 'action' and 'observation'), got {json_kind(data)}"
        )
    history = data.get("history")
    if history is not None and not (
        isinstance(history, list) and all(isinstance(m, dict) and m.get("role") in _ROLES for m in history)
    ):
        raise ImportFormatError(f"{source.path}: 'history' must be a list of chat messages with a role")
    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    return _Importer(source, data["trajectory"], history or [], info, recorder).run(episode_id)


class _Importer:
    def __init__(
        self,
        source: SourceFile,
        steps: list[dict[str, Any]],
        history: list[dict[str, Any]],
        info: dict[str, Any],
        recorder: EpisodeRecorder,
    ) -> None:
        self.source = source
        self.steps = steps
        self.history = history
        self.info = info
        self.recorder = recorder
        self.report = ImportReport(
            source=source.path, format=FORMAT, sha256=source.sha256, source_items=len(steps)
        )
        self.call_ids: set[str] = set()
        # the history's assistant turns (demonstrations apart), one per step when the two agree
        self.turns = [
            i for i, m in enumerate(history) if m.get("role") == "assistant" and not m.get("is_demo")
        ]
        if history and len(self.turns) != len(steps):
            self.report.notes.append(
                f"history has {len(self.turns)} assistant turns for {len(steps)} steps: prompts and native "
                "tool calls are taken from history only where the step has no query of its own"
            )
            self.turns = []

    def run(self, episode_id: str | None) -> ImportReport:
        data, info = self.source.data, self.info
        config = _config(data.get("replay_config"))
        model = dig(config, "agent", "model", "name")
        system = next((m for m in self.history if m.get("role") == "system"), None)
        task = next(
            (m for m in self.history if m.get("role") == "user" and not m.get("is_demo")), None
        )  # fmt: skip
        metadata = self.source.metadata(self.recorder, FORMAT)
        metadata.update({
            "instruction": text_of(task.get("content")) if task else None,
            "system_prompt": text_of(system.get("content")) if system else None,
            "exit_status": info.get("exit_status"),
            "model_stats": info.get("model_stats"),
            "environment": data.get("environment") if isinstance(data.get("environment"), str) else None,
            "timestamps": "import time (the source has none)",
        })  # fmt: skip
        metadata = {k: v for k, v in metadata.items() if v is not None}
        episode_id, event_ids = self.source.ids(FORMAT, None, episode_id)
        with self.recorder.episode(
            task=TaskRef(id=_stem(self.source.path), family=FAMILY),
            policy=PolicyRef(id=model if isinstance(model, str) and model else DEFAULT_POLICY),
            episode_id=episode_id,
            event_ids=event_ids,
            metadata=metadata,
        ) as episode:
            ep = ReportingEpisode(episode, self.report, FORMAT)
            rest = {k: v for k, v in data.items() if k not in ("trajectory", "history")}
            ep.annotate("import.source_info", rest)
            state: Any = None
            for index, step in enumerate(self.steps):
                state = self._step(ep, index, step, state)
            status, reason = self._status()
            ep.end(status, reason=reason)
        return self.report

    def _step(self, ep: ReportingEpisode, index: int, step: dict[str, Any], state: Any) -> Any:
        turn = self.history[self.turns[index]] if self.turns else {}
        response = step.get("response")
        thought = step.get("thought")
        completion = text_of(response) if response is not None else text_of(turn.get("content"))
        native = turn.get("tool_calls") if isinstance(turn.get("tool_calls"), list) else None
        ep.model_call(
            index,
            completion=completion,
            messages=self._prompt(index, step),
            reasoning=thought if isinstance(thought, str) and thought and thought != completion else None,
            tool_calls=native,
            model=None,
        )
        action = text_of(step.get("action"))
        tool, arguments, call_id = _call(native, action)
        if call_id is not None and call_id in self.call_ids:  # (a replayed run repeats its ids)
            made = f"{call_id}.{index}"
            while made in self.call_ids:
                made += "'"
            self.report.notes.append(f"step {index} repeats tool call id {call_id!r}: recorded as {made}")
            call_id = made
        cid = ep.tool_call(index, tool, arguments, call_id=call_id)
        self.call_ids.add(cid)
        duration = step.get("execution_time")
        ep.tool_result(
            index,
            cid,
            stdout=text_of(step.get("observation")),
            duration_s=float(duration) if isinstance(duration, int | float) and duration >= 0 else 0.0,
        )
        now = _config(step.get("state"))
        if now not in (None, {}, "") and now != state:
            ep.annotate("swe-agent.state", {"step": index, "state": now})
        return now

    def _prompt(self, index: int, step: dict[str, Any]) -> list[ChatMessage] | None:
        query = step.get("query")
        if isinstance(query, list):
            messages = query
        else:
            messages = self.history[: self.turns[index]] if self.turns else None
        if messages is None:
            return None
        out = []
        for m in messages:
            role = m.get("role") if isinstance(m, dict) else None
            if role not in _ROLES:
                continue
            ids = m.get("tool_call_ids")
            calls = m.get("tool_calls") if isinstance(m.get("tool_calls"), list) else None
            out.append(ChatMessage(
                role=role,
                content=text_of(m.get("content")),
                tool_call_id=str(ids[0]) if isinstance(ids, list) and ids else m.get("tool_call_id"),
                tool_calls=calls if role == "assistant" else None,
            ))  # fmt: skip
        return out

    def _status(self) -> tuple[EpisodeStatus, str]:
        status = self.info.get("exit_status")
        if not isinstance(status, str) or not status:
            self.report.notes.append("no exit_status; recorded as 'aborted'")
            return "aborted", "SWE-agent recorded no exit_status"
        if status.startswith("submitted"):
            return "success", f"SWE-agent exit_status {status!r}; not judged"
        if any(limit in status for limit in TRUNCATED):
            return "truncated", f"SWE-agent exit_status {status!r}"
        self.report.notes.append(f"exit_status {status!r} has no trajlake status; recorded as 'aborted'")
        return "aborted", f"SWE-agent exit_status {status!r} (unmapped)"


def _call(native: list[Any] | None, action: str) -> tuple[str, dict[str, Any], str | None]:
    """The tool call a step made: its native one when the model made one, else the action as a command."""
    if native:
        call = native[0] if isinstance(native[0], dict) else {}
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        name, raw = function.get("name"), function.get("arguments")
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError:
            arguments = None
        if isinstance(name, str) and name and isinstance(arguments, dict):
            cid = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else None
            return name, arguments, cid
    first = action.strip().split(maxsplit=1)[0] if action.strip() else ""
    return ("submit" if first == "submit" else "bash"), {"command": action}, None


def _config(value: Any) -> Any:
    """A configuration SWE-agent stored as a JSON string (replay_config, old states), decoded."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _stem(path: Path) -> str:
    name = path.name
    return name[: -len(".traj")] if name.endswith(".traj") and len(name) > 5 else path.stem or name


TRAJECTORY_FORMAT = TrajectoryFormat(
    name=FORMAT,
    looks_like=looks_like,
    import_file=import_swe_agent,
    description="SWE-agent trajectory (.traj: trajectory steps, history, info)",
)
"""This format, as the ``trajlake.importers`` entry point registers it."""
