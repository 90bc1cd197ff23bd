"""Numerics of the learners: torch vs JAX (model, losses, gradients), advantages, generation, tokenizer."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

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
from learners.errors import DeviceUnavailableError
from learners.tokenizer import CharTokenizer

CFG = ModelConfig()
SMALL = ModelConfig(d_model=32, n_layers=2, n_heads=4, d_ff=64, max_len=24)


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> Iterator[None]:
    """Tiny models: one intra-op thread is as fast and does not collapse when the CPUs are shared."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def make_pair(cfg: ModelConfig, seed: int = 0) -> tuple[tm.TinyLM, dict[str, jax.Array]]:
    """A TinyLM and the same weights as JAX parameters."""
    torch.manual_seed(seed)
    model = tm.TinyLM(cfg)
    params = jm.params_from_numpy({k: v.detach().numpy() for k, v in model.state_dict().items()})
    return model, params


def max_diff(a: torch.Tensor | jax.Array | np.ndarray, b: torch.Tensor | jax.Array | np.ndarray) -> float:
    def to_np(x: torch.Tensor | jax.Array | np.ndarray) -> np.ndarray:
        return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)

    return float(np.max(np.abs(to_np(a).astype(np.float64) - to_np(b).astype(np.float64))))


@contextlib.contextmanager
def jax_x64() -> Iterator[None]:
    """64-bit JAX inside the block only (the API moved between JAX versions)."""
    if callable(getattr(jax, "enable_x64", None)):
        with jax.enable_x64(True):
            yield
    else:  # pragma: no cover - older JAX
        from jax.experimental import enable_x64

        with enable_x64():
            yield


