"""Importer of mini-swe-agent trajectories (``*.traj.json``).

A mini-swe-agent trajectory is the agent's linear chat history: either a bare
JSON list of OpenAI chat messages, or an object
``{"info": {...}, "messages": [...], "trajectory_format": "mini-swe-agent-1"}``
(``info`` holds ``exit_status``, ``submission``, ``model_stats``, ``config``,
``mini_version``; batch runs add a top-level ``instance_id``).

The conversation is ``system`` (rules), ``user`` (the task), then turns of an
``assistant`` message holding one fenced ```` ```mswea_bash_command ```` (or
```` ```bash ````) block and a ``user`` message with the observation
``<returncode>N</returncode>`` and ``<output>...</output>``. The agent finishes
by running ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` (the rest of that
command's output is the submission, which becomes the last ``user``
message, or an ``exit`` message in later versions).

Mapping (every message is accounted for in the :class:`ImportReport`):

* first ``system`` and first ``user`` message -> ``episode_started``
  metadata (``system_prompt``, ``instruction``) and the head of every prompt;
* ``assistant`` -> ``model_call`` (prompt: the conversation before it);
  its single command block -> ``tool_call`` ``bash`` ``{"command": ...}``, or
  ``submit`` for the submission command; no block or several -> an
  ``annotation`` ``format_error`` (mini-swe-agent executed nothing then);
  OpenAI ``tool_calls`` on the message -> one ``tool_call`` each;
* the observation that answers a call -> ``tool_result`` (exit code, stdout;
  ``timed_out`` for the timeout message); the message after a submission ->
  the submission's ``tool_result`` (stdout = the submitted text);
* anything else (format-error feedback, unknown roles, ...) -> an
  ``annotation`` with the raw message, listed in :attr:`ImportReport.unmapped`.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from importers import TrajectoryFormat
from importers.report import (
    ImportReport,
    ReportingEpisode,
    SourceFile,
    dig,
    json_kind,
    source_timestamp,
)
from ingest.errors import ImportFormatError
from ingest.recorder import EpisodeRecorder
from schemas.events import ChatMessage, EpisodeStatus, PolicyRef, TaskRef

ChatRole = Literal["system", "user", "assistant", "tool"]

FORMAT = "mini-swe-agent"
"""Name of this format in ``importers.formats()``."""

FAMILY = "imported/mini-swe-agent"
"""Task family of imported episodes."""

DEFAULT_POLICY = "mini-swe-agent"
"""Policy id when the trajectory does not name its model."""

EXIT_STATUSES: dict[str, EpisodeStatus] = {
    "Submitted": "success",
    "LimitsExceeded": "truncated",
}
"""mini-swe-agent ``exit_status`` -> episode status; any other one is ``aborted``.

