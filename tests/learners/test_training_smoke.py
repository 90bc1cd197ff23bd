"""Smoke tests: TinyLM learns a toy mapping, and policy-loss steps raise the logprob of rewarded samples."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from learners import jax_model as jm
from learners import losses_jax as lj
from learners import losses_torch as lt
from learners import torch_model as tm
from learners.config import ModelConfig
from learners.tokenizer import CharTokenizer

TOK = CharTokenizer()
CFG = ModelConfig(d_model=64, n_layers=2, n_heads=4, d_ff=128, max_len=16)
LETTERS = list("abcd")
STEPS = 150
BATCH = 32


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> Iterator[None]:
    """Tiny models: one intra-op thread is as fast and does not collapse when the CPUs are shared."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def reversal_batch(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``BOS rev:abc= cba EOS`` sequences (all the same length) and their completion mask."""
    rows, masks = [], []
    for _ in range(n):
        word = "".join(rng.choice(LETTERS, size=3))
        prompt = [TOK.BOS, *TOK.encode(f"rev:{word}=")]
        completion = [*TOK.encode(word[::-1]), TOK.EOS]
        rows.append(prompt + completion)
        masks.append([0.0] * len(prompt) + [1.0] * len(completion))
    return np.array(rows, dtype=np.int64), np.array(masks, dtype=np.float32)


def pad_batch(prompt: list[int], completions: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Prompt + completion per row, right-padded with PAD, and the completion mask."""
    width = len(prompt) + max(len(c) for c in completions)
    ids = np.full((len(completions), width), TOK.PAD, dtype=np.int64)
    mask = np.zeros((len(completions), width), dtype=np.float32)
    for i, c in enumerate(completions):
        ids[i, : len(prompt) + len(c)] = prompt + c
        mask[i, len(prompt) : len(prompt) + len(c)] = 1.0
    return ids, mask


def improved(losses: list[float]) -> bool:
    first, last = np.mean(losses[:10]), np.mean(losses[-10:])
    print(f"supervised loss {first:.3f} -> {last:.3f}")
    return bool(last < 0.3 * first)


PROMPT = [TOK.BOS, *TOK.encode("rev:abc=")]


# ---------------------------------------------------------------- torch


def test_torch_supervised_training_reduces_loss() -> None:
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model = tm.TinyLM(CFG)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(STEPS):
        ids, mask = reversal_batch(rng, BATCH)
        m = torch.from_numpy(mask)
        logp = tm.sequence_logprobs(model, torch.from_numpy(ids), m)
        loss = -(logp * m).sum() / m.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert improved(losses)


def test_torch_policy_steps_raise_logprob_of_rewarded_samples() -> None:
    torch.manual_seed(1)
    model = tm.TinyLM(CFG)
    gen = torch.Generator().manual_seed(1)
    samples = [tm.generate(model, PROMPT, max_new_tokens=6, generator=gen) for _ in range(8)]
    ids_np, mask_np = pad_batch(PROMPT, [c for c, _ in samples])
    ids, mask = torch.from_numpy(ids_np), torch.from_numpy(mask_np)
    old = torch.zeros_like(mask)
    for i, (c, lp) in enumerate(samples):
        old[i, len(PROMPT) : len(PROMPT) + len(c)] = torch.tensor(lp)
    with torch.no_grad():
        assert torch.allclose(tm.sequence_logprobs(model, ids, mask), old, atol=1e-5)  # on-policy start
    adv = torch.ones(len(samples))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(5):
        loss, metrics = lt.policy_loss(
            tm.sequence_logprobs(model, ids, mask), old, adv, mask, ref_logp=old, kl_coef=0.01
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        after = tm.sequence_logprobs(model, ids, mask)
    gain = float(((after - old) * mask).sum() / mask.sum())
    print(
        f"torch policy: mean completion logprob +{gain:.3f}, last clip_frac {float(metrics['clip_frac']):.2f}"
    )
    assert gain > 0.05


# ---------------------------------------------------------------- jax

Params = dict[str, jax.Array]
AdamState = tuple[Params, Params, jax.Array]


def adam_init(params: Params) -> AdamState:
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    return zeros, zeros, jnp.zeros((), jnp.int32)


def adam_update(params: Params, grads: Params, state: AdamState, lr: float) -> tuple[Params, AdamState]:
    b1, b2, eps = 0.9, 0.999, 1e-8
    m, v, t = state
    t = t + 1
    m = jax.tree_util.tree_map(lambda m_, g: b1 * m_ + (1 - b1) * g, m, grads)
    v = jax.tree_util.tree_map(lambda v_, g: b2 * v_ + (1 - b2) * g * g, v, grads)
    c1, c2 = 1 - b1**t, 1 - b2**t
    params = jax.tree_util.tree_map(
        lambda p, m_, v_: p - lr * (m_ / c1) / (jnp.sqrt(v_ / c2) + eps), params, m, v
    )
    return params, (m, v, t)


def make_step(
    loss_fn: Callable[..., jax.Array], lr: float
) -> Callable[..., tuple[Params, AdamState, jax.Array]]:
    @jax.jit
    def step(params: Params, state: AdamState, *batch: jax.Array) -> tuple[Params, AdamState, jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn)(params, *batch)
        params, state = adam_update(params, grads, state, lr)
        return params, state, loss

    return step


def test_jax_supervised_training_reduces_loss() -> None:
    rng = np.random.default_rng(0)

    def nll(params: Params, ids: jax.Array, mask: jax.Array) -> jax.Array:
        logp = jm.sequence_logprobs(params, ids, mask, CFG)
        return -(logp * mask).sum() / mask.sum()

    step = make_step(nll, 3e-3)
    params = jm.init_params(CFG, seed=0)
    state = adam_init(params)
    losses = []
    for _ in range(STEPS):
        ids, mask = reversal_batch(rng, BATCH)
        params, state, loss = step(params, state, jnp.asarray(ids), jnp.asarray(mask))
        losses.append(float(loss))
    assert improved(losses)


def test_jax_policy_steps_raise_logprob_of_rewarded_samples() -> None:
    params = jm.init_params(CFG, seed=1)
    rng = np.random.default_rng(1)
    samples = [jm.generate(params, PROMPT, cfg=CFG, max_new_tokens=6, rng=rng) for _ in range(8)]
    ids_np, mask_np = pad_batch(PROMPT, [c for c, _ in samples])
    old_np = np.zeros_like(mask_np)
    for i, (c, lp) in enumerate(samples):
        old_np[i, len(PROMPT) : len(PROMPT) + len(c)] = lp
    ids, mask, old = jnp.asarray(ids_np), jnp.asarray(mask_np), jnp.asarray(old_np)
    assert np.allclose(np.asarray(jm.sequence_logprobs(params, ids, mask, CFG)), old_np, atol=1e-5)
    adv = jnp.ones(len(samples))

    def loss_fn(p: Params, ids: jax.Array, mask: jax.Array, old: jax.Array) -> jax.Array:
        new = jm.sequence_logprobs(p, ids, mask, CFG)
        return lj.policy_loss(new, old, adv, mask, ref_logp=old, kl_coef=0.01)[0]

    step = make_step(partial(loss_fn), 1e-2)
    state = adam_init(params)
    for _ in range(5):
        params, state, _ = step(params, state, ids, mask, old)
    after = jm.sequence_logprobs(params, ids, mask, CFG)
    gain = float(((after - old) * mask).sum() / mask.sum())
    print(f"jax policy: mean completion logprob +{gain:.3f}")
    assert gain > 0.05
