"""Importer of OpenHands event streams (the trajectory JSON OpenHands saves).

An OpenHands trajectory is a JSON list of events (or an evaluation record
with that list under ``history``). Every event has ``id``, ``timestamp``
(naive ISO 8601, UTC) and ``source`` (``user``, ``agent``, ``environment``),
and is either an *action* (``action``, ``args``, ``timeout``, ``message``) or
an *observation* (``observation``, ``cause`` = the id of the action it
answers, ``content``, ``extras``, ``message``). Actions the LLM chose carry
``tool_call_metadata`` (``function_name``, ``tool_call_id``, the full
``model_response``); newer versions add ``llm_metrics`` (token usages and
latencies per response).

Mapping (every event is accounted for in the :class:`ImportReport`):

* the first ``message`` action from the user -> ``episode_started`` metadata
  (``instruction``); later user messages -> ``annotation`` (no event type
  for a mid-episode user turn);
* an agent action with an LLM response -> ``model_call`` (completion: the
  response's text, or the ``thought``/message; token counts, finish reason
  and model from ``model_response``/``llm_metrics``; the response's native
  ``tool_calls``; prompt: the conversation reconstructed from the stream,
  assistant turns with their ``tool_calls``). One response that produced
  several actions is one ``model_call``;
* an agent ``message`` action -> ``model_call``;
* agent tool actions (``run``, ``run_ipython``, ``read``, ``write``,
  ``edit``, ``browse``, ``browse_interactive``, ``think``, ``delegate``,
  ``mcp``, ...) -> ``tool_call`` (tool = the action name, arguments =
  ``args`` plus ``model_tool_call``, the model's own call (function and
  arguments: an ``edit``'s text is only there); call id =
  ``tool_call_metadata.tool_call_id`` when present); ``finish`` -> ``tool_call``
  ``submit``;
* an observation whose ``cause`` is such an action -> ``tool_result`` (exit
  code from ``extras.metadata.exit_code`` or ``extras.exit_code``, stdout =
  ``content``; an ``error`` observation goes to stderr; exit code -1 with a
  suffix saying it timed out, or that a still-running command had no new output
  at its timeout, is a timeout);
* the status: ``finish`` (or state ``finished``) -> success, ``reject`` ->
  failure, ``awaiting_user_input`` after the agent's answer (a message, no tool
  call after it) -> success; none is judged; anything else -> aborted;
* everything else (``system``, ``agent_state_changed``, ``null``,
  ``recall``, ``change_agent_state``, ``condensation``, user actions,
  observations that answer no tool call, ...) -> ``annotation`` with the raw
  event, listed in :attr:`ImportReport.unmapped`.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

FORMAT = "openhands"
"""Name of this format in ``importers.formats()``."""

FAMILY = "imported/openhands"
"""Task family of imported episodes."""

DEFAULT_POLICY = "openhands"
"""Policy id when no event names the model."""

NOT_POLICY_ACTIONS = frozenset(
    {
        "system",
        "change_agent_state",
        "null",
        "recall",
        "condensation",
        "condensation_request",
    }
)
"""Actions the controller or runtime records; they are not tool calls of the policy."""

_UNFINISHED_EXIT_CODE = -1
"""OpenHands' exit code for a command that had not exited (still running, timed out)."""

_TIMEOUT_MARKERS = ("timed out", "no new output after")
"""What OpenHands' suffix says when a command was stopped, or left running, at its timeout."""


@dataclass
class _Call:
    call_id: str
    tool: str
    index: int
    action_id: Any


def looks_like(data: Any) -> bool:
    """Whether decoded JSON has the shape of an OpenHands event stream."""
    events = data.get("history") if isinstance(data, dict) else data
    return (
        isinstance(events, list)
        and len(events) > 0
        and all(isinstance(e, dict) for e in events)
        and all("action" in e or "observation" in e for e in events)
    )