``Submitted`` means the agent submitted, not that a judge passed it: an
imported episode carries no reward.
"""

SUBMIT_MARKERS = ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT")
"""First output lines with which mini-swe-agent recognises a submission."""

_COMMAND_BLOCK = re.compile(r"```(?:mswea_bash_command|bash)[ \t]*\n(.*?)\n```", re.DOTALL)
_SUBMIT_COMMAND = re.compile(r"^\s*echo\s+['\"]?(?:" + "|".join(SUBMIT_MARKERS) + r")['\"]?(?:\s|$|&&|;|\|)")
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_TIMEOUT = re.compile(r"<command>.*</command>\s*timed out and has been killed", re.DOTALL)
_CHAT_ROLES: dict[str, ChatRole] = {
    "system": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}


@dataclass(frozen=True)
class Trajectory:
    """A mini-swe-agent trajectory, checked for shape.

    Attributes:
        messages: the chat messages (each an object with a string ``role``).
        info: the ``info`` object (empty for a bare message list).
        top_level: the other top-level keys of a wrapped trajectory
            (``trajectory_format``, ``instance_id``, ...).
    """

    messages: list[dict[str, Any]]
    info: dict[str, Any]
    top_level: dict[str, Any]


@dataclass(frozen=True)
class Observation:
    """What an observation message says about the command it answers.

    Attributes:
        exit_code: the ``<returncode>``; ``None`` after a timeout.
        stdout: the command's output (head and tail with an elision marker
            when mini-swe-agent truncated it).
        timed_out: whether the command was killed at its timeout.
    """

    exit_code: int | None
    stdout: str
    timed_out: bool


@dataclass
class _Pending:
    call_id: str
    tool: str
    index: int


def looks_like(data: Any) -> bool:
    """Whether decoded JSON has the shape of a mini-swe-agent trajectory."""
    if isinstance(data, dict):
        return isinstance(data.get("messages"), list)
    return (
        isinstance(data, list)
        and len(data) > 0
        and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in data)
    )


def parse_trajectory(data: Any, path: Path) -> Trajectory:
    """Check the shape of a decoded trajectory.

    Args:
        data: the file's decoded JSON.
        path: the file, for error messages.

    Returns:
        The messages, ``info`` and other top-level keys.

    Raises:
        ImportFormatError: ``data`` is neither a list of chat messages nor an
            object with a ``messages`` list, or a message is not an object
            with a string ``role``.
    """
    info: dict[str, Any] = {}
    top: dict[str, Any] = {}
    if isinstance(data, list):
        messages = data
    elif isinstance(data, dict):
        if "messages" not in data:
            raise ImportFormatError(
                f"{path}: a mini-swe-agent trajectory object needs a 'messages' list; "
                f"found keys {sorted(data)}"
            )
        messages = data["messages"]
        if not isinstance(messages, list):
            raise ImportFormatError(
                f"{path}: 'messages' must be a list of chat messages, got {json_kind(messages)}"
            )
        raw_info = data.get("info") or {}
        if not isinstance(raw_info, dict):
            raise ImportFormatError(f"{path}: 'info' must be an object, got {json_kind(raw_info)}")
        info = raw_info
        top = {k: v for k, v in data.items() if k not in ("messages", "info")}
    else:
        raise ImportFormatError(
            f"{path}: a mini-swe-agent trajectory is a JSON list of chat messages or an object "
            f"with a 'messages' list, got {json_kind(data)}"
        )
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ImportFormatError(
                f"{path}: message {i} must be an object with a string 'role', got "
                f"{json_kind(message) if not isinstance(message, dict) else 'an object without one'}"
            )
    return Trajectory(messages=messages, info=info, top_level=top)


def parse_observation(text: str) -> Observation | None:
    """Read an observation message; ``None`` when ``text`` is not one.

    Args:
        text: content of a ``user`` (or ``tool``) message.

    Returns:
        The exit code and output, or ``None`` for text with neither a
        ``<returncode>`` nor the timeout message.
    """
    code = _RETURNCODE.search(text)
    if code is not None:
        return Observation(exit_code=int(code.group(1)), stdout=_output(text, code.end()), timed_out=False)
    if _TIMEOUT.search(text):
        return Observation(exit_code=None, stdout=_output(text, 0).removesuffix("\n"), timed_out=True)
    return None


def _output(text: str, start: int) -> str:
    """The command output inside an observation (after ``start``)."""
    body = text[start:]
    opening = body.find("<output>")
    closing = body.rfind("</output>")
    if opening >= 0 and closing > opening:
        return body[opening + len("<output>") : closing].removeprefix("\n")
    head = _between(body, "output_head")
    tail = _between(body, "output_tail")
    if head is not None or tail is not None:
        elided = _between(body, "elided_chars") or "some characters elided"
        return f"{head or ''}\n[... {elided.strip()} ...]\n{tail or ''}"
    return body.lstrip("\n")


def _between(body: str, tag: str) -> str | None:
    opening, closing = body.find(f"<{tag}>"), body.rfind(f"</{tag}>")
    if opening < 0 or closing < opening:
        return None
    return body[opening + len(tag) + 2 : closing].removeprefix("\n").removesuffix("\n")


def text_of(content: Any) -> str:
    """The text of a message's ``content`` (a string, ``None``, or a list of content parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                parts.append(json.dumps(part, sort_keys=True))
        return "\n".join(parts)
    return json.dumps(content, sort_keys=True)


def is_submit_command(command: str) -> bool:
    """Whether ``command`` is mini-swe-agent's submission (``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``)."""
    return _SUBMIT_COMMAND.match(command) is not None


