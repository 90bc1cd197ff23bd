"""Micro-batches with gradient accumulation, and log-probs scored chunk by chunk through the output layer.

A minibatch split into micro-batches must give the same optimiser step as the whole minibatch (the
loss is the minibatch's token mean either way), and the chunked log-probs the same values and
gradients as the full ``[B, T, V]`` logits, while the output layer never sees more than one chunk of
positions, and never a prompt position.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from learners import torch_model as tm
from learners.config import ModelConfig
from learners.dataset import Sample, SampleSet
from learners.errors import LearnerConfigError
from learners.trainer import TrainArgs, micro_batches, update

ROOT = Path(__file__).resolve().parents[2]


def batch(rng: np.random.Generator, b: int, t: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded rows with prompts and completions of different lengths."""
    ids = torch.zeros((b, t), dtype=torch.long)
    mask = torch.zeros((b, t))
    for i in range(b):
        p, c = int(rng.integers(2, t // 2)), int(rng.integers(1, t // 2))
        ids[i, : p + c] = torch.from_numpy(rng.integers(1, vocab, size=p + c))
        mask[i, p : p + c] = 1.0
    return ids, mask


def grads_of(model: torch.nn.Module, out: torch.Tensor) -> dict[str, torch.Tensor]:
    model.zero_grad()
    (out * torch.linspace(0.5, 1.5, out.numel()).view_as(out)).sum().backward()
    return {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("chunk", [1, 5, 512])
def test_chunked_logprobs_equal_the_full_logits_with_gradients(chunk: int) -> None:
    torch.manual_seed(0)
    model = tm.TinyLM(ModelConfig(vocab_size=61, max_len=24))
    ids, mask = batch(np.random.default_rng(1), 5, 24, 61)
    temps = torch.tensor([0.7, 1.0, 1.3, 0.5, 1.0])
    full = tm.sequence_logprobs(model, ids, mask, temps, chunk=None)
    g_full = grads_of(model, full)
    part = tm.sequence_logprobs(model, ids, mask, temps, chunk=chunk)
    g_part = grads_of(model, part)
    assert torch.allclose(full, part, atol=1e-6)
    assert bool((part[mask == 0] == 0).all()) and bool((part[:, 0] == 0).all())
    assert set(g_full) == set(g_part)
    for k in g_full:
        assert torch.allclose(g_full[k], g_part[k], rtol=1e-5, atol=1e-5), k


def test_output_layer_sees_one_chunk_of_completion_positions_at_a_time() -> None:
    torch.manual_seed(0)
    model = tm.TinyLM(ModelConfig(vocab_size=40, max_len=32))
    seen: list[int] = []
    head = model.head

    def spy(h: torch.Tensor) -> torch.Tensor:
        seen.append(h.shape[0] if h.dim() == 2 else -1)  # a [B, T, D] call would be the full logits
        return head(h)

    model.head = spy  # type: ignore[method-assign]
    ids, mask = batch(np.random.default_rng(3), 6, 32, 40)
    scored = int(mask[:, 1:].sum())
    out = tm.sequence_logprobs(model, ids, mask, 1.0, chunk=7)
    out.sum().backward()
    forward_calls = -(-scored // 7)
    # every chunk once forward and once more in backward (its logits are rebuilt, not kept)
    assert len(seen) == 2 * forward_calls and max(seen) <= 7 and min(seen) > 0
    assert sum(seen) == 2 * scored


def samples(n_groups: int, seed: int) -> list[Sample]:
    rng = np.random.default_rng(seed)
    out = []
    for g in range(n_groups):
        prompt = [1, *rng.integers(3, 90, size=int(rng.integers(4, 20))).tolist()]
        for k in range(4):
            comp = rng.integers(3, 90, size=int(rng.integers(1, 12))).tolist()
            mask = [1] * len(comp)
            if len(comp) > 4:  # a tool result in the middle: not the policy's tokens
                mask[2:4] = [0, 0]
            lp = [-float(x) if m else 0.0 for x, m in zip(rng.random(len(comp)), mask, strict=True)]
            out.append(Sample(f"e{g}-{k}", f"g{g}", f"t{g}", "v", float(rng.random()), prompt, comp, lp,
                              temperature=0.8, completion_mask=mask))  # fmt: skip
    return out


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_micro_batched_step_equals_the_whole_minibatch(backend: str) -> None:
    cfg = ModelConfig(max_len=40)
    data = samples(5, seed=0)
    base = dict(lake="", checkpoint_root="", judge_name="j", backend=backend, device="cpu", seed=1,
                batch_size=20, epochs=1, kl_coef=0.05, lr=1e-3)  # fmt: skip
    torch.manual_seed(0)
    w0 = {k: v.numpy() for k, v in tm.TinyLM(cfg).state_dict().items()}
    whole, rows_whole, opt_whole = update(cfg, w0, SampleSet.from_samples(data), TrainArgs(**base))  # type: ignore[arg-type]
    split, rows_split, opt_split = update(
        cfg,
        w0,
        SampleSet.from_samples(data),
        TrainArgs(**base, micro_batch_size=3),  # type: ignore[arg-type]
    )
    assert [r["micro_batches"] for r in rows_whole] == [1]
    assert [r["micro_batches"] for r in rows_split] == [7]
    # after one Adam step the first moment is 0.1 x the (clipped) gradient: the gradients agree
    grad_norm = np.sqrt(sum(float((m * m).sum()) for m in opt_whole.m.values())) / 0.1
    assert grad_norm > 1e-3  # there was a gradient, so agreeing is not trivially true
    for k in w0:
        np.testing.assert_allclose(opt_split.m[k], opt_whole.m[k], rtol=1e-4, atol=1e-8, err_msg=k)
        # Adam's first step is about lr x sign(gradient): near-zero gradients round either way
        np.testing.assert_allclose(split[k], whole[k], atol=2e-5, err_msg=k)
    for key in ("loss", "pg_loss", "kl", "clip_frac", "ratio_mean"):
        assert rows_split[0][key] == pytest.approx(rows_whole[0][key], abs=1e-6), key


def test_micro_batches_cut_each_to_its_own_longest_completion() -> None:
    ids = np.zeros((4, 10), dtype=np.int64)
    mask = np.zeros((4, 10), dtype=np.float32)
    mask[0, 2:4] = mask[1, 3:5] = mask[2, 1:9] = mask[3, 2:3] = 1
    parts = list(micro_batches({"input_ids": ids, "completion_mask": mask, "advantages": np.ones(4)}, 2))
    assert [(lo, mb["input_ids"].shape, mb["advantages"].shape) for lo, _, mb in parts] == [
        (0, (2, 5), (2,)),
        (2, (2, 9), (2,)),
    ]
    assert [share for _, share, _ in parts] == [4 / 13, 9 / 13]  # each one's part of the loss tokens


def test_a_micro_batch_size_below_one_is_refused() -> None:
    with pytest.raises(LearnerConfigError, match="micro_batch_size"):
        update(ModelConfig(), None, samples(1, 0), TrainArgs(lake="", checkpoint_root="", judge_name="j",
                                                             micro_batch_size=0))  # fmt: skip


def test_the_memory_benchmark_runs_and_chunking_cuts_the_peak(tmp_path: Path) -> None:
    """The short version of ``bench/learner.py --parts memory`` (a real 151,936-token vocabulary)."""
    out = tmp_path / "memory.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "learner.py"), "--parts", "memory", "--device", "cpu",
         "--seq", "128", "--memory-batch", "4", "--d-model", "64", "--json", str(out)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    modes = json.loads(out.read_text())["memory"]["modes"]
    assert set(modes) == {"before", "chunked", "chunked+micro"}
    # the whole minibatch's logits alone are 4 x 128 x 151,936 floats (311 MB) in the plain path
    assert modes["before"]["peak_bytes"] > 4 * 128 * 151_936 * 4
    assert modes["chunked"]["peak_bytes"] < 0.5 * modes["before"]["peak_bytes"]
    assert modes["chunked+micro"]["peak_bytes"] < 0.5 * modes["before"]["peak_bytes"]
