"""Failure attribution (first version): category, failing step and clustering signature.

Why an episode failed, at which step, and a signature under which identical
failures cluster.

Pure functions of an :class:`~fold.projection.EpisodeState`. Categories,
checked in this order (the first that applies wins):

``infra_error``
    the episode ended ``infra_error`` or the judge itself errored: never the
    policy's fault.
``reward_hack_suspected``
    the judge flagged the trajectory.
``max_steps`` / ``timeout``
    the episode was truncated (by its step or its time limit), or a tool call
    timed out.
``format_error``
    the policy's output could not be acted on (a tool call with invalid
    arguments or an unknown tool, a completion cut at the length limit, a
    ``format_error`` annotation).
``test_failure``
    the judge ran tests and some failed (or the verdict is ``fail`` with no
    better explanation).
``tool_error``
    the episode failed without a judge verdict and its last tool call failed.

The signature normalises the decisive error text: paths, numbers, hex
addresses, uuids and quoted values are replaced by placeholders, so
``AssertionError: assert 6 == 5 (/tmp/x/calc.py:12)`` and the same assertion on
other values, files and lines cluster together.
"""

from __future__ import annotations

import re
from typing import Any

from fold.projection import EpisodeState, RewardRecord
from fold.views import EventView

CATEGORIES = (
    "test_failure",
    "timeout",
    "tool_error",
    "format_error",
    "max_steps",
    "reward_hack_suspected",
    "infra_error",
)

_NORMALISERS = [
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I), "<uuid>"),
    (re.compile(r"0x[0-9a-f]+", re.I), "<addr>"),
    (re.compile(r"(?:[A-Za-z]:)?(?:[\w.\-~]*/)+[\w.\-]+"), "<path>"),
    (re.compile(r"'[^'\n]{0,200}'|\"[^\"\n]{0,200}\""), "<str>"),
    (re.compile(r"\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b", re.I), "<n>"),
    (re.compile(r"[ \t]+"), " "),
]
_ERROR_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Failure|Exit|Interrupt)\b.*)$", re.M)


LINE_CHARS = 1000
"""The head of the decisive line that is normalised into a signature."""


def normalise_error(text: str, *, limit: int = 160) -> str:
    """The clustering key of an error text: its decisive line, normalised."""
    text = text or ""
    lines = _ERROR_LINE.findall(text)
    if lines:
        decisive = lines[-1]
    else:
        failed = [ln for ln in text.splitlines() if "FAILED" in ln or "failed" in ln or "error" in ln.lower()]
        decisive = (
            failed[-1] if failed else next((ln for ln in reversed(text.splitlines()) if ln.strip()), "")
        )
    # (the path pattern backtracks quadratically on a long run of slashes, and the line is the
    # agent's: 8k of them took 1.6 s an episode. The key keeps 160 characters; its head decides.)
    out = decisive.strip()[:LINE_CHARS]
    for pattern, repl in _NORMALISERS:
        out = pattern.sub(repl, out)
    return out.strip()[:limit] or "<empty>"


NAME_CHARS = 200
"""A failed test's name as the signature takes it (its head): names are the judge's evidence, any length."""


def _failed_tests(evidence: Any) -> list[str]:
    """Names of the failed tests in a judge's evidence, sorted, each once.

    A tests judge's evidence is ``{"tests": [{"name", "status"}]}`` (``outcome`` in older
    events); a composite judge's nests each component's evidence under its name
    (``{"correctness": {"tests": [...]}}``): every component's failures count, once.
    """
    out: set[str] = set()

    def walk(node: Any, depth: int) -> None:
        if not isinstance(node, dict):
            return
        tests = node.get("tests")
        if isinstance(tests, list):
            for t in tests:
                if not isinstance(t, dict):
                    continue
                outcome = t.get("status") if t.get("status") is not None else t.get("outcome")
                if str(outcome).lower() in ("failed", "error", "fail"):
                    out.add(str(t.get("name", "?"))[:NAME_CHARS])
            return
        if depth < 2:
            for value in node.values():
                walk(value, depth + 1)

    walk(evidence, 0)
    return sorted(out)


def _last(state: EpisodeState, event_type: str, pred: Any = None) -> EventView | None:
    for e in reversed(state.steps):
        if e.type == event_type and (pred is None or pred(e.p)):
            return e
    return None


