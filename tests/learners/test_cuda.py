"""The torch model on CUDA: sampling, rescoring, bf16 autocast, agreement with CPU (skipped without CUDA)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from learners import losses_torch as lt
from learners import torch_model as tm
from learners.config import ModelConfig
from learners.tokenizer import CharTokenizer

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

TOK = CharTokenizer()
PROMPT = [TOK.BOS, *TOK.encode("rev:abc=")]
CFG = ModelConfig()


def rescore(model: torch.nn.Module, completion: list[int]) -> torch.Tensor:
    device = next(model.parameters()).device
    ids = torch.tensor([PROMPT + completion], device=device)
    mask = torch.zeros_like(ids, dtype=torch.float32)
    mask[0, len(PROMPT) :] = 1.0
    with torch.no_grad():
        return tm.sequence_logprobs(model, ids, mask)[0, len(PROMPT) :].cpu()


def test_generate_on_cuda_matches_rescoring() -> None:
    device = tm.select_device("auto")
    assert device.type == "cuda" and tm.select_device("cuda").type == "cuda"
    torch.manual_seed(0)
    model = tm.TinyLM(CFG).to(device)
    for gen in (torch.Generator(device=device).manual_seed(0), torch.Generator().manual_seed(0)):
        for _ in range(3):
            completion, logprobs = tm.generate(model, PROMPT, max_new_tokens=40, generator=gen)
            assert max(abs(a - b) for a, b in zip(logprobs, rescore(model, completion).tolist())) < 1e-5
    greedy = tm.generate(model, PROMPT, max_new_tokens=200, greedy=True, eos_id=-1)
    assert len(PROMPT) + len(greedy[0]) == CFG.max_len
    on_cpu = tm.generate(model.cpu(), PROMPT, max_new_tokens=200, greedy=True, eos_id=-1)
    assert greedy[0] == on_cpu[0]
    assert max(abs(a - b) for a, b in zip(greedy[1], on_cpu[1])) < 1e-5


def test_cuda_matches_cpu_in_float32() -> None:
    torch.manual_seed(1)
    cpu = tm.TinyLM(CFG)
    gpu = tm.TinyLM(CFG).cuda()
    gpu.load_state_dict(cpu.state_dict())
    rng = np.random.default_rng(0)
    ids = torch.from_numpy(rng.integers(1, CFG.vocab_size, size=(4, CFG.max_len)))
    mask = torch.zeros(4, CFG.max_len)
    mask[:, 20:] = 1.0
    old = torch.from_numpy(rng.normal(-4.6, 0.3, size=(4, CFG.max_len)).astype(np.float32)) * mask
    adv = lt.group_advantages(torch.tensor([1.0, 0.0, 0.5, 0.5]), torch.tensor([0, 0, 1, 1]))
    losses = []
    for model, dev in ((cpu, "cpu"), (gpu, "cuda")):
        new = tm.sequence_logprobs(model, ids.to(dev), mask.to(dev))
        loss, _ = lt.policy_loss(
            new, old.to(dev), adv.to(dev), mask.to(dev), ref_logp=old.to(dev), kl_coef=0.1
        )
        loss.backward()
        losses.append(float(loss.detach()))
    assert abs(losses[0] - losses[1]) < 1e-5
    grads_gpu = dict(gpu.named_parameters())
    for name, p in cpu.named_parameters():
        assert float((p.grad - grads_gpu[name].grad.cpu()).abs().max()) < 1e-4, name


def test_bf16_autocast_forward_and_training() -> None:
    device = torch.device("cuda")
    torch.manual_seed(2)
    model = tm.TinyLM(CFG).to(device)
    ids = torch.randint(1, CFG.vocab_size, (8, CFG.max_len), device=device)
    with torch.no_grad():
        ref = model(ids)
        with tm.autocast(device):
            low = model(ids)
    assert low.dtype == torch.float32
    assert float((low - ref).abs().max()) < 5e-2
    # supervised steps under autocast on the reversal task reduce the loss
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(150):
        rows = []
        for _ in range(64):
            word = "".join(rng.choice(list("abcd"), size=3))
            rows.append([TOK.BOS, *TOK.encode(f"rev:{word}="), *TOK.encode(word[::-1]), TOK.EOS])
        batch = torch.tensor(rows, device=device)
        mask = torch.zeros_like(batch, dtype=torch.float32)
        mask[:, len(PROMPT) :] = 1.0
        with tm.autocast(device):
            logp = tm.sequence_logprobs(model, batch, mask)
        loss = -(logp * mask).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert np.mean(losses[-10:]) < 0.3 * np.mean(losses[:10])