def import_mini_swe_agent(
    path: Path | str, recorder: EpisodeRecorder, *, episode_id: str | None = None
) -> ImportReport:
    """Record a mini-swe-agent trajectory as one episode through ``recorder``.

    Args:
        path: the ``.traj.json`` file.
        recorder: the recorder the events go through.
        episode_id: the episode id to record under (``None``: derived from the format and the
            content, so a re-import names the same episode and sends the same event ids).

    Returns:
        What was recorded, and what could only be kept as annotations.

    Raises:
        ImportFormatError: the file is not a mini-swe-agent trajectory (nothing
            is recorded then).
    """
    source = SourceFile.read(path)
    traj = parse_trajectory(source.data, source.path)
    return _Importer(source, traj, recorder).run(episode_id)


class _Importer:
    """One import: walks the messages once, keeping the conversation and the open call."""

    def __init__(self, source: SourceFile, traj: Trajectory, recorder: EpisodeRecorder) -> None:
        self.source = source
        self.traj = traj
        self.recorder = recorder
        self.report = ImportReport(
            source=source.path, format=FORMAT, sha256=source.sha256, source_items=len(traj.messages)
        )
        self.prompt: list[ChatMessage] = []
        self.pending: _Pending | None = None
        self.pending_tools: dict[str, _Pending] = {}
        self.format_error_at: int | None = None
        self.submitted = False
        self.exit_status: str | None = None
        configured = dig(traj.info, "config", "model", "model_name")
        self.model_name = configured if isinstance(configured, str) and configured else None

    # ------------------------------------------------------------- episode

    def run(self, episode_id: str | None) -> ImportReport:
        traj, info = self.traj, self.traj.info
        system_at = _first(traj.messages, "system")
        task_at = _first(traj.messages, "user")
        instance_id = info.get("instance_id") or traj.top_level.get("instance_id")
        task_id = str(instance_id) if instance_id else _stem(self.source.path)
        policy_id = self.model_name or DEFAULT_POLICY
        timestamps = [source_timestamp(_raw_ts(m)) for m in traj.messages]
        known = [t for t in timestamps if t is not None]

        metadata = self.source.metadata(self.recorder, FORMAT)
        metadata.update(
            {
                "system_prompt": None
                if system_at is None
                else text_of(traj.messages[system_at].get("content")),
                "instruction": None if task_at is None else text_of(traj.messages[task_at].get("content")),
                "trajectory_format": traj.top_level.get("trajectory_format"),
                "mini_version": info.get("mini_version"),
                "exit_status": info.get("exit_status"),
                "model_stats": info.get("model_stats"),
                "timestamps": "source" if known else "import time (the source has none)",
            }
        )
        metadata = {k: v for k, v in metadata.items() if v is not None}

        episode_id, event_ids = self.source.ids(FORMAT, known[0] if known else None, episode_id)
        with self.recorder.episode(
            task=TaskRef(id=task_id, family=FAMILY),
            policy=PolicyRef(id=policy_id),
            episode_id=episode_id,
            event_ids=event_ids,
            metadata=metadata,
            ts=known[0] if known else None,
        ) as episode:
            ep = ReportingEpisode(episode, self.report, FORMAT)
            if info or traj.top_level:
                # Whatever info holds beyond the fields above (config, submission, traceback)
                # stays on the episode verbatim.
                ep.annotate(
                    "import.source_info",
                    {"info": info, "top_level": traj.top_level},
                    ts=known[0] if known else None,
                )
            for index, message in enumerate(traj.messages):
                if index in (system_at, task_at):
                    self.report.map_item(index, "episode_started")
                    self._remember(message)
                    continue
                self._message(ep, index, message, timestamps[index])
            status, reason = self._status()
            ep.end(status, reason=reason, ts=known[-1] if known else None)
        return self.report

    def _status(self) -> tuple[EpisodeStatus, str]:
        exit_status = self.traj.info.get("exit_status") or self.exit_status
        if isinstance(exit_status, str) and exit_status:
            status = EXIT_STATUSES.get(exit_status)
            if status is None:
                self.report.notes.append(
                    f"exit_status {exit_status!r} has no trajlake status; recorded as 'aborted'"
                )
                return "aborted", f"mini-swe-agent exit_status {exit_status!r} (unmapped)"
            return status, f"mini-swe-agent exit_status {exit_status!r}; not judged"
        if self.submitted:
            return "success", "submitted (no exit_status in the source); not judged"
        self.report.notes.append("no exit_status and no submission; recorded as 'aborted'")
        return "aborted", "trajectory ends without a submission"

    # ------------------------------------------------------------- messages

    def _message(
        self, ep: ReportingEpisode, index: int, message: dict[str, Any], ts: dt.datetime | None
    ) -> None:
        role = message["role"]
        if role == "assistant":
            self._assistant(ep, index, message, ts)
        elif role in ("user", "tool"):
            self._observation(ep, index, message, ts)
        elif role == "exit":
            self._exit(ep, index, message, ts)
        elif role == "system":
            self._remember(message)
            ep.unmapped(
                index,
                label="system message",
                item=message,
                ts=ts,
                reason="a system message after the first has no event type of its own; "
                "it is part of the following prompts",
            )
        else:
            ep.unmapped(
                index,
                label=f"{role} message",
                item=message,
                ts=ts,
                reason=f"role {role!r} is not a chat role trajlake records",
            )

    def _assistant(
        self, ep: ReportingEpisode, index: int, message: dict[str, Any], ts: dt.datetime | None
    ) -> None:
        content = text_of(message.get("content"))
        response = dig(message, "extra", "response")
        usage = dig(response, "usage")
        ep.model_call(
            index,
            completion=content,
            messages=list(self.prompt),
            finish_reason=_str_or_none(dig(response, "choices", 0, "finish_reason")),
            prompt_tokens=_count(dig(usage, "prompt_tokens")),
            completion_tokens=_count(dig(usage, "completion_tokens")),
            model=_str_or_none(dig(response, "model")) or self.model_name,
            ts=ts,
        )
        self._remember(message)
        self._abandon_open_calls()
        tool_calls = message.get("tool_calls")
        if isinstance(tool_calls, list) and tool_calls:
            for call in tool_calls:
                self._structured_call(ep, index, call, ts)
            return
        commands = _COMMAND_BLOCK.findall(content)
        if len(commands) != 1:
            self.format_error_at = index
            ep.annotate(
                "format_error",
                {
                    "source_format": FORMAT,
                    "index": index,
                    "reason": f"expected exactly one command block, found {len(commands)}",
                    "commands": commands,
                },
                ts=ts,
            )
            return
        command = commands[0].strip()
        tool = "submit" if is_submit_command(command) and self._submission_follows(index) else "bash"
        call_id = ep.tool_call(index, tool, {"command": command}, ts=ts)
        self.pending = _Pending(call_id=call_id, tool=tool, index=index)

    def _structured_call(self, ep: ReportingEpisode, index: int, call: Any, ts: dt.datetime | None) -> None:
        """An OpenAI ``tool_calls`` entry (mini-swe-agent's tool-calling mode)."""
        function = call.get("function") if isinstance(call, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        raw_args = function.get("arguments") if isinstance(function, dict) else None
        try:
            arguments = json.loads(raw_args) if isinstance(raw_args, str) else raw_args
        except json.JSONDecodeError:
            arguments = None
        if not isinstance(name, str) or not name or not isinstance(arguments, dict):
            ep.annotate(
                "format_error",
                {
                    "source_format": FORMAT,
                    "index": index,
                    "reason": "tool call without a function name and JSON object arguments",
                    "tool_call": call,
                },
                ts=ts,
            )
            return
        command = arguments.get("command")
        tool = name
        if (
            name == "bash"
            and isinstance(command, str)
            and is_submit_command(command)
            and self._submission_follows(index)
        ):
            tool = "submit"
        source_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else None
        call_id = ep.tool_call(index, tool, arguments, call_id=source_id, ts=ts)
        self.pending_tools[source_id or call_id] = _Pending(call_id=call_id, tool=tool, index=index)

    def _observation(
        self, ep: ReportingEpisode, index: int, message: dict[str, Any], ts: dt.datetime | None
    ) -> None:
        role = message["role"]
        content = text_of(message.get("content"))
        self._remember(message)
        target: _Pending | None = None
        if role == "tool":
            target = self.pending_tools.pop(str(message.get("tool_call_id")), None)
        elif self.pending is not None:
            target, self.pending = self.pending, None
        elif len(self.pending_tools) == 1:
            # tool-calling mode answering with a user message
            target = self.pending_tools.pop(next(iter(self.pending_tools)))
        observation = parse_observation(content)
        if target is not None and target.tool == "submit" and observation is None:
            self.submitted = True
            ep.tool_result(index, target.call_id, stdout=content, ts=ts)
        elif target is not None and observation is not None:
            ep.tool_result(
                index,
                target.call_id,
                exit_code=observation.exit_code,
                stdout=observation.stdout,
                timed_out=observation.timed_out,
                ts=ts,
            )
        elif target is not None:
            self.report.notes.append(f"tool call of item {target.index} has no observation")
            ep.unmapped(
                index,
                label=f"{role} message",
                item=message,
                ts=ts,
                reason=f"follows the command of item {target.index} but has no "
                "<returncode>/<output> observation shape (e.g. an error message)",
            )
        elif self.format_error_at is not None:
            ep.unmapped(
                index,
                label=f"{role} message",
                item=message,
                ts=ts,
                reason=f"feedback on the format error of item {self.format_error_at}; "
                "it answers no tool call (kept in the following prompts)",
            )
        elif role == "tool":
            ep.unmapped(
                index,
                label="tool message",
                item=message,
                ts=ts,
                reason=f"answers no open tool call (tool_call_id {message.get('tool_call_id')!r})",
            )
        else:
            ep.unmapped(
                index,
                label="user message",
                item=message,
                ts=ts,
                reason="a user turn that answers no tool call (kept in the following prompts)",
            )
        self.format_error_at = None

    def _exit(
        self, ep: ReportingEpisode, index: int, message: dict[str, Any], ts: dt.datetime | None
    ) -> None:
        """mini-swe-agent 2's final ``exit`` message (``extra.exit_status``, ``extra.submission``)."""
        status = dig(message, "extra", "exit_status")
        if isinstance(status, str) and status:
            self.exit_status = status
        submits = [
            p for p in [self.pending, *self.pending_tools.values()] if p is not None and p.tool == "submit"
        ]
        if submits:
            self.pending, self.pending_tools = None, {}
            self.submitted = True
            ep.tool_result(index, submits[0].call_id, stdout=text_of(message.get("content")), ts=ts)
        else:
            ep.unmapped(
                index,
                label="exit message",
                item=message,
                ts=ts,
                reason="the agent's exit record answers no submit call; its exit_status "
                "sets the episode status",
            )

    # ------------------------------------------------------------- helpers

    def _submission_follows(self, index: int) -> bool:
        """Whether the submit-looking command at ``index`` did submit.

        mini-swe-agent submits when the *output's* first line is the marker;
        then no ``<returncode>`` observation follows, only the submission.
        """
        following = self.traj.messages[index + 1 : index + 2]
        if not following:
            return True
        return parse_observation(text_of(following[0].get("content"))) is None

    def _abandon_open_calls(self) -> None:
        for pending in [self.pending, *self.pending_tools.values()]:
            if pending is not None:
                self.report.notes.append(
                    f"tool call of item {pending.index} ({pending.tool}) got no observation"
                )
        self.pending, self.pending_tools = None, {}

    def _remember(self, message: dict[str, Any]) -> None:
        role = _CHAT_ROLES.get(message["role"])
        if role is None:
            return
        tool_call_id = message.get("tool_call_id") if role == "tool" else None
        self.prompt.append(
            ChatMessage(
                role=role,
                content=text_of(message.get("content")),
                tool_call_id=str(tool_call_id) if tool_call_id is not None else None,
            )
        )


def _first(messages: list[dict[str, Any]], role: str) -> int | None:
    """Index of the first ``role`` message before the first assistant message."""
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            return None
        if message["role"] == role:
            return i
    return None


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".traj.json", ".json"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def _raw_ts(message: dict[str, Any]) -> Any:
    if "timestamp" in message:
        return message["timestamp"]
    return dig(message, "extra", "timestamp")


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


TRAJECTORY_FORMAT = TrajectoryFormat(
    name=FORMAT,
    looks_like=looks_like,
    import_file=import_mini_swe_agent,
    description="mini-swe-agent trajectory (.traj.json: messages and info)",
)
"""This format, as the ``trajlake.importers`` entry point registers it."""
