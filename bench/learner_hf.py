"""A Hugging Face checkpoint as a learner scores it: chunked log-probs against the full-logits path.

    .venv/bin/python bench/learner_hf.py [--device cuda] [--vocab 151936] [--hidden 896] [--layers 4]
                                         [--batch 8] [--seq 2048] [--json OUT]

Builds a Qwen2-shaped causal LM with random weights (nothing from a model hub), saves it in
bf16, loads it as ``--hf-model`` does (fp32 master weights), and runs one policy-loss step on a
minibatch of ``--batch`` sequences of ``--seq`` tokens (half prompt, half completion, T = 0.7)
two ways, each from zeroed gradients:

- ``plain``: ``model(ids)`` logits ``[B, T, V]`` in float32, then log-softmax (as before issue 25);
- ``chunked``: :func:`learners.torch_model.sequence_logprobs` with its default chunk: only the
  completion positions go through the output layer, a chunk at a time, recomputed in backward.

On CUDA both run under the learner's bf16 autocast (``--fp32``: without it). Reported: seconds,
the allocator's peak above the model per sample (CUDA only; the CPU figure is in ``bench/learner.py
--parts memory``), the largest difference of the scored log-probs and the relative difference of
the gradients.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import transformers  # noqa: E402

from learners import torch_model as tm  # noqa: E402
from learners.hf_model import HFPolicyModel, load_causal_lm  # noqa: E402
from learners.losses_torch import policy_loss  # noqa: E402


def run(
    device: str, vocab: int, hidden: int, layers: int, batch: int, seq: int, fp32: bool = False
) -> dict[str, Any]:
    """One step each way on the same model and minibatch; see the module docstring."""
    dev = torch.device(device)
    cuda = dev.type == "cuda"
    heads = max(1, hidden // 64)
    cfg = transformers.Qwen2Config(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=4 * hidden, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=1 if heads % 2 else 2, max_position_embeddings=seq,
        tie_word_embeddings=True,
    )  # fmt: skip
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as d:
        transformers.Qwen2ForCausalLM(cfg).to(torch.bfloat16).save_pretrained(d)
        model = HFPolicyModel(load_causal_lm(d, device=dev, dtype=torch.float32))
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(3, vocab, (batch, seq), generator=gen).to(dev)
    mask = torch.zeros(batch, seq, device=dev)
    mask[:, seq // 2 :] = 1.0
    adv = torch.randn(batch, generator=gen).to(dev)
    temperature = torch.full((batch,), 0.7, device=dev)
    out: dict[str, Any] = {
        "device": torch.cuda.get_device_name(dev) if cuda else "cpu", "torch": torch.__version__,
        "transformers": transformers.__version__, "vocab": vocab, "hidden": hidden, "layers": layers,
        "batch": batch, "seq": seq, "master_dtype": str(next(model.parameters()).dtype),
        "split_head": model.split_head, "autocast": not fp32 and cuda,
    }  # fmt: skip
    with torch.no_grad(), contextlib.nullcontext() if fp32 else tm.autocast(dev):
        old = tm.sequence_logprobs(model, ids, mask, temperature)  # on-policy: ratio 1, a full gradient
    kept: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for name, chunk in (("plain", None), ("chunked", tm.LOGIT_CHUNK)):
        model.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize(dev)
            torch.cuda.reset_peak_memory_stats(dev)
        base = torch.cuda.memory_allocated(dev) if cuda else 0
        t0 = time.perf_counter()
        with contextlib.nullcontext() if fp32 else tm.autocast(dev):
            logp = tm.sequence_logprobs(model, ids, mask, temperature, chunk=chunk)
            loss, _ = policy_loss(logp, old, adv, mask)
        loss.backward()
        if cuda:
            torch.cuda.synchronize(dev)
        row: dict[str, Any] = {"seconds": time.perf_counter() - t0, "loss": float(loss.detach())}
        if cuda:
            row["peak_mib_per_sample"] = (torch.cuda.max_memory_allocated(dev) - base) / batch / 2**20
        out[name] = row
        grads = [p.grad.flatten().float() for p in model.parameters() if p.grad is not None]
        kept[name] = (logp.detach().float(), torch.cat(grads))
        print(f"{name:>8}: " + json.dumps(row), flush=True)
    (lp_a, g_a), (lp_b, g_b) = kept["plain"], kept["chunked"]
    scored = mask[:, 1:] != 0
    out["logp_max_abs_diff"] = float((lp_a[:, 1:] - lp_b[:, 1:])[scored].abs().max())
    out["grad_rel_diff"] = float((g_a - g_b).norm() / g_a.norm())
    if cuda:
        out["memory_ratio"] = out["chunked"]["peak_mib_per_sample"] / out["plain"]["peak_mib_per_sample"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description="HF checkpoint: chunked log-probs vs the full-logits path")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--vocab", type=int, default=151_936, help="vocabulary size (Qwen2's)")
    ap.add_argument("--hidden", type=int, default=896, help="model width (Qwen2-0.5B's)")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--fp32", action="store_true", help="no bf16 autocast on CUDA")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    out = run(a.device, a.vocab, a.hidden, a.layers, a.batch, a.seq, a.fp32)
    print(json.dumps(out, indent=1))
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