def _tool_text(e: EventView) -> str:
    return (e.p["stderr"]["text"] + "\n" + e.p["stdout"]["text"]).strip()  # type: ignore[no-any-return]


def attribute(state: EpisodeState, reward: RewardRecord | None) -> tuple[str, int | None, str]:
    """``(category, failing seq, message)`` of a failed episode under one judgement."""
    ended = state.ended
    status = ended.p["status"] if ended is not None else None
    reason = ended.p["reason"] if ended is not None else None
    if status == "infra_error" or (reward is not None and reward.verdict == "error"):
        crash = _last(state, "sandbox", lambda p: p["action"] == "crashed")
        if crash is not None:
            return "infra_error", crash.seq, crash.p["detail"] or "sandbox crashed"
        if reward is not None and reward.verdict == "error":
            return "infra_error", reward.seq, f"judge {reward.judge_name} could not run"
        return "infra_error", ended.seq if ended is not None else None, reason or "infrastructure error"
    if reward is not None and "reward_hack_suspected" in reward.flags:
        return "reward_hack_suspected", reward.seq, "flags: " + ",".join(reward.flags)
    timed_out = _last(state, "tool_result", lambda p: p["timed_out"])
    if status == "truncated":
        why = reason or ""
        if "time" in why.lower():
            return "timeout", ended.seq if ended is not None else None, why or "time limit"
        return "max_steps", ended.seq if ended is not None else None, why or "step limit"
    if timed_out is not None:
        return "timeout", timed_out.seq, _tool_text(timed_out) or "tool call timed out"
    bad_call = _last(state, "tool_result", lambda p: p["error_kind"] in ("invalid_arguments", "unknown_tool"))
    fmt_note = _last(state, "annotation", lambda p: p["key"] in ("format_error", "import.format_error"))
    cut = _last(state, "model_call", lambda p: p["finish_reason"] == "length")
    for cand in (bad_call, fmt_note, cut):
        if cand is not None:
            if cand.type == "tool_result":
                text = _tool_text(cand)
            elif cand.type == "annotation":
                text = str(cand.p["value"])
            else:
                text = "completion cut at the length limit"
            return "format_error", cand.seq, text
    failing_tool = _last(
        state, "tool_result", lambda p: p["exit_code"] not in (None, 0) or p["error_kind"] is not None
    )
    if reward is not None:
        failed = _failed_tests(reward.evidence)
        if failed:
            more = f" and {len(failed) - 5} more" if len(failed) > 5 else ""
            return "test_failure", reward.seq, "failed: " + ", ".join(failed[:5]) + more
        if failing_tool is not None:
            return "test_failure", failing_tool.seq, _tool_text(failing_tool)
        return "test_failure", reward.seq, f"verdict {reward.verdict}, score {reward.score}"
    if failing_tool is not None:
        return "tool_error", failing_tool.seq, _tool_text(failing_tool)
    return "test_failure", ended.seq if ended is not None else None, reason or f"status {status}"


NO_JUDGE = "-"
"""``judge_name``/``judge_version`` of a failure row of an episode no judge scored."""


def failure_rows(state: EpisodeState) -> list[dict[str, Any]]:
    """The ``failures`` rows of an episode: one per failing judgement.

    An episode no judge scored but that ended ``failure``, ``truncated`` or
    ``infra_error`` gets one row under the judge ``-``.
    """
    started = state.started
    task_id = started.p["task"]["id"] if started is not None else None
    policy_version = started.p["policy"]["version"] if started is not None else None
    rows = []
    judged: list[tuple[str, str, RewardRecord | None]] = [
        (name, version, r) for (name, version), r in sorted(state.rewards.items()) if r.verdict != "pass"
    ]
    status = state.ended.p["status"] if state.ended is not None else None
    if not state.rewards and status in ("failure", "truncated", "infra_error"):
        judged.append((NO_JUDGE, NO_JUDGE, None))
    for name, version, reward in judged:
        category, seq, message = attribute(state, reward)
        rows.append(
            {
                "episode_id": state.episode_id,
                "judge_name": name,
                "judge_version": version,
                "category": category,
                "failing_seq": seq,
                "signature": f"{category}: {normalise_error(message)}",
                "message": message[:2000],
                "task_id": task_id,
                "policy_version": policy_version,
            }
        )
    return rows
