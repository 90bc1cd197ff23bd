"""The chat policy against a real OpenAI-compatible server: ``transformers serve`` on a model built here.

No weights are downloaded: a one-layer GPT-2 and a byte-level BPE tokenizer with a chat template
are built in the test and served by Hugging Face's own server (``transformers serve``, the
``transformers[serving]`` extra). That server sends text only (it ignores ``logprobs`` and
refuses vLLM's extension fields), so what it proves is the protocol: a real request and reply,
the conversation recorded, no token ids invented, the learner's exclusion of such calls
counted, and a clear error where a server refuses what it was asked.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fold.samples import sample_rows
from judges import load_task
from pipelines import fold_episode
from rollouts.errors import PolicyUnavailableError
from rollouts.policies import OpenAIChatPolicy
from tests.pipelines.factories import model, started, typed
from tests.rollouts.tiny_chat import chat_tokenizer
from tests.waiting import wait_until

TASK = Path(__file__).resolve().parents[2] / "tasks" / "wordplay" / "wordplay-001"


def _build(out: Path) -> None:
    import torch
    import transformers

    fast = chat_tokenizer(
        out,
        "Write the word reversed into answer.txt with bash, then submit.",
        bos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    torch.manual_seed(0)
    # 4,096 positions: the template renders the four tool schemas, ~1,300 tokens of this tiny vocabulary
    config = transformers.GPT2Config(
        vocab_size=len(fast), n_positions=4096, n_embd=32, n_layer=1, n_head=2,
        bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
    )  # fmt: skip
    transformers.GPT2LMHeadModel(config).save_pretrained(out)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """``(base_url, model)`` of a running ``transformers serve``."""
    path = tmp_path_factory.mktemp("served-model")
    _build(path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cli = Path(sys.executable).with_name("transformers")
    log = open(path / "serve.log", "w")  # noqa: SIM115 - closed below, after the server
    proc = subprocess.Popen(
        [str(cli), "serve", str(path), "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}/v1"

    def up() -> bool:
        assert proc.poll() is None, (path / "serve.log").read_text()[-2000:]
        try:
            return httpx.get(f"{base}/models", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(up, what="transformers serve answering")
        yield base, str(path)
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def test_a_real_server_is_asked_and_answers_and_no_token_ids_are_invented(server: tuple[str, str]) -> None:
    base, name = server
    policy = OpenAIChatPolicy(base, name, server="openai", native_tools=True, max_tokens=8, temperature=1.0)
    try:
        policy.begin(load_task(TASK))
        step = policy.step(None)
        call = step.model_call
        assert call is not None and call.completion and call.finish_reason in ("length", "stop")
        assert call.messages is not None and call.messages[0]["role"] == "system"
        assert call.messages[1]["content"] == load_task(TASK).spec.instruction
        # this server returns no ids and no log-probs: none are made up from the text
        assert call.prompt_token_ids is None and call.completion_token_ids is None
        assert call.completion_logprobs is None
        # the next turn carries the reply and the observation: a multi-turn conversation
        second = policy.step("no such file").model_call
        assert second is not None and [m["role"] for m in second.messages or []][-2:] == ["assistant", "user"]
    finally:
        policy.close()
    # such calls are rows of the samples table that the learner leaves out, counted by reason
    docs = [started("ep-srv"), model("ep-srv", 1, **call.event_fields())]
    rows = sample_rows(fold_episode("ep-srv", typed(*docs)))
    assert [r["problem"] for r in rows] == ["no_token_data"]


def test_a_server_refusing_vllm_fields_is_a_clear_error(server: tuple[str, str]) -> None:
    base, name = server
    policy = OpenAIChatPolicy(base, name, server="vllm", max_tokens=4)
    try:
        policy.begin(load_task(TASK))
        with pytest.raises(PolicyUnavailableError, match="return_token_ids.*use server=openai"):
            policy.step(None)
    finally:
        policy.close()