def parse_events(data: Any, path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Check the shape of a decoded OpenHands trajectory.

    Args:
        data: the file's decoded JSON.
        path: the file, for error messages.

    Returns:
        The events, and the other top-level keys of an evaluation record
        (empty for a bare list).

    Raises:
        ImportFormatError: ``data`` is not a list of event objects (nor an
            object with one under ``history``), is empty, or has no action
            or observation at all.
    """
    top: dict[str, Any] = {}
    if isinstance(data, dict):
        if not isinstance(data.get("history"), list):
            raise ImportFormatError(
                f"{path}: an OpenHands trajectory is a JSON list of events (or an object with "
                f"one under 'history'); this object has keys {sorted(data)}"
            )
        events, top = data["history"], {k: v for k, v in data.items() if k != "history"}
    elif isinstance(data, list):
        events = data
    else:
        raise ImportFormatError(
            f"{path}: an OpenHands trajectory is a JSON list of events, got {json_kind(data)}"
        )
    if not events:
        raise ImportFormatError(f"{path}: the OpenHands event list is empty")
    for i, event in enumerate(events):
        if not isinstance(event, dict):
            raise ImportFormatError(f"{path}: event {i} must be an object, got {json_kind(event)}")
    if not any("action" in e or "observation" in e for e in events):
        raise ImportFormatError(f"{path}: no event has an 'action' or 'observation' key")
    return events, top


def import_openhands(
    path: Path | str, recorder: EpisodeRecorder, *, episode_id: str | None = None
) -> ImportReport:
    """Record an OpenHands event stream as one episode through ``recorder``.

    Args:
        path: the trajectory JSON file.
        recorder: the recorder the events go through.
        episode_id: the episode id to record under (``None``: derived from the format and the
            content, so a re-import names the same episode and sends the same event ids).

    Returns:
        What was recorded, and what could only be kept as annotations.

    Raises:
        ImportFormatError: the file is not an OpenHands event stream (nothing
            is recorded then).
    """
    source = SourceFile.read(path)
    events, top = parse_events(source.data, source.path)
    return _Importer(source, events, top, recorder).run(episode_id)


class _Importer:
    """One import: walks the events once, keeping the conversation and the open calls."""

    def __init__(
        self, source: SourceFile, events: list[dict[str, Any]], top: dict[str, Any], recorder: EpisodeRecorder
    ) -> None:
        self.source = source
        self.events = events
        self.top = top
        self.recorder = recorder
        self.report = ImportReport(
            source=source.path, format=FORMAT, sha256=source.sha256, source_items=len(events)
        )
        self.timestamps = [source_timestamp(e.get("timestamp")) for e in events]
        self.prompt: list[ChatMessage] = []
        self.open_calls: dict[Any, _Call] = {}
        self.answered: dict[Any, int] = {}
        self.call_ids: set[str] = set()
        self.responses: set[str] = set()
        self.finished = False
        self.rejected = False
        self.agent_state: str | None = None
        self.answered_last = False
        """Whether the policy's last step was a message to the user (its answer), not a tool call."""

    # ------------------------------------------------------------- episode

    def run(self, episode_id: str | None) -> ImportReport:
        task_at = next(
            (
                i
                for i, e in enumerate(self.events)
                if e.get("action") == "message" and e.get("source") == "user"
            ),
            None,
        )
        system_at = next((i for i, e in enumerate(self.events) if e.get("action") == "system"), None)
        models = (dig(e, "tool_call_metadata", "model_response", "model") for e in self.events)
        model = next((m for m in models if isinstance(m, str) and m), None)
        instance_id = self.top.get("instance_id")
        known = [t for t in self.timestamps if t is not None]
        unreadable = [
            i
            for i, (e, t) in enumerate(zip(self.events, self.timestamps))
            if t is None and e.get("timestamp") is not None
        ]
        if unreadable:
            self.report.notes.append(f"unreadable timestamps at items {unreadable}; import time used")

        metadata = self.source.metadata(self.recorder, FORMAT)
        metadata.update(
            {
                "instruction": None if task_at is None else _message_text(self.events[task_at]),
                "system_prompt": None if system_at is None else _message_text(self.events[system_at]),
                "prompts": "reconstructed from the event stream"
                + ("" if system_at is not None else "; the system prompt is not in the source"),
                "timestamps": "source (naive ISO read as UTC)" if known else "import time (none in source)",
            }
        )
        metadata = {k: v for k, v in metadata.items() if v is not None}

        episode_id, event_ids = self.source.ids(FORMAT, known[0] if known else None, episode_id)
        with self.recorder.episode(
            task=TaskRef(id=str(instance_id) if instance_id else _stem(self.source.path), family=FAMILY),
            policy=PolicyRef(id=model or DEFAULT_POLICY),
            episode_id=episode_id,
            event_ids=event_ids,
            metadata=metadata,
            ts=known[0] if known else None,
        ) as episode:
            ep = ReportingEpisode(episode, self.report, FORMAT)
            if self.top:
                ep.annotate("import.source_info", {"top_level": self.top}, ts=known[0] if known else None)
            for index, event in enumerate(self.events):
                if index == task_at:
                    self.report.map_item(index, "episode_started")
                    self.prompt.append(ChatMessage(role="user", content=_message_text(event)))
                    continue
                self._event(ep, index, event)
            for call in self.open_calls.values():
                if call.tool != "submit":
                    self.report.notes.append(
                        f"tool call of item {call.index} (action id {call.action_id}) got no observation"
                    )
            status, reason = self._status()
            ep.end(status, reason=reason, ts=known[-1] if known else None)
        return self.report

    def _status(self) -> tuple[EpisodeStatus, str]:
        if self.rejected:
            return "failure", "the agent rejected the task (reject action)"
        if self.finished:
            return "success", "the agent called finish; not judged"
        if self.agent_state == "finished":
            return "success", "agent state 'finished'; not judged"
        if self.agent_state == "rejected":
            return "failure", "agent state 'rejected'"
        if self.agent_state == "awaiting_user_input" and self.answered_last:
            return "success", "the agent answered and awaits the user (no finish action); not judged"
        reason = f"no finish action; last agent state {self.agent_state!r}"
        self.report.notes.append(f"{reason}; recorded as 'aborted'")
        return "aborted", reason

    # ------------------------------------------------------------- events

    def _event(self, ep: ReportingEpisode, index: int, event: dict[str, Any]) -> None:
        ts = self.timestamps[index]
        if "action" in event:
            self._action(ep, index, event, ts)
        elif "observation" in event:
            self._observation(ep, index, event, ts)
        else:
            ep.unmapped(
                index,
                label=f"event id {event.get('id')}",
                item=event,
                ts=ts,
                reason="neither an action nor an observation",
            )

    def _action(
        self, ep: ReportingEpisode, index: int, event: dict[str, Any], ts: dt.datetime | None
    ) -> None:
        action = str(event["action"])
        source = event.get("source")
        label = f"event id {event.get('id')}: {source} action {action!r}"
        raw_args = event.get("args")
        args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
        if action == "message":
            text = _message_text(event)
            if source == "agent":
                self.answered_last = True
                if not self._model_call(ep, index, event, text, ts):
                    ep.unmapped(
                        index,
                        label=label,
                        item=event,
                        ts=ts,
                        reason="an agent message with neither text nor an LLM response",
                    )
                return
            self.prompt.append(ChatMessage(role="user", content=text))
            ep.unmapped(
                index,
                label=label,
                item=event,
                ts=ts,
                reason="a user turn after the instruction has no event type of its own "
                "(kept in the following prompts)",
            )
            return
        if action == "system":
            self.prompt.insert(0, ChatMessage(role="system", content=_message_text(event)))
            ep.unmapped(
                index,
                label=label,
                item=event,
                ts=ts,
                reason="the system prompt and tool list have no event type of their own "
                "(kept in episode_started metadata and the prompts)",
            )
            return
        if action == "change_agent_state":
            state = args.get("agent_state")
            self.agent_state = state if isinstance(state, str) else self.agent_state
        if action in NOT_POLICY_ACTIONS:
            ep.unmapped(
                index,
                label=label,
                item=event,
                ts=ts,
                reason="controller/runtime bookkeeping, not a step of the policy",
            )
            return
        if source != "agent":
            ep.unmapped(
                index, label=label, item=event, ts=ts, reason=f"an action by {source!r}, not by the policy"
            )
            return
        thought = args.get("thought")
        self.answered_last = False
        self._model_call(ep, index, event, thought if isinstance(thought, str) else "", ts)
        tool = "submit" if action == "finish" else action
        native = _native_call(event)
        if native is not None:  # what the model asked for (an edit's text is only there)
            args = {**args, "model_tool_call": native}
        call_id = ep.tool_call(index, tool, args, call_id=self._call_id(index, event), ts=ts)
        self.call_ids.add(call_id)
        self.open_calls[event.get("id", f"item-{index}")] = _Call(
            call_id=call_id, tool=tool, index=index, action_id=event.get("id")
        )
        self.finished = self.finished or action == "finish"
        self.rejected = self.rejected or action == "reject"

    def _model_call(
        self, ep: ReportingEpisode, index: int, event: dict[str, Any], fallback: str, ts: dt.datetime | None
    ) -> bool:
        """Record the LLM response behind an agent action, once per response.

        Returns:
            Whether a ``model_call`` was recorded for this event.
        """
        response = dig(event, "tool_call_metadata", "model_response")
        metrics = event.get("llm_metrics")
        response_id: str | None = None
        if isinstance(response, dict):
            response_id = str(response["id"]) if response.get("id") is not None else None
            if response_id is not None and response_id in self.responses:
                return False  # one response, several actions: recorded with the first
            content = dig(response, "choices", 0, "message", "content")
            completion = content if isinstance(content, str) and content else fallback
            finish_reason = dig(response, "choices", 0, "finish_reason")
            model = response.get("model")
            usage = response.get("usage")
            native = dig(response, "choices", 0, "message", "tool_calls")
            native = native if isinstance(native, list) and native else None
        elif fallback or isinstance(metrics, dict):
            completion, finish_reason, model, usage, native = fallback, None, None, None, None
        else:
            return False  # no LLM output in this event (e.g. an action replayed without a response)
        token_usage = _for_response(dig(metrics, "token_usages"), response_id)
        latency = _for_response(dig(metrics, "response_latencies"), response_id)
        if response_id is None and isinstance(token_usage, dict):
            found = token_usage.get("response_id")
            response_id = str(found) if found else None
            if response_id is not None and response_id in self.responses:
                return False
        if response_id is not None:
            self.responses.add(response_id)
        ep.model_call(
            index,
            completion=completion,
            messages=list(self.prompt),
            finish_reason=finish_reason if isinstance(finish_reason, str) else None,
            latency_s=_seconds(dig(latency, "latency")),
            prompt_tokens=_count(dig(usage, "prompt_tokens"), dig(token_usage, "prompt_tokens")),
            completion_tokens=_count(dig(usage, "completion_tokens"), dig(token_usage, "completion_tokens")),
            model=model if isinstance(model, str) and model else None,
            tool_calls=native,
            ts=ts,
        )
        self.prompt.append(ChatMessage(role="assistant", content=completion, tool_calls=native))
        return True

    def _observation(
        self, ep: ReportingEpisode, index: int, event: dict[str, Any], ts: dt.datetime | None
    ) -> None:
        observation = str(event["observation"])
        raw_extras = event.get("extras")
        extras: dict[str, Any] = raw_extras if isinstance(raw_extras, dict) else {}
        label = f"event id {event.get('id')}: observation {observation!r}"
        if observation == "agent_state_changed":
            state = extras.get("agent_state")
            self.agent_state = state if isinstance(state, str) else self.agent_state
        cause = event.get("cause")
        call = self.open_calls.pop(cause, None) if cause is not None else None
        if call is None and cause is None:
            tool_call_id = dig(event, "tool_call_metadata", "tool_call_id")
            key = next((k for k, c in self.open_calls.items() if c.call_id == tool_call_id), None)
            call = self.open_calls.pop(key) if key is not None else None
        if call is None:
            if cause is None:
                reason = "caused by no action: runtime/controller bookkeeping"
            elif cause in self.answered:
                reason = (
                    f"a further observation of action id {cause}, already answered by item "
                    f"{self.answered[cause]}"
                )
            else:
                reason = f"answers action id {cause}, which is not a tool call of the policy"
            ep.unmapped(index, label=label, item=event, ts=ts, reason=reason)
            return
        self.answered[call.action_id] = index
        content = _text(event.get("content"))
        exit_code = dig(extras, "metadata", "exit_code")
        if exit_code is None:
            exit_code = extras.get("exit_code")
        if (
            not isinstance(exit_code, int)
            or isinstance(exit_code, bool)
            or exit_code == _UNFINISHED_EXIT_CODE
        ):
            exit_code = None
        if observation == "error":
            ep.tool_result(index, call.call_id, stderr=content, error_kind="invalid_arguments", ts=ts)
        else:
            suffix = _text(dig(extras, "metadata", "suffix"))
            # "timed out", or still running with no new output at the soft timeout (exit code -1)
            timed_out = exit_code is None and any(m in suffix for m in _TIMEOUT_MARKERS)
            ep.tool_result(
                index, call.call_id, exit_code=exit_code, stdout=content, timed_out=timed_out, ts=ts
            )
        self.prompt.append(ChatMessage(role="tool", content=content, tool_call_id=call.call_id))

    # ------------------------------------------------------------- helpers

    def _call_id(self, index: int, event: dict[str, Any]) -> str:
        """The source's tool call id when it has a fresh one, else one made from the event id."""
        tool_call_id = dig(event, "tool_call_metadata", "tool_call_id")
        if isinstance(tool_call_id, str) and tool_call_id and tool_call_id not in self.call_ids:
            return tool_call_id
        made = f"openhands-{event.get('id', index)}"
        while made in self.call_ids:
            made += "'"
        return made


def _native_call(event: dict[str, Any]) -> dict[str, Any] | None:
    """The model's own tool call behind an action (its function and arguments), from its response."""
    wanted = dig(event, "tool_call_metadata", "tool_call_id")
    calls = dig(event, "tool_call_metadata", "model_response", "choices", 0, "message", "tool_calls")
    if not isinstance(calls, list):
        return None
    for call in calls:
        if isinstance(call, dict) and (wanted is None or call.get("id") == wanted):
            function = call.get("function") if isinstance(call.get("function"), dict) else {}
            raw = function.get("arguments")
            try:
                arguments = json.loads(raw) if isinstance(raw, str) else raw
            except json.JSONDecodeError:
                arguments = raw
            return {"id": call.get("id"), "function": function.get("name"), "arguments": arguments}
    return None


def _message_text(event: dict[str, Any]) -> str:
    """The text of a ``message``/``system`` action: ``args.content``, else ``message``."""
    content = dig(event, "args", "content")
    if isinstance(content, str) and content:
        return content
    return _text(event.get("message"))


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def _for_response(entries: Any, response_id: str | None) -> Any:
    """The ``llm_metrics`` entry of ``response_id`` (the latest one when the id is unknown)."""
    if not isinstance(entries, list) or not entries:
        return None
    if response_id is not None:
        return next((e for e in entries if isinstance(e, dict) and e.get("response_id") == response_id), None)
    return entries[-1]


def _count(*values: Any) -> int | None:
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def _seconds(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return 0.0


def _stem(path: Path) -> str:
    name = path.name
    return name[: -len(".json")] if name.endswith(".json") and len(name) > 5 else name


TRAJECTORY_FORMAT = TrajectoryFormat(
    name=FORMAT,
    looks_like=looks_like,
    import_file=import_openhands,
    description="OpenHands event stream (a JSON list of events, or an object with them under history)",
)
"""This format, as the ``trajlake.importers`` entry point registers it."""
