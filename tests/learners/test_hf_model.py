"""A Hugging Face causal LM loaded from a local directory works as a policy (nothing is downloaded)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers

from learners import losses_torch as lt
from learners import torch_model as tm
from learners.hf_model import HFPolicyModel, ModelLoadError, load_causal_lm
from learners.tokenizer import CharTokenizer

TOK = CharTokenizer()
PROMPT = [TOK.BOS, *TOK.encode("rev:abc=")]


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=98,
        n_positions=64,
        n_embd=32,
        n_layer=1,
        n_head=2,
        bos_token_id=TOK.BOS,
        eos_token_id=TOK.EOS,
    )
    path = tmp_path_factory.mktemp("tiny-gpt2")
    transformers.GPT2LMHeadModel(config).save_pretrained(path)
    return path


def test_load_and_score(gpt2_dir: Path) -> None:
    policy = HFPolicyModel(load_causal_lm(gpt2_dir, device=torch.device("cpu")))
    assert policy.max_len == 64
    assert not policy.model.training
    ids = torch.tensor([[*PROMPT, 10, 11, TOK.EOS], [*PROMPT, 12, TOK.EOS, TOK.PAD]])
    mask = torch.zeros_like(ids, dtype=torch.float32)
    mask[0, len(PROMPT) :] = 1.0
    mask[1, len(PROMPT) : len(PROMPT) + 2] = 1.0
    logits = policy(ids)
    assert logits.shape == (2, ids.shape[1], 98) and logits.dtype == torch.float32
    lp = tm.sequence_logprobs(policy, ids, mask)
    assert lp.shape == ids.shape
    assert torch.isfinite(lp).all()
    assert (lp[mask == 0] == 0).all() and (lp[mask == 1] < 0).all()
    # dropout is off: a training-mode forward gives the same logprobs as eval mode
    policy.train()
    assert policy.model.training
    assert torch.allclose(tm.sequence_logprobs(policy, ids, mask), lp, atol=1e-6, rtol=0)
    # gradients flow into the wrapped model through the policy loss
    loss, _ = lt.policy_loss(lp, lp.detach(), torch.tensor([1.0, -1.0]), mask)
    loss.backward()
    assert all(p.grad is not None for p in policy.parameters() if p.requires_grad)


def test_generate_logprobs_match_rescoring(gpt2_dir: Path) -> None:
    policy = HFPolicyModel(load_causal_lm(gpt2_dir))
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        completion, logprobs = tm.generate(policy, PROMPT, max_new_tokens=10, generator=gen)
        assert 1 <= len(completion) <= 10 and len(logprobs) == len(completion)
        ids = torch.tensor([PROMPT + completion])
        mask = torch.zeros_like(ids, dtype=torch.float32)
        mask[0, len(PROMPT) :] = 1.0
        with torch.no_grad():
            rescored = tm.sequence_logprobs(policy, ids, mask)[0, len(PROMPT) :]
        assert torch.allclose(rescored, torch.tensor(logprobs), atol=1e-5, rtol=0)
    # greedy is deterministic and max_len (n_positions) bounds prompt + completion
    a = tm.generate(policy, PROMPT, max_new_tokens=200, greedy=True, eos_id=-1)
    assert a == tm.generate(policy, PROMPT, max_new_tokens=200, greedy=True, eos_id=-1)
    assert len(PROMPT) + len(a[0]) == 64


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="no model directory"):
        load_causal_lm(tmp_path / "missing")
    with pytest.raises(ModelLoadError, match="config.json"):
        load_causal_lm(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "gpt2"}')
    with pytest.raises(ModelLoadError):
        load_causal_lm(tmp_path)  # a config but no weights


def tiny_causal_lm(kind: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if kind == "gpt2":
        return transformers.GPT2LMHeadModel(
            transformers.GPT2Config(
                vocab_size=70, n_embd=32, n_layer=1, n_head=2, n_positions=32, bos_token_id=1, eos_token_id=2
            )  # fmt: skip
        )
    common = dict(vocab_size=70, hidden_size=32, intermediate_size=64, num_hidden_layers=1, head_dim=16,
                  num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32)  # fmt: skip
    if kind == "llama":
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(**common))
    # soft-capped logits: lm_head(hidden) is not the model's output, so the full forward must be used
    return transformers.Gemma2ForCausalLM(
        transformers.Gemma2Config(**common, final_logit_softcapping=3.0, query_pre_attn_scalar=16)
    )


@pytest.mark.parametrize(("kind", "split"), [("gpt2", True), ("llama", True), ("gemma2", False)])
def test_chunked_scoring_matches_the_models_own_logits(kind: str, split: bool) -> None:
    policy = HFPolicyModel(tiny_causal_lm(kind))
    assert policy.split_head is split
    ids = torch.randint(3, 70, (3, 20), generator=torch.Generator().manual_seed(1))
    mask = torch.zeros(3, 20)
    mask[0, 4:11] = mask[1, 2:20] = mask[2, 9:15] = 1
    temps = torch.tensor([0.6, 1.0, 1.4])
    full = tm.sequence_logprobs(policy, ids, mask, temps, chunk=None)
    policy.zero_grad()
    full.sum().backward()
    g_full = {k: p.grad.clone() for k, p in policy.named_parameters() if p.grad is not None}
    policy.zero_grad()
    part = tm.sequence_logprobs(policy, ids, mask, temps, chunk=4)
    part.sum().backward()
    g_part = {k: p.grad.clone() for k, p in policy.named_parameters() if p.grad is not None}
    assert torch.allclose(full, part, atol=1e-5)
    assert set(g_full) == set(g_part) and g_full
    for k in g_full:
        assert torch.allclose(g_full[k], g_part[k], rtol=1e-4, atol=1e-5), k
    # and the scores are the model's own: log_softmax of its forward logits over the temperature
    ref = torch.log_softmax(policy.model(input_ids=ids).logits.float() / temps[:, None, None], -1)
    picked = ref[:, :-1].gather(-1, ids[:, 1:, None])[..., 0]
    assert torch.allclose(part[:, 1:][mask[:, 1:] != 0], picked[mask[:, 1:] != 0], atol=1e-5)
