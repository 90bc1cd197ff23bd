"""The training sequences of an episode (the gold ``samples`` table), a pure function of its events.

One row per training sequence. The model calls of an episode form one sequence while their
token histories continue exactly: call ``k + 1``'s prompt ids begin with call ``k``'s prompt
ids followed by its completion ids, id for id. The sequence is then the first prompt, and
after it every completion (in the loss, with the behaviour log-probabilities the sampler
recorded) and every token the environment added between two calls (tool output, the chat
template's turn markers: masked out of the loss, log-probability 0). That is the
"trajectory" layout verl's agent loop trains on (``response_mask`` 1 on model tokens, 0 on
tool tokens).

Where a history does not continue (a chat template that re-tokenises the previous turn
differently, an agent that rewrote or truncated its history: the failures Agent Lightning
describes for its trajectory aggregation), no tokens are guessed: a new sequence starts at
that call and its row says why (``start = history_mismatch``), so the learner trains on
both parts and counts the break. Nothing is ever re-tokenised from text.

A row the learner must not train on says why in ``problem``: the call carries no token ids
or log-probabilities (``no_token_data``), its log-probabilities are not log-probabilities
(``invalid_logprobs``: above 0 or absurdly low), or the episode was decoded greedily
(``greedy_decoding``, a temperature under 0.01 included: a deterministic choice has no
behaviour probability) or with a distribution the learner does not re-score
(``unsupported_sampling``: top-p, top-k, min-p, typical-p, penalties, a logit bias, a
temperature over 1000).

Log-probabilities are only as good as what they are of (``served_by.logprob_semantics``).
Where the transform is the identity (temperature 1, nothing truncated or penalised), the
model's distribution is the one sampled and every kind agrees. Otherwise only ``processed``
log-probabilities are of the distribution the token was drawn from (and ``scaled`` ones when
the temperature is the whole transform): ``raw`` ones at another temperature are
``raw_logprobs``, and ones whose meaning was never established (a server that did not say,
a log written before v3 of ``model_call``) are ``unknown_logprob_semantics``. Both stay in
the log and in this table, excluded from training and counted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fold.projection import EpisodeState
from fold.views import EventView
from schemas.events import SamplingParams

LOGPROB_TOLERANCE = 1e-4
"""A recorded log-probability above this is not one (a rounding of 0 is allowed)."""
LOGPROB_FLOOR = -1e4
"""Nor is one below this: no sampler draws a token that unlikely, and it would overflow float32."""
MIN_TEMPERATURE = 1e-2
"""Below this temperature sampling is greedy decoding in all but name (and ``logits / T`` overflows)."""
MAX_TEMPERATURE = 1e3
"""Above this the distribution is uniform in all but name: not a policy worth re-scoring."""
DISTORTING = {"min_p": 0.0, "typical_p": 1.0, "repetition_penalty": 1.0, "presence_penalty": 0.0,
              "frequency_penalty": 0.0}  # fmt: skip
"""Sampler settings (``extra``) that change the distribution unless at these neutral values."""


def _number(value: Any) -> float | None:
    """A setting as a number (ints, floats and numeric strings: servers take all three), else ``None``."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class SamplingTransform:
    """How an episode's completions were drawn, as far as a learner re-scores them."""

    temperature: float
    """The softmax temperature (1 when none was recorded)."""
    top_p: float | None
    top_k: int | None
    problem: str | None
    """Why the completions cannot be re-scored under the distribution they were drawn from."""


def sampling_transform(sp: SamplingParams | Mapping[str, Any]) -> SamplingTransform:
    """The transform recorded in ``episode_started``'s sampling parameters (the model or its JSON)."""
    if isinstance(sp, SamplingParams):
        sp = sp.model_dump(mode="json")
    extra = sp.get("extra") or {}
    k = _number(extra.get("top_k"))
    top_k = int(k) if k is not None and 0 < k < 2**31 else None  # 0 and -1 switch top-k off
    t = sp.get("temperature")
    top_p = sp.get("top_p")
    distorted = extra.get("logit_bias") or any(
        (v := _number(extra.get(name))) is not None and v != neutral for name, neutral in DISTORTING.items()
    )
    problem: str | None = None
    if extra.get("greedy") or (t is not None and t < MIN_TEMPERATURE):
        problem = "greedy_decoding"  # temperature 0 is greedy decoding too
    elif (t is not None and t > MAX_TEMPERATURE) or (top_p is not None and top_p < 1.0) or top_k or distorted:
        problem = "unsupported_sampling"
    temperature = float(t) if t is not None and MIN_TEMPERATURE <= t <= MAX_TEMPERATURE else 1.0
    return SamplingTransform(temperature, top_p, top_k, problem)


@dataclass
class _Sequence:
    start: str
    first_seq: int
    last_seq: int
    prompt: list[int]
    response: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    calls: list[EventView] = field(default_factory=list)
    problem: str | None = None

    @property
    def history(self) -> list[int]:
        return self.prompt + self.response