def completion_batch(rng: np.random.Generator, b: int, t: int, vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """Random right-padded prompt+completion ids and the completion mask."""
    ids = np.zeros((b, t), dtype=np.int64)
    mask = np.zeros((b, t), dtype=np.float32)
    for i in range(b):
        prompt = int(rng.integers(1, t // 2))
        total = int(rng.integers(prompt + 1, t + 1))
        ids[i, :total] = rng.integers(1, vocab, size=total)
        mask[i, prompt:total] = 1.0
    return ids, mask


# ---------------------------------------------------------------- model agreement


def test_state_dict_names_and_shapes_match_jax() -> None:
    model, _ = make_pair(CFG)
    torch_shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    jax_params = jm.init_params(CFG, seed=1)
    assert list(torch_shapes) == list(jm.param_shapes(CFG))
    assert {k: tuple(v.shape) for k, v in jax_params.items()} == torch_shapes
    assert all(v.dtype == jnp.float32 for v in jax_params.values())
    assert "blocks.1.attn.qkv.weight" in torch_shapes and torch_shapes["lm_head.weight"] == (98, 64)
    # init: LN weights 1, biases 0, weights ~ N(0, 0.02)
    assert float(jax_params["blocks.0.ln1.weight"].min()) == 1.0
    assert float(jnp.abs(jax_params["blocks.0.mlp.fc1.bias"]).max()) == 0.0
    assert abs(float(jax_params["tok_emb.weight"].std()) - 0.02) < 0.002
    assert abs(float(model.blocks[0].mlp.fc1.weight.detach().std()) - 0.02) < 0.002
    assert (
        float(model.ln_f.weight.detach().min()) == 1.0
        and float(model.blocks[0].attn.qkv.bias.detach().abs().max()) == 0.0
    )


def test_torch_and_jax_logits_and_logprobs_agree() -> None:
    model, params = make_pair(CFG, seed=3)
    rng = np.random.default_rng(0)
    ids, mask = completion_batch(rng, 5, CFG.max_len, CFG.vocab_size)
    logits_t = model(torch.from_numpy(ids))
    logits_j = jm.forward(params, jnp.asarray(ids), CFG)
    assert logits_t.dtype == torch.float32 and logits_j.dtype == jnp.float32
    assert logits_t.shape == (5, CFG.max_len, CFG.vocab_size) == logits_j.shape
    assert max_diff(logits_t, logits_j) < 1e-4

    lp_t = tm.sequence_logprobs(model, torch.from_numpy(ids), torch.from_numpy(mask))
    lp_j = jm.sequence_logprobs(params, jnp.asarray(ids), jnp.asarray(mask), CFG)
    assert max_diff(lp_t, lp_j) < 1e-5
    print(f"logits max abs diff {max_diff(logits_t, logits_j):.3g}, logprobs {max_diff(lp_t, lp_j):.3g}")
    # zero off the mask, negative on it
    off = mask == 0
    assert np.all(lp_t.detach().numpy()[off] == 0.0) and np.all(np.asarray(lp_j)[off] == 0.0)
    assert np.all(lp_t.detach().numpy()[~off] < 0.0)


def test_sequence_logprobs_definition() -> None:
    model, _ = make_pair(SMALL, seed=4)
    ids = torch.tensor([[1, 10, 11, 12, 13, 2, 0, 0]])
    mask = torch.tensor([[0, 0, 0, 1, 1, 1, 0, 0]], dtype=torch.bool)
    lp = tm.sequence_logprobs(model, ids, mask).detach()
    logits = model(ids).detach()
    for t in range(ids.shape[1]):
        expected = torch.log_softmax(logits[0, t - 1], -1)[ids[0, t]] if mask[0, t] else torch.tensor(0.0)
        assert abs(float(lp[0, t]) - float(expected)) < 1e-6
    # right padding does not change the scores of real positions (causal attention)
    lp_short = tm.sequence_logprobs(model, ids[:, :6], mask[:, :6])
    assert max_diff(lp[:, :6], lp_short) < 1e-6


def test_jax_model_is_float32_under_x64() -> None:
    model, params = make_pair(SMALL, seed=5)
    ids = np.random.default_rng(1).integers(0, SMALL.vocab_size, size=(2, SMALL.max_len))
    with jax_x64():
        logits = jm.forward(jm.params_from_numpy(jm.params_to_numpy(params)), jnp.asarray(ids), SMALL)
        assert logits.dtype == jnp.float32
    assert max_diff(model(torch.from_numpy(ids)), logits) < 1e-4


def test_params_numpy_round_trip_loads_into_torch() -> None:
    params = jm.init_params(SMALL, seed=7)
    arrays = jm.params_to_numpy(params)
    model = tm.TinyLM(SMALL)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in arrays.items()})
    ids = np.random.default_rng(2).integers(0, SMALL.vocab_size, size=(2, 10))
    assert max_diff(model(torch.from_numpy(ids)), jm.forward(params, jnp.asarray(ids), SMALL)) < 1e-4


def test_forward_rejects_sequences_longer_than_max_len() -> None:
    model, params = make_pair(SMALL)
    ids = np.ones((1, SMALL.max_len + 1), dtype=np.int64)
    with pytest.raises(ValueError, match="max_len"):
        model(torch.from_numpy(ids))
    with pytest.raises(ValueError, match="max_len"):
        jm.forward(params, jnp.asarray(ids), SMALL)


# ---------------------------------------------------------------- advantages


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_group_advantages_hand_computed(framework: str) -> None:
    rewards = [1.0, 2.0, 3.0, 5.0, 5.0, 0.0, 4.0, 0.1, 0.1, 0.1]
    groups = [0, 0, 0, 1, 1, 2, 2, 3, 3, 3]
    s = math.sqrt(2.0 / 3.0)  # population std of 1, 2, 3
    eps = 1e-6
    expected = [-1 / (s + eps), 0.0, 1 / (s + eps), 0.0, 0.0, -2 / (2 + eps), 2 / (2 + eps), 0.0, 0.0, 0.0]
    if framework == "torch":
        adv = lt.group_advantages(torch.tensor(rewards), torch.tensor(groups)).numpy()
    else:
        adv = np.asarray(lj.group_advantages(jnp.asarray(rewards), jnp.asarray(groups)))
    np.testing.assert_allclose(adv, expected, rtol=1e-6, atol=1e-6)
    # constant groups (5, 5 and 0.1 x 3, whose float mean is not exactly 0.1) are exactly zero
    assert np.all(adv[[3, 4, 7, 8, 9]] == 0.0)


def test_group_advantages_integer_rewards_and_order_free_groups() -> None:
    rewards = [3, 1, 3, 1]
    groups = [1, 0, 0, 1]
    adv_t = lt.group_advantages(torch.tensor(rewards), torch.tensor(groups))
    adv_j = lj.group_advantages(jnp.asarray(rewards), jnp.asarray(groups))
    assert adv_t.dtype == torch.float32 and adv_j.dtype == jnp.float32
    np.testing.assert_allclose(adv_t.numpy(), [1, -1, 1, -1], atol=1e-5)
    np.testing.assert_allclose(np.asarray(adv_j), [1, -1, 1, -1], atol=1e-5)
    np.testing.assert_allclose(
        np.asarray(jax.jit(lj.group_advantages)(jnp.asarray(rewards), jnp.asarray(groups))), adv_t.numpy()
    )


# ---------------------------------------------------------------- policy loss


def test_policy_loss_hand_computed() -> None:
    log15 = math.log(1.5)
    new = torch.tensor([[0.0, log15, log15, 0.3]], dtype=torch.float64)
    old = torch.zeros_like(new)
    mask = torch.tensor([[0.0, 1.0, 1.0, 1.0]], dtype=torch.float64)
    # ratio 1.5 with A = +1 is clipped to 1.2; with A = -1 the unclipped 1.5 is the pessimistic one
    loss_pos, m_pos = lt.policy_loss(new, old, torch.tensor([1.0], dtype=torch.float64), mask)
    expected_pos = (-1.2 - 1.2 - min(math.exp(0.3), 1.2)) / 3
    assert abs(float(loss_pos) - expected_pos) < 1e-12
    loss_neg, _ = lt.policy_loss(new, old, torch.tensor([-1.0], dtype=torch.float64), mask)
    assert abs(float(loss_neg) - (1.5 + 1.5 + math.exp(0.3)) / 3) < 1e-12
    assert abs(float(m_pos["clip_frac"]) - 1.0) < 1e-12  # 1.5, 1.5 and e^0.3 = 1.35 all outside [0.8, 1.2]
    assert abs(float(m_pos["ratio_mean"]) - (1.5 + 1.5 + math.exp(0.3)) / 3) < 1e-12
    assert float(m_pos["kl"]) == 0.0 and float(m_pos["pg_loss"]) == float(loss_pos)
    # k3 KL: ref = new at every token -> 0; and the kl term adds kl_coef * kl
    loss_kl, m_kl = lt.policy_loss(
        new, old, torch.tensor([1.0], dtype=torch.float64), mask, ref_logp=new, kl_coef=3.0
    )
    assert float(m_kl["kl"]) == 0.0 and abs(float(loss_kl) - expected_pos) < 1e-12
    ref = new - 0.5
    _, m_kl = lt.policy_loss(
        new, old, torch.tensor([1.0], dtype=torch.float64), mask, ref_logp=ref, kl_coef=3.0
    )
    assert abs(float(m_kl["kl"]) - (math.exp(-0.5) + 0.5 - 1)) < 1e-12
    # clip-higher: the upper bound has its own epsilon (1.5 is clipped to 1.28, e^0.3 = 1.35 too)
    loss_hi, _ = lt.policy_loss(new, old, torch.tensor([1.0], dtype=torch.float64), mask, clip_eps_high=0.28)
    assert abs(float(loss_hi) - (-1.28 - 1.28 - 1.28) / 3) < 1e-12


def test_dr_grpo_advantages_are_centred_rewards_without_the_std() -> None:
    from learners.dataset import group_advantages_np

    rewards, groups = np.array([1.0, 2.0, 3.0, 0.0, 4.0, 5.0, 5.0]), np.array([0, 0, 0, 1, 1, 2, 2])
    np.testing.assert_allclose(group_advantages_np(rewards, groups, scale=False), [-1, 0, 1, -2, 2, 0, 0])
    scaled = group_advantages_np(rewards, groups)
    assert abs(scaled[0] + 1 / math.sqrt(2 / 3)) < 1e-5  # GRPO's default divides by the group's std


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_policy_loss_ignores_extreme_padding_and_empty_mask(framework: str) -> None:
    new = np.array([[-0.5, -1e4, 80.0]], dtype=np.float32)
    old = np.array([[-0.6, 0.0, -80.0]], dtype=np.float32)
    mask = np.array([[1.0, 0.0, 0.0]], dtype=np.float32)
    adv = np.array([-1.0], dtype=np.float32)
    if framework == "torch":
        new_t = torch.tensor(new, requires_grad=True)
        loss, _ = lt.policy_loss(
            new_t,
            torch.tensor(old),
            torch.tensor(adv),
            torch.tensor(mask),
            ref_logp=torch.tensor(old),
            kl_coef=0.5,
        )
        loss.backward()
        loss = loss.detach()
        grad = new_t.grad.numpy()
        empty, _ = lt.policy_loss(new_t, torch.tensor(old), torch.tensor(adv), torch.zeros(1, 3))
    else:

        def fn(n: jax.Array) -> jax.Array:
            j_old, j_adv, j_mask = jnp.asarray(old), jnp.asarray(adv), jnp.asarray(mask)
            return lj.policy_loss(n, j_old, j_adv, j_mask, ref_logp=j_old, kl_coef=0.5)[0]

        loss, grad = jax.value_and_grad(fn)(jnp.asarray(new))
        grad = np.asarray(grad)
        empty, _ = lj.policy_loss(jnp.asarray(new), jnp.asarray(old), jnp.asarray(adv), jnp.zeros((1, 3)))
    assert np.isfinite(float(loss)) and np.all(np.isfinite(grad))
    assert np.all(grad[0, 1:] == 0.0)
    assert float(empty.detach() if isinstance(empty, torch.Tensor) else empty) == 0.0


def loss_inputs(dtype: np.dtype) -> dict[str, np.ndarray]:
    """Random logprobs (some ratios far outside the clip range), a holey mask and 3-group advantages."""
    rng = np.random.default_rng(42)
    b, t = 9, 12
    old = -rng.gamma(2.0, 1.0, size=(b, t))
    new = old + rng.normal(0.0, 0.3, size=(b, t))
    ref = old + rng.normal(0.0, 0.2, size=(b, t))
    mask = (rng.random((b, t)) > 0.25).astype(np.float64)
    mask[:, 0] = 0.0
    mask[0, 6:] = 0.0
    rewards = rng.random(b)
    rewards[6:] = 0.7  # group 2 is constant
    groups = np.repeat(np.arange(3), 3)
    return {
        "new": new.astype(dtype),
        "old": old.astype(dtype),
        "ref": ref.astype(dtype),
        "mask": mask.astype(dtype),
        "rewards": rewards.astype(dtype),
        "groups": groups,
    }


@pytest.mark.parametrize("clip_eps_high", [None, 0.28])
@pytest.mark.parametrize(("dtype", "tol"), [(np.float64, 1e-6), (np.float32, 1e-5)])
def test_torch_and_jax_losses_and_gradients_agree(
    dtype: np.dtype, tol: float, clip_eps_high: float | None
) -> None:
    x = loss_inputs(dtype)
    kw = {"clip_eps": 0.2, "kl_coef": 0.1, "clip_eps_high": clip_eps_high}
    with jax_x64() if dtype == np.float64 else contextlib.nullcontext():
        adv_t = lt.group_advantages(torch.from_numpy(x["rewards"]), torch.from_numpy(x["groups"]))
        adv_j = lj.group_advantages(jnp.asarray(x["rewards"]), jnp.asarray(x["groups"]))
        assert max_diff(adv_t, adv_j) < tol
        assert np.all(adv_t.numpy()[6:] == 0.0) and np.all(np.asarray(adv_j)[6:] == 0.0)

        new_t = torch.tensor(x["new"], requires_grad=True)
        loss_t, m_t = lt.policy_loss(
            new_t,
            torch.from_numpy(x["old"]),
            adv_t,
            torch.from_numpy(x["mask"]),
            ref_logp=torch.from_numpy(x["ref"]),
            **kw,
        )
        loss_t.backward()

        def fn(new: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
            return lj.policy_loss(
                new,
                jnp.asarray(x["old"]),
                adv_j,
                jnp.asarray(x["mask"]),
                ref_logp=jnp.asarray(x["ref"]),
                **kw,
            )

        (loss_j, m_j), grad_j = jax.value_and_grad(fn, has_aux=True)(jnp.asarray(x["new"]))
        assert loss_j.dtype == jnp.dtype(dtype)

    assert 0.0 < float(m_t["clip_frac"]) < 1.0
    diffs = {"loss": max_diff(loss_t, loss_j), "grad": max_diff(new_t.grad, grad_j)}
    diffs.update({k: max_diff(m_t[k], m_j[k]) for k in ("pg_loss", "kl", "clip_frac", "ratio_mean")})
    print(f"loss/grad max abs diff ({np.dtype(dtype).name}): {diffs}")
    assert all(d < tol for d in diffs.values()), diffs
    assert float(m_t["kl"]) > 0.0
    assert abs(float(loss_t.detach()) - (float(m_t["pg_loss"]) + 0.1 * float(m_t["kl"]))) < tol
    # gradient is zero off the mask
    assert np.all(new_t.grad.numpy()[x["mask"] == 0] == 0.0)


def test_end_to_end_gradients_agree() -> None:
    cfg = SMALL
    model, params = make_pair(cfg, seed=11)
    rng = np.random.default_rng(5)
    ids, mask = completion_batch(rng, 6, cfg.max_len, cfg.vocab_size)
    with torch.no_grad():
        base = tm.sequence_logprobs(model, torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
    old = (base + rng.normal(0.0, 0.3, size=base.shape) * mask).astype(np.float32)
    ref = (base + rng.normal(0.0, 0.2, size=base.shape) * mask).astype(np.float32)
    rewards = np.array([1.0, 0.0, 0.5, 0.2, 0.2, 0.2], dtype=np.float32)
    groups = np.array([0, 0, 1, 1, 2, 2])
    kw = {"clip_eps": 0.2, "kl_coef": 0.1}

    adv_t = lt.group_advantages(torch.from_numpy(rewards), torch.from_numpy(groups))
    new_t = tm.sequence_logprobs(model, torch.from_numpy(ids), torch.from_numpy(mask))
    loss_t, m_t = lt.policy_loss(
        new_t, torch.from_numpy(old), adv_t, torch.from_numpy(mask), ref_logp=torch.from_numpy(ref), **kw
    )
    model.zero_grad()
    loss_t.backward()
    assert float(m_t["clip_frac"]) > 0.0

    adv_j = lj.group_advantages(jnp.asarray(rewards), jnp.asarray(groups))

    def fn(p: dict[str, jax.Array]) -> jax.Array:
        new = jm.sequence_logprobs(p, jnp.asarray(ids), jnp.asarray(mask), cfg)
        return lj.policy_loss(
            new, jnp.asarray(old), adv_j, jnp.asarray(mask), ref_logp=jnp.asarray(ref), **kw
        )[0]

    loss_j, grads = jax.value_and_grad(fn)(params)
    assert abs(float(loss_t.detach()) - float(loss_j)) < 1e-5
    named = dict(model.named_parameters())
    assert set(named) == set(grads)
    diffs = {name: max_diff(named[name].grad, grads[name]) for name in named}
    worst = max(diffs, key=diffs.__getitem__)
    loss_diff = abs(float(loss_t.detach()) - float(loss_j))
    print(f"end-to-end grad max abs diff: {diffs[worst]:.3g} ({worst}); loss diff {loss_diff:.3g}")
    assert diffs[worst] < 1e-4, (worst, diffs[worst])
    assert all(float(p.grad.abs().max()) > 0.0 for p in named.values())


# ---------------------------------------------------------------- generation


def rescore_torch(model: torch.nn.Module, prompt: list[int], completion: list[int]) -> np.ndarray:
    ids = torch.tensor([prompt + completion])
    mask = torch.zeros_like(ids, dtype=torch.float32)
    mask[0, len(prompt) :] = 1.0
    with torch.no_grad():
        return tm.sequence_logprobs(model, ids, mask)[0, len(prompt) :].numpy()


def rescore_jax(
    params: dict[str, jax.Array], cfg: ModelConfig, prompt: list[int], completion: list[int]
) -> np.ndarray:
    ids = np.zeros((1, cfg.max_len), dtype=np.int32)  # fixed shape: one compilation for every call
    ids[0, : len(prompt) + len(completion)] = prompt + completion
    mask = np.zeros_like(ids, dtype=np.float32)
    mask[0, len(prompt) : len(prompt) + len(completion)] = 1.0
    lp = jm.sequence_logprobs(params, jnp.asarray(ids), jnp.asarray(mask), cfg)
    return np.asarray(lp)[0, len(prompt) : len(prompt) + len(completion)]


PROMPT = [CharTokenizer.BOS, *CharTokenizer().encode("rev:abc=")]


def test_torch_generate_logprobs_match_rescoring() -> None:
    model, _ = make_pair(SMALL, seed=2)
    gen = torch.Generator().manual_seed(0)
    n_tokens = 0
    for _ in range(5):
        completion, logprobs = tm.generate(model, PROMPT, max_new_tokens=12, generator=gen)
        assert 1 <= len(completion) <= 12 and len(logprobs) == len(completion)
        assert max_diff(np.array(logprobs), rescore_torch(model, PROMPT, completion)) < 1e-5
        n_tokens += len(completion)
    assert n_tokens > 10
    # another temperature: logprobs are under softmax(logits / temperature)
    completion, logprobs = tm.generate(
        model, PROMPT, max_new_tokens=8, temperature=0.5, generator=gen, eos_id=-1
    )
    ids = torch.tensor([PROMPT + completion])
    with torch.no_grad():
        logits = model(ids)[0, len(PROMPT) - 1 : -1]
    expected = torch.log_softmax(logits / 0.5, -1).gather(-1, torch.tensor(completion)[:, None])[:, 0]
    assert max_diff(np.array(logprobs), expected) < 1e-5
    # the same generator seed gives the same sample
    a = tm.generate(model, PROMPT, max_new_tokens=10, generator=torch.Generator().manual_seed(9))
    b = tm.generate(model, PROMPT, max_new_tokens=10, generator=torch.Generator().manual_seed(9))
    assert a == b


def test_jax_generate_logprobs_match_rescoring() -> None:
    _, params = make_pair(SMALL, seed=2)
    rng = np.random.default_rng(0)
    for _ in range(5):
        completion, logprobs = jm.generate(params, PROMPT, cfg=SMALL, max_new_tokens=12, rng=rng)
        assert 1 <= len(completion) <= 12 and len(logprobs) == len(completion)
        assert max_diff(np.array(logprobs), rescore_jax(params, SMALL, PROMPT, completion)) < 1e-5
    a = jm.generate(params, PROMPT, cfg=SMALL, max_new_tokens=10, rng=np.random.default_rng(3))
    b = jm.generate(params, PROMPT, cfg=SMALL, max_new_tokens=10, rng=np.random.default_rng(3))
    assert a == b


def test_greedy_generation_is_deterministic_bounded_and_stops_at_eos() -> None:
    model, params = make_pair(SMALL, seed=6)
    room = SMALL.max_len - len(PROMPT)
    # eos_id=-1 is never emitted: generation runs until max_len
    full_t, lp_t = tm.generate(model, PROMPT, max_new_tokens=100, greedy=True, temperature=123.0, eos_id=-1)
    full_j, lp_j = jm.generate(params, PROMPT, cfg=SMALL, max_new_tokens=100, greedy=True, eos_id=-1)
    assert len(full_t) == room and len(PROMPT) + len(full_t) == SMALL.max_len
    assert (full_t, lp_t) == tm.generate(model, PROMPT, max_new_tokens=100, greedy=True, eos_id=-1)
    assert full_j == full_t  # the same weights give the same greedy tokens in both frameworks
    assert max_diff(np.array(lp_t), np.array(lp_j)) < 1e-5
    # greedy logprobs are under softmax(logits), whatever the temperature
    assert max_diff(np.array(lp_t), rescore_torch(model, PROMPT, full_t)) < 1e-5
    # with max_new_tokens below the room
    assert tm.generate(model, PROMPT, max_new_tokens=3, greedy=True, eos_id=-1)[0] == full_t[:3]
    assert jm.generate(params, PROMPT, cfg=SMALL, max_new_tokens=3, greedy=True, eos_id=-1)[0] == full_j[:3]
    # with eos_id set to a token the greedy path emits, generation stops right after it (EOS included)
    eos = full_t[3]
    stop = full_t.index(eos)
    assert tm.generate(model, PROMPT, max_new_tokens=100, greedy=True, eos_id=eos)[0] == full_t[: stop + 1]
    assert (
        jm.generate(params, PROMPT, cfg=SMALL, max_new_tokens=100, greedy=True, eos_id=eos)[0]
        == full_t[: stop + 1]
    )
    # a prompt that fills max_len leaves no room; a longer one is rejected
    long_prompt = [1] * SMALL.max_len
    assert tm.generate(model, long_prompt, max_new_tokens=5) == ([], [])
    assert jm.generate(params, long_prompt, cfg=SMALL, max_new_tokens=5) == ([], [])
    with pytest.raises(ValueError):
        tm.generate(model, [*long_prompt, 1], max_new_tokens=5)
    with pytest.raises(ValueError):
        jm.generate(params, [*long_prompt, 1], cfg=SMALL, max_new_tokens=5)
    with pytest.raises(ValueError):
        tm.generate(model, PROMPT, max_new_tokens=5, temperature=0.0)


def test_generate_restores_training_mode() -> None:
    model, _ = make_pair(SMALL)
    model.train()
    tm.generate(model, PROMPT, max_new_tokens=2, greedy=True)
    assert model.training


def test_select_device_and_autocast() -> None:
    assert tm.select_device("cpu") == torch.device("cpu")
    assert tm.select_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError):
        tm.select_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(DeviceUnavailableError, match="CUDA is not available"):
            tm.select_device("cuda")
    model, _ = make_pair(SMALL)
    with tm.autocast(torch.device("cpu")):
        assert model(torch.tensor([[1, 2, 3]])).dtype == torch.float32


# ---------------------------------------------------------------- tokenizer and config


def test_tokenizer_round_trip() -> None:
    tok = CharTokenizer()
    assert tok.vocab_size == 98 == ModelConfig().vocab_size
    printable = "".join(chr(c) for c in range(32, 127))
    ids = tok.encode(printable)
    assert ids == list(range(3, 98))
    assert tok.decode(ids) == printable
    assert tok.encode("héllo\n") == tok.encode("h?llo?")
    assert (
        tok.decode([tok.BOS, *tok.encode("ab"), tok.PAD, *tok.encode("c"), tok.EOS, *tok.encode("zz")])
        == "abc"
    )
    assert tok.decode([]) == "" and tok.encode("") == []
    with pytest.raises(ValueError):
        tok.decode([98])


def test_config_round_trip() -> None:
    cfg = ModelConfig(d_model=32, n_heads=2)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.to_dict()["max_len"] == 96
    assert ModelConfig.from_dict({}) == ModelConfig()
    with pytest.raises(ValueError):
        ModelConfig.from_dict({"d_model": 64, "dropout": 0.1})
    with pytest.raises(ValueError):
        ModelConfig(d_model=30, n_heads=4)
    assert hash(cfg) == hash(ModelConfig(d_model=32, n_heads=2))
