"""The ``samples`` projection: one training sequence per continuous token history, every break counted."""

from __future__ import annotations

import json
import random
from typing import Any

import pyarrow as pa

from fold.samples import sample_rows
from pipelines import fold_episode
from schemas.tables import SAMPLES
from tests.pipelines.factories import call, ended, model, result, reward, started, typed

E = "ep-s"


def _call(seq: int, prompt: list[int], completion: list[int], logprobs: list[float] | None = None,
          **kw: Any) -> dict[str, Any]:  # fmt: skip
    return model(
        E, seq, completion="c%d" % seq, prompt_token_ids=prompt, completion_token_ids=completion,
        completion_logprobs=logprobs if logprobs is not None else [-0.5] * len(completion), **kw,
    )  # fmt: skip


def _rows(*docs: dict[str, Any], sampling: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    extra = {"sampling": sampling} if sampling else {}
    rows = sample_rows(fold_episode(E, typed(started(E, **extra), *docs)))
    pa.Table.from_pylist(rows, schema=SAMPLES)  # every row fits the table's types
    return rows


def test_a_continuous_multi_turn_history_is_one_sequence_with_tool_tokens_masked() -> None:
    rows = _rows(
        _call(1, [1, 10, 11], [20, 21, 2], [-0.1, -0.2, -0.3]),
        call(E, 2), result(E, 3, stdout="ok"),
        # the second prompt is the first prompt, the first completion, then the tool's output tokens
        _call(4, [1, 10, 11, 20, 21, 2, 30, 31], [22, 2], [-0.4, -0.5]),
        call(E, 5, call_id="c2"), result(E, 6, call_id="c2"),
        _call(7, [1, 10, 11, 20, 21, 2, 30, 31, 22, 2, 32], [23, 2], [-0.6, -0.7]),
        reward(E, 8), ended(E, 9),
    )  # fmt: skip
    assert len(rows) == 1
    r = rows[0]
    assert (r["start"], r["num_calls"], r["first_seq"], r["last_seq"], r["problem"]) == (
        "episode",
        3,
        1,
        7,
        None,
    )
    assert r["prompt_ids"] == [1, 10, 11]
    assert r["response_ids"] == [20, 21, 2, 30, 31, 22, 2, 32, 23, 2]
    assert r["response_mask"] == [1, 1, 1, 0, 0, 1, 1, 0, 1, 1]
    assert r["response_logprobs"] == [-0.1, -0.2, -0.3, 0.0, 0.0, -0.4, -0.5, 0.0, -0.6, -0.7]
    assert r["num_loss_tokens"] == 7


def test_a_history_that_does_not_continue_starts_a_new_sequence_and_says_why() -> None:
    rows = _rows(
        _call(1, [1, 10], [20, 2]),
        # the template re-tokenised the first reply (21 instead of 20): no prefix match, no guessing
        _call(2, [1, 10, 21, 2, 30], [22, 2]),
        _call(3, [1, 10, 21, 2, 30, 22, 2, 31], [23, 2]),
    )
    assert [(r["sequence"], r["start"], r["num_calls"]) for r in rows] == [
        (0, "episode", 1), (1, "history_mismatch", 2),
    ]  # fmt: skip
    assert rows[1]["prompt_ids"] == [1, 10, 21, 2, 30]
    assert rows[1]["response_mask"] == [1, 1, 0, 1, 1]


def test_calls_without_token_data_are_rows_of_their_own_with_the_problem() -> None:
    rows = _rows(
        _call(1, [1, 10], [20, 2]),
        model(E, 2, completion="no ids"),  # an imported or text-only call
        _call(3, [1, 10, 20, 2, 30], [22, 2]),
        _call(4, [1, 10, 20, 2, 30, 22, 2], [23], [0.5]),  # a "log-probability" above 0
    )
    assert [(r["start"], r["problem"]) for r in rows] == [
        ("episode", None), ("after_untrainable", "no_token_data"), ("after_untrainable", None),
        ("after_untrainable", "invalid_logprobs"),
    ]  # fmt: skip


def test_the_sampling_transform_is_recorded_and_greedy_or_truncated_sampling_is_a_problem() -> None:
    processed = {"kind": "vllm", "logprob_semantics": "processed"}
    docs = (_call(1, [1], [2], served_by=processed),)
    assert [_rows(*docs)[0][k] for k in ("temperature", "problem")] == [1.0, None]
    assert [_rows(*docs, sampling={"temperature": 0.7})[0][k] for k in ("temperature", "problem")] == [
        0.7,
        None,
    ]
    assert _rows(*docs, sampling={"temperature": 0.0})[0]["problem"] == "greedy_decoding"
    assert (
        _rows(*docs, sampling={"temperature": 1.0, "extra": {"greedy": True}})[0]["problem"]
        == "greedy_decoding"
    )
    assert _rows(*docs, sampling={"top_p": 0.9})[0]["problem"] == "unsupported_sampling"
    top_k = _rows(*docs, sampling={"extra": {"top_k": 40}})[0]
    assert (top_k["problem"], top_k["top_k"]) == ("unsupported_sampling", 40)


def test_messages_of_a_merged_sequence_are_the_prompt_and_what_followed_it() -> None:
    user = {"role": "user", "content": "fix it"}
    rows = _rows(
        _call(1, [1, 10], [20, 2], messages=[user]),
        _call(
            2,
            [1, 10, 20, 2, 30],
            [22, 2],
            messages=[
                user,
                {"role": "assistant", "content": "c1"},
                {"role": "tool", "content": "out", "tool_call_id": "x"},
            ],
        ),  # fmt: skip
    )
    assert json.loads(rows[0]["prompt_messages"]) == [user]
    assert json.loads(rows[0]["response_messages"]) == [
        {"role": "assistant", "content": "c1"}, {"role": "tool", "content": "out", "tool_call_id": "x"},
        {"role": "assistant", "content": "c2"},
    ]  # fmt: skip


def test_rows_do_not_depend_on_the_order_events_arrive_in() -> None:
    docs = [started(E), _call(1, [1, 10], [20, 2]), _call(2, [1, 10, 20, 2, 5], [22, 2]), ended(E, 3)]
    events = typed(*docs)
    expected = sample_rows(fold_episode(E, events))
    for seed in range(5):
        shuffled = list(events) + list(events[:2])  # duplicates too
        random.Random(seed).shuffle(shuffled)
        assert sample_rows(fold_episode(E, shuffled)) == expected
    assert sample_rows(fold_episode(E, typed(started(E), ended(E, 1)))) == []  # no model call, no row


def test_samplers_that_are_greedy_or_reshape_the_distribution_in_any_spelling_are_problems() -> None:
    docs = (_call(1, [1], [2]),)
    for sampling, problem in (
        ({"temperature": 1e-50}, "greedy_decoding"),  # float32 would make it 0: logits / 0
        ({"temperature": 5e3}, "unsupported_sampling"),
        ({"extra": {"top_k": 40.0}}, "unsupported_sampling"),
        ({"extra": {"top_k": "40"}}, "unsupported_sampling"),
        ({"extra": {"top_k": -1}}, None),  # vLLM's "off"
        ({"extra": {"min_p": 0.05}}, "unsupported_sampling"),
        ({"extra": {"repetition_penalty": 1.1}}, "unsupported_sampling"),
        ({"extra": {"repetition_penalty": 1.0, "presence_penalty": 0}}, None),
        ({"extra": {"logit_bias": {"50256": -100}}}, "unsupported_sampling"),
    ):
        assert _rows(*docs, sampling=sampling)[0]["problem"] == problem, sampling


def test_log_probabilities_out_of_any_sane_range_are_a_problem() -> None:
    rows = _rows(_call(1, [1], [2, 3], [-0.5, -1e300]))
    assert rows[0]["problem"] == "invalid_logprobs"


def test_log_probs_are_trained_on_only_where_they_are_of_the_distribution_sampled() -> None:
    """At temperature 1 with nothing truncated every kind of log-prob agrees; at another temperature
    only processed ones (and scaled ones: the temperature is the whole transform) are of the
    distribution the tokens were drawn from. Raw ones and ones of unknown meaning stay in the
    table, each with its reason."""

    def problem(temperature: float, semantics: str | None) -> str | None:
        served = {"kind": "vllm", "logprob_semantics": semantics} if semantics else None
        doc = _call(1, [1], [2], **({"served_by": served} if served else {}))
        return _rows(doc, sampling={"temperature": temperature})[0]["problem"]

    assert [problem(1.0, s) for s in ("processed", "scaled", "raw", None)] == [None] * 4
    assert [problem(0.7, s) for s in ("processed", "scaled", "raw", None)] == [
        None, None, "raw_logprobs", "unknown_logprob_semantics",
    ]  # fmt: skip
    # one raw call spoils the sequence it belongs to
    mixed = _rows(
        _call(1, [1], [2], served_by={"kind": "vllm", "logprob_semantics": "processed"}),
        _call(2, [1, 2, 3], [4], served_by={"kind": "vllm", "logprob_semantics": "raw"}),
        sampling={"temperature": 0.5},
    )
    assert [(r["num_calls"], r["problem"]) for r in mixed] == [(2, "raw_logprobs")]
