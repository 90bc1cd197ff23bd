"""Episodes as a pure fold over their events: ``project(state, event) -> state``.

One function per event type (``singledispatch``), no I/O. The pipelines call
:func:`fold_episode` with every event of an episode (from both topics) and turn
the resulting :class:`EpisodeState` into rows of the ``episodes``, ``steps``,
``rewards`` and ``failures`` tables. Because the rows are a function of the
episode's whole event set, re-running a batch, replaying the log, or receiving
events late and out of order all converge to the same rows.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import singledispatch
from typing import Any

from schemas.events import (
    Annotation,
    EpisodeEnded,
    EpisodeStarted,
    EventBase,
    ModelCall,
    Reward,
    SandboxEvent,
    ToolCall,
    ToolResult,
)


@dataclass(frozen=True)
class RewardRecord:
    """The latest reward of one judge version on an episode."""

    event_id: str
    seq: int
    ts: dt.datetime
    judge_name: str
    judge_version: str
    score: float
    verdict: str
    components: dict[str, float]
    flags: tuple[str, ...]
    evidence: Any
    source: str
    rejudge_run_id: str | None


@dataclass(frozen=True)
class EpisodeState:
    """Everything the tables need to know about one episode (immutable)."""

    episode_id: str
    seqs: frozenset[int] = frozenset()
    """``seq`` values seen among the episode's own events (not re-judge rewards)."""
    steps: tuple[EventBase, ...] = ()
    """The episode's own events, in ``seq`` order."""
    started: EpisodeStarted | None = None
    ended: EpisodeEnded | None = None
    num_model_calls: int = 0
    num_tool_calls: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    first_ts: dt.datetime | None = None
    rewards: dict[tuple[str, str], RewardRecord] = field(default_factory=dict)
    """Latest reward per (judge name, judge version)."""

    @property
    def completeness(self) -> str:
        """``complete`` (ended, no gaps), ``open`` (not ended yet) or ``gap`` (a missing seq)."""
        if self.missing_seqs:
            return "gap"
        return "complete" if self.ended is not None else "open"

    @property
    def max_seq(self) -> int:
        """Highest seq seen (the end event's seq once ended); -1 when none."""
        top = max(self.seqs) if self.seqs else -1
        if self.ended is not None:
            top = max(top, self.ended.seq)
        return top

    @property
    def missing_seqs(self) -> list[int]:
        """Seqs below :attr:`max_seq` not seen (capped at 1000 listed)."""
        out = []
        for i in range(self.max_seq + 1):
            if i not in self.seqs:
                out.append(i)
                if len(out) >= 1000:
                    break
        return out


def _add(a: int | None, b: int | None) -> int | None:
    if b is None:
        return a
    return (a or 0) + b


@singledispatch
def project(event: EventBase, state: EpisodeState) -> EpisodeState:
    """Apply one event to the episode's state (the default: just a step)."""
    return state


@project.register
def _(event: EpisodeStarted, state: EpisodeState) -> EpisodeState:
    return dataclasses.replace(state, started=state.started or event)


@project.register
def _(event: ModelCall, state: EpisodeState) -> EpisodeState:
    p = event.payload
    return dataclasses.replace(
        state,
        num_model_calls=state.num_model_calls + 1,
        prompt_tokens=_add(state.prompt_tokens, p.prompt_tokens),
        completion_tokens=_add(state.completion_tokens, p.completion_tokens),
    )


@project.register
def _(event: ToolCall, state: EpisodeState) -> EpisodeState:
    return dataclasses.replace(state, num_tool_calls=state.num_tool_calls + 1)


@project.register
def _(event: EpisodeEnded, state: EpisodeState) -> EpisodeState:
    return dataclasses.replace(state, ended=state.ended or event)


@project.register
def _(event: Reward, state: EpisodeState) -> EpisodeState:
    p = event.payload
    key = (p.judge_name, p.judge_version)
    rec = RewardRecord(
        event_id=event.event_id,
        seq=event.seq,
        ts=event.ts,
        judge_name=p.judge_name,
        judge_version=p.judge_version,
        score=p.score,
        verdict=p.verdict,
        components=dict(p.components),
        flags=tuple(p.flags),
        evidence=p.evidence,
        source=p.source,
        rejudge_run_id=p.rejudge_run_id,
    )
    prev = state.rewards.get(key)
    # The latest judgement of a judge version wins (re-judge runs supersede).
    if prev is not None and (prev.ts, prev.event_id) >= (rec.ts, rec.event_id):
        return state
    return dataclasses.replace(state, rewards={**state.rewards, key: rec})


def is_rejudge(event: EventBase) -> bool:
    """A reward written later by a re-judge job: not one of the episode's own steps."""
    return isinstance(event, Reward) and event.payload.source == "rejudge"