def _call_problem(call: EventView) -> str | None:
    p = call.p
    ids, logprobs = p["completion_token_ids"], p["completion_logprobs"]
    if not p["prompt_token_ids"] or not ids or not logprobs or len(ids) != len(logprobs):
        return "no_token_data"
    if any(not LOGPROB_FLOOR <= lp <= LOGPROB_TOLERANCE for lp in logprobs):
        return "invalid_logprobs"
    return None


def semantics_problem(how: SamplingTransform, call: EventView) -> str | None:
    """Why ``call``'s log-probabilities are not of the distribution its tokens were drawn from."""
    if how.problem is not None or how.temperature == 1.0:
        return None  # excluded already, or the identity transform: every kind of log-prob agrees
    served = call.p["served_by"]
    semantics = served.get("logprob_semantics") if served is not None else None
    if semantics in ("processed", "scaled"):
        return None  # the temperature is the whole transform here (anything more is unsupported)
    return "raw_logprobs" if semantics == "raw" else "unknown_logprob_semantics"


def split_sequences(calls: list[EventView]) -> list[_Sequence]:
    """The model calls of one episode (in ``seq`` order) as training sequences."""
    out: list[_Sequence] = []
    current: _Sequence | None = None
    for call in calls:
        p = call.p
        problem = _call_problem(call)
        if problem is not None:
            # kept as its own row so that the exclusion is counted; the next call starts afresh
            out.append(_Sequence("after_untrainable" if out else "episode", call.seq, call.seq, [],
                                 calls=[call], problem=problem))  # fmt: skip
            current = None
            continue
        prompt = list(p["prompt_token_ids"] or [])
        completion = list(p["completion_token_ids"] or [])
        logprobs = [float(x) for x in p["completion_logprobs"] or []]
        if current is not None:
            history = current.history
            if prompt[: len(history)] == history:
                added = prompt[len(history) :]  # what the environment and the template added
                current.response += added + completion
                current.mask += [0] * len(added) + [1] * len(completion)
                current.logprobs += [0.0] * len(added) + logprobs
                current.calls.append(call)
                current.last_seq = call.seq
                continue
        start = "episode" if not out else ("history_mismatch" if current is not None else "after_untrainable")
        current = _Sequence(start, call.seq, call.seq, prompt, completion, [1] * len(completion), logprobs,
                            [call])  # fmt: skip
        out.append(current)
    return out


def _message(m: Mapping[str, Any]) -> dict[str, Any]:
    """A chat message as its model dumps it without its unset (``None``) fields."""
    return {k: v for k, v in m.items() if v is not None}


def _assistant(call: EventView) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": call.p["completion"]}
    if call.p["tool_calls"]:
        msg["tool_calls"] = call.p["tool_calls"]
    if call.p["reasoning"]:
        msg["reasoning_content"] = call.p["reasoning"]
    return msg


def _response_messages(calls: list[EventView]) -> list[dict[str, Any]]:
    """The conversation after the first call's prompt: the later calls' new messages and the replies."""
    first, last = calls[0].p["messages"], calls[-1].p["messages"]
    if len(calls) > 1 and first is not None and last is not None and list(last[: len(first)]) == list(first):
        return [_message(m) for m in last[len(first) :]] + [_assistant(calls[-1])]
    return [_assistant(c) for c in calls]


def sample_rows(state: EpisodeState) -> list[dict[str, Any]]:
    """The ``samples`` rows of an episode (none when it made no model call)."""
    calls = [e for e in state.steps if e.type == "model_call"]
    if not calls:
        return []
    sp = state.started.p if state.started is not None else None
    how = sampling_transform(sp["sampling"] if sp is not None else {})
    rows = []
    for i, s in enumerate(split_sequences(calls)):
        first = s.calls[0].p["messages"]
        rows.append(
            {
                "episode_id": state.episode_id,
                "sequence": i,
                "start": s.start,
                "first_seq": s.first_seq,
                "last_seq": s.last_seq,
                "num_calls": len(s.calls),
                "problem": s.problem
                or how.problem
                or next((p for c in s.calls if (p := semantics_problem(how, c)) is not None), None),
                "task_id": sp["task"]["id"] if sp else None,
                "task_family": sp["task"]["family"] if sp else None,
                "group_id": sp["group_id"] if sp else None,
                "policy_version": sp["policy"]["version"] if sp else None,
                "temperature": how.temperature,
                "top_p": how.top_p,
                "top_k": how.top_k,
                "prompt_ids": s.prompt,
                "response_ids": s.response,
                "response_mask": s.mask,
                "response_logprobs": s.logprobs,
                "num_loss_tokens": sum(s.mask),
                "prompt_messages": None if first is None else json.dumps([_message(m) for m in first]),
                "response_messages": json.dumps(_response_messages(s.calls)),
            }
        )
    return rows
