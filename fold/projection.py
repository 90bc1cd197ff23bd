"""Episodes as a pure fold over their events.

No I/O. The pipelines call :func:`fold_episode` with every event of an episode (from both
topics; parsed events, ``events`` rows or their :class:`~fold.views.EventView`) and turn the
resulting :class:`EpisodeState` into rows of the ``episodes``, ``steps``, ``rewards``,
``failures`` and ``samples`` tables. Because the rows are a function of the episode's whole
event set, re-running a batch, replaying the log, or receiving events late and out of order
all converge to the same rows.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fold.views import EventView, as_view
from schemas.events import EventBase


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
    steps: tuple[EventView, ...] = ()
    """The episode's own events, in ``seq`` order."""
    started: EventView | None = None
    ended: EventView | None = None
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


def _reward(e: EventView) -> RewardRecord:
    p = e.p
    return RewardRecord(
        event_id=e.event_id,
        seq=e.seq,
        ts=e.ts,
        judge_name=p["judge_name"],
        judge_version=p["judge_version"],
        score=p["score"],
        verdict=p["verdict"],
        components=dict(p["components"]),
        flags=tuple(p["flags"]),
        evidence=p["evidence"],
        source=p["source"],
        rejudge_run_id=p["rejudge_run_id"],
    )


def _judged(rewards: dict[tuple[str, str], RewardRecord], e: EventView) -> None:
    """The latest judgement of a judge version wins (re-judge runs supersede)."""
    rec = _reward(e)
    key = (rec.judge_name, rec.judge_version)
    prev = rewards.get(key)
    if prev is None or (prev.ts, prev.event_id) < (rec.ts, rec.event_id):
        rewards[key] = rec


def is_rejudge(event: EventBase | EventView) -> bool:
    """A reward written later by a re-judge job: not one of the episode's own steps."""
    if isinstance(event, EventView):
        return event.type == "reward" and event.p.get("source") == "rejudge"
    return bool(event.type == "reward" and event.payload.source == "rejudge")  # type: ignore[attr-defined]


def fold_episode(
    episode_id: str, events: Iterable[EventBase | EventView | Mapping[str, Any]]
) -> EpisodeState:
    """Fold every event of an episode, in ``seq`` order, into its state.

    Duplicates (same ``event_id``) count once; of two events claiming the same
    ``seq`` the one with the smaller ``event_id`` is kept, so the result does
    not depend on arrival order.
    """
    unique: dict[str, EventView] = {}
    for raw in events:
        e = as_view(raw)
        if e.episode_id == episode_id:
            unique.setdefault(e.event_id, e)
    own: dict[int, EventView] = {}
    rejudged: list[EventView] = []
    for eid in sorted(unique):
        e = unique[eid]
        if e.type == "reward" and e.p.get("source") == "rejudge":
            rejudged.append(e)
        else:
            own.setdefault(e.seq, e)
    ordered = tuple(own[s] for s in sorted(own))
    started = ended = None
    model_calls = tool_calls = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    rewards: dict[tuple[str, str], RewardRecord] = {}
    for e in ordered:
        t = e.type
        if t == "model_call":
            model_calls += 1
            prompt_tokens = _add(prompt_tokens, e.p.get("prompt_tokens"))
            completion_tokens = _add(completion_tokens, e.p.get("completion_tokens"))
        elif t == "tool_call":
            tool_calls += 1
        elif t == "episode_started":
            started = started or e
        elif t == "episode_ended":
            ended = ended or e
        elif t == "reward":
            _judged(rewards, e)
    for e in sorted(rejudged, key=lambda e: (e.ts, e.event_id)):
        _judged(rewards, e)
    return EpisodeState(
        episode_id=episode_id,
        seqs=frozenset(own),
        steps=ordered,
        started=started,
        ended=ended,
        num_model_calls=model_calls,
        num_tool_calls=tool_calls,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        first_ts=min((e.ts for e in ordered), default=None),
        rewards=rewards,
    )


# ------------------------------------------------------------------ rows


def episode_row(state: EpisodeState) -> dict[str, Any]:
    """The ``episodes`` row of an episode."""
    s, e = state.started, state.ended
    sp = s.p if s is not None else None
    start_ts = s.ts if s is not None else state.first_ts
    end_ts = e.ts if e is not None else None
    task = sp["task"] if sp else None
    policy = sp["policy"] if sp else None
    return {
        "episode_id": state.episode_id,
        "task_id": task["id"] if task else None,
        "task_version": task["version"] if task else None,
        "task_family": task["family"] if task else None,
        "policy_id": policy["id"] if policy else None,
        "policy_version": policy["version"] if policy else None,
        "group_id": sp["group_id"] if sp else None,
        "attempt": sp["attempt"] if sp else None,
        "status": e.p["status"] if e is not None else None,
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
        "sandbox_image": sp["sandbox_image"] if sp else None,
        "group_size": _group_size(sp["metadata"].get("group_size")) if sp else None,
        "source": _source(sp["metadata"]) if sp else None,
    }


EPISODE_SOURCES = ("rollout", "eval", "import")
"""``episodes.source``: a training rollout, an evaluation run (never trained on), an imported episode."""


def _source(metadata: dict[str, Any]) -> str:
    """What recorded the episode: its ``source`` metadata when it names one, else import or rollout."""
    source = metadata.get("source")
    if source in EPISODE_SOURCES:
        return str(source)
    return "import" if "source_format" in metadata else "rollout"


def _group_size(value: Any) -> int | None:
    """A recorded group size that fits the column (anything else is not one)."""
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 1 << 20:
        return value
    return None


def _step_text(e: EventView) -> str | None:
    t, p = e.type, e.p
    if t == "model_call":
        return p["completion"]  # type: ignore[no-any-return]
    if t == "tool_call":
        return json.dumps(p["arguments"], sort_keys=True)
    if t == "tool_result":
        out, err = p["stdout"]["text"], p["stderr"]["text"]
        return out + (("\n[stderr]\n" + err) if err else "")  # type: ignore[no-any-return]
    if t == "sandbox":
        return p["detail"] or p["action"]  # type: ignore[no-any-return]
    if t == "reward":
        return f"{p['verdict']} {p['score']}"
    if t == "episode_ended":
        return p["reason"] or p["status"]  # type: ignore[no-any-return]
    if t == "annotation":
        return json.dumps(p["value"], sort_keys=True)
    if t == "episode_started":
        return p["task"]["id"]  # type: ignore[no-any-return]
    return None


def step_rows(state: EpisodeState) -> list[dict[str, Any]]:
    """The ``steps`` rows of an episode: one per own event, flattened."""
    rows = []
    for e in state.steps:
        p, t = e.p, e.type
        rows.append(
            {
                "episode_id": state.episode_id,
                "seq": e.seq,
                "event_id": e.event_id,
                "type": t,
                "ts": e.ts,
                "call_id": p.get("call_id"),
                "tool": p.get("tool"),
                "exit_code": p.get("exit_code"),
                "timed_out": p.get("timed_out"),
                "error_kind": p.get("error_kind"),
                "duration_s": p["duration_s"]
                if t == "tool_result"
                else (p["latency_s"] if t == "model_call" else None),
                "text": _step_text(e),
                "payload": e.payload,
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