def fold_episode(episode_id: str, events: Iterable[EventBase]) -> EpisodeState:
    """Fold every event of an episode, in ``seq`` order, into its state.

    Duplicates (same ``event_id``) count once; of two events claiming the same
    ``seq`` the one with the smaller ``event_id`` is kept, so the result does
    not depend on arrival order.
    """
    unique: dict[str, EventBase] = {}
    for e in events:
        if e.episode_id == episode_id:
            unique.setdefault(e.event_id, e)
    own: dict[int, EventBase] = {}
    rejudged: list[EventBase] = []
    for e in sorted(unique.values(), key=lambda e: e.event_id):
        if is_rejudge(e):
            rejudged.append(e)
        else:
            own.setdefault(e.seq, e)
    ordered = [own[s] for s in sorted(own)]
    state = EpisodeState(
        episode_id=episode_id,
        seqs=frozenset(own),
        steps=tuple(ordered),
        first_ts=min((e.ts for e in ordered), default=None),
    )
    for e in ordered:
        state = project(e, state)
    for e in sorted(rejudged, key=lambda e: (e.ts, e.event_id)):
        state = project(e, state)
    return state


# ------------------------------------------------------------------ rows


def episode_row(state: EpisodeState) -> dict[str, Any]:
    """The ``episodes`` row of an episode."""
    s, e = state.started, state.ended
    sp = s.payload if s is not None else None
    start_ts = s.ts if s is not None else state.first_ts
    end_ts = e.ts if e is not None else None
    return {
        "episode_id": state.episode_id,
        "task_id": sp.task.id if sp else None,
        "task_version": sp.task.version if sp else None,
        "task_family": sp.task.family if sp else None,
        "policy_id": sp.policy.id if sp else None,
        "policy_version": sp.policy.version if sp else None,
        "group_id": sp.group_id if sp else None,
        "attempt": sp.attempt if sp else None,
        "status": e.payload.status if e is not None else None,
        "completeness": state.completeness,
        "num_events": len(state.seqs),
        "max_seq": state.max_seq,
        "missing_seqs": state.missing_seqs,
        "num_model_calls": state.num_model_calls,
        "num_tool_calls": state.num_tool_calls,
        "started_at": start_ts,
        "ended_at": end_ts,
        "duration_s": (end_ts - start_ts).total_seconds() if end_ts and start_ts else None,
        "prompt_tokens": state.prompt_tokens,
        "completion_tokens": state.completion_tokens,
        "sandbox_image": sp.sandbox_image if sp else None,
        "group_size": _group_size(sp.metadata.get("group_size")) if sp else None,
    }


def _group_size(value: Any) -> int | None:
    """A recorded group size that fits the column (anything else is not one)."""
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 1 << 20:
        return value
    return None


def _step_text(event: EventBase) -> str | None:
    if isinstance(event, ModelCall):
        return event.payload.completion
    if isinstance(event, ToolCall):
        return json.dumps(event.payload.arguments, sort_keys=True)
    if isinstance(event, ToolResult):
        out, err = event.payload.stdout.text, event.payload.stderr.text
        return out + (("\n[stderr]\n" + err) if err else "")
    if isinstance(event, SandboxEvent):
        return event.payload.detail or event.payload.action
    if isinstance(event, Reward):
        return f"{event.payload.verdict} {event.payload.score}"
    if isinstance(event, EpisodeEnded):
        return event.payload.reason or event.payload.status
    if isinstance(event, Annotation):
        return json.dumps(event.payload.value, sort_keys=True)
    if isinstance(event, EpisodeStarted):
        return event.payload.task.id
    return None


def step_rows(state: EpisodeState) -> list[dict[str, Any]]:
    """The ``steps`` rows of an episode: one per own event, flattened."""
    rows = []
    for e in state.steps:
        p: Any = e.payload  # type: ignore[attr-defined]
        rows.append(
            {
                "episode_id": state.episode_id,
                "seq": e.seq,
                "event_id": e.event_id,
                "type": e.type,  # type: ignore[attr-defined]
                "ts": e.ts,
                "call_id": getattr(p, "call_id", None),
                "tool": getattr(p, "tool", None),
                "exit_code": getattr(p, "exit_code", None),
                "timed_out": getattr(p, "timed_out", None),
                "error_kind": getattr(p, "error_kind", None),
                "duration_s": getattr(p, "duration_s", None)
                if isinstance(e, ToolResult)
                else (p.latency_s if isinstance(e, ModelCall) else None),
                "text": _step_text(e),
                "payload": p.model_dump_json(),
            }
        )
    return rows


def reward_rows(state: EpisodeState) -> list[dict[str, Any]]:
    """The ``rewards`` rows: the latest reward per judge name and version."""
    return [
        {
            "episode_id": state.episode_id,
            "judge_name": r.judge_name,
            "judge_version": r.judge_version,
            "event_id": r.event_id,
            "ts": r.ts,
            "score": r.score,
            "verdict": r.verdict,
            "components": json.dumps(r.components, sort_keys=True),
            "flags": list(r.flags),
            "evidence": json.dumps(r.evidence, sort_keys=True),
            "source": r.source,
            "rejudge_run_id": r.rejudge_run_id,
        }
        for _, r in sorted(state.rewards.items())
    ]
