"""Hand-made events for pipeline tests (valid envelopes, as any producer would write)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from schemas import current_version, new_id, parse_event
from schemas.events import EventBase

T0 = dt.datetime(2026, 11, 1, 12, 0, 0, tzinfo=dt.UTC)
PRODUCER = {"worker_id": "w", "host": "h", "sdk_version": "test"}


def ev(
    episode_id: str,
    seq: int,
    type_: str,
    payload: dict[str, Any],
    *,
    ts: dt.datetime | None = None,
    event_id: str | None = None,
) -> dict[str, Any]:
    return {
        "event_id": event_id or new_id(),
        "episode_id": episode_id,
        "seq": seq,
        "type": type_,
        "ts": (ts or T0 + dt.timedelta(seconds=seq)).isoformat(),
        "schema_version": current_version(type_),
        "producer": PRODUCER,
        "payload": payload,
    }


def started(eid: str, task: str = "t1", seq: int = 0, **kw: Any) -> dict[str, Any]:
    return ev(
        eid,
        seq,
        "episode_started",
        {
            "task": {"id": task, "family": "pyfix"},
            "policy": {"id": "p", "version": "3"},
            "group_id": "g",
            **kw,
        },
    )


def model(eid: str, seq: int, completion: str = "ls", **kw: Any) -> dict[str, Any]:
    return ev(
        eid, seq, "model_call", {"completion": completion, "prompt_tokens": 10, "completion_tokens": 2, **kw}
    )


def tokenized_call(eid: str, seq: int) -> dict[str, Any]:
    """A model call with the token ids and log-probs a learner trains on (three of each)."""
    return model(
        eid,
        seq,
        prompt_token_ids=[1, 5, 6],
        completion_token_ids=[7, 8, 2],
        completion_logprobs=[-0.5, -0.2, -0.1],
        served_by={"kind": "in_process", "logprob_semantics": "processed"},
    )


def call(eid: str, seq: int, tool: str = "bash", call_id: str = "c1", **args: Any) -> dict[str, Any]:
    return ev(
        eid, seq, "tool_call", {"call_id": call_id, "tool": tool, "arguments": args or {"command": "pytest"}}
    )


def result(
    eid: str,
    seq: int,
    exit_code: int | None = 0,
    stdout: str = "",
    stderr: str = "",
    call_id: str = "c1",
    **kw: Any,
) -> dict[str, Any]:
    return ev(
        eid,
        seq,
        "tool_result",
        {
            "call_id": call_id,
            "exit_code": exit_code,
            "stdout": {"text": stdout, "size": len(stdout)},
            "stderr": {"text": stderr, "size": len(stderr)},
            **kw,
        },
    )


def reward(
    eid: str,
    seq: int,
    verdict: str = "pass",
    score: float | None = None,
    version: str = "v1",
    source: str = "online",
    ts: dt.datetime | None = None,
    **kw: Any,
) -> dict[str, Any]:
    p: dict[str, Any] = {
        "judge_name": "tests",
        "judge_version": version,
        "score": score if score is not None else float(verdict == "pass"),
        "verdict": verdict,
        "source": source,
        **kw,
    }
    if source == "rejudge":
        p.setdefault("rejudge_run_id", "rj-1")
    return ev(eid, seq, "reward", p, ts=ts)


def ended(eid: str, seq: int, status: str = "success", **kw: Any) -> dict[str, Any]:
    return ev(eid, seq, "episode_ended", {"status": status, "num_events": seq, **kw})


def sandbox(eid: str, seq: int, action: str, detail: str | None = None) -> dict[str, Any]:
    return ev(
        eid, seq, "sandbox", {"action": action, "backend": "local", "sandbox_id": "sb", "detail": detail}
    )


def typed(*docs: dict[str, Any]) -> list[EventBase]:
    return [parse_event(d) for d in docs]


def wire(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc).encode()
