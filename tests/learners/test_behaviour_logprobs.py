"""The learner scores a sample under the transform it was drawn with: a fresh on-policy batch has ratio 1."""

from __future__ import annotations

import numpy as np
import pytest

from learners.config import ModelConfig
from learners.dataset import Batches, Sample, episode_advantages
from learners.trainer import policy_lags, rollout_correction

CFG = ModelConfig(d_model=32, n_heads=2, n_layers=1, max_len=48)
PROMPTS = [[1, 5, 6, 7], [1, 9, 8], [1, 12, 13, 14, 15], [1, 20]]


def _samples(draw: object, temperature: float) -> list[Sample]:
    out = []
    for i, prompt in enumerate(PROMPTS * 3):
        ids, logprobs = draw(prompt, temperature)  # type: ignore[operator]
        out.append(
            Sample(
                episode_id=f"e{i}",
                group_id=f"g{i % 4}",
                task_id="t",
                policy_version="p",
                reward=float(i % 2),
                prompt_ids=prompt,
                completion_ids=ids,
                behaviour_logprobs=logprobs,
                temperature=temperature,
            )
        )
    return out


def _on_policy_check(samples: list[Sample], score: object) -> tuple[float, float]:
    """Max |learner - behaviour| log-prob over completion tokens, scored with and without the temperature."""
    batches = Batches(samples, batch_size=64, max_len=CFG.max_len)
    a = batches.arrays
    mask = a["completion_mask"]
    right = np.asarray(score(a["input_ids"], mask, a["temperature"]))  # type: ignore[operator]
    wrong = np.asarray(score(a["input_ids"], mask, None))  # type: ignore[operator]
    on = mask != 0
    return float(np.abs(right - a["old_logp"])[on].max()), float(np.abs(wrong - a["old_logp"])[on].max())


@pytest.mark.parametrize("temperature", [0.5, 1.0, 1.3])
def test_torch_on_policy_ratio_is_one_at_every_temperature(temperature: float) -> None:
    import torch

    from learners.losses_torch import policy_loss
    from learners.torch_model import TinyLM, generate, sequence_logprobs

    torch.manual_seed(0)
    model = TinyLM(CFG).eval()
    gen = torch.Generator().manual_seed(1)
    samples = _samples(
        lambda p, t: generate(model, p, max_new_tokens=12, temperature=t, generator=gen), temperature
    )

    def score(ids: np.ndarray, mask: np.ndarray, temp: np.ndarray | None) -> np.ndarray:
        with torch.no_grad():
            t = None if temp is None else torch.from_numpy(temp)
            return sequence_logprobs(model, torch.from_numpy(ids), torch.from_numpy(mask), t).numpy()

    right, wrong = _on_policy_check(samples, score)
    assert right < 1e-4
    if temperature != 1.0:
        assert wrong > 1e-2  # scoring at T=1 what was drawn at T is off: the test can fail
    b = Batches(samples, batch_size=64, max_len=CFG.max_len).arrays
    new = torch.from_numpy(score(b["input_ids"], b["completion_mask"], b["temperature"]))
    _, m = policy_loss(
        new, torch.from_numpy(b["old_logp"]), torch.from_numpy(b["advantages"]),
        torch.from_numpy(b["completion_mask"]), clip_eps=0.2,
    )  # fmt: skip
    assert float(m["clip_frac"]) == 0.0 and abs(float(m["ratio_mean"]) - 1.0) < 1e-4


@pytest.mark.parametrize("temperature", [0.5, 1.0, 1.3])
def test_jax_on_policy_ratio_is_one_at_every_temperature(temperature: float) -> None:
    import jax.numpy as jnp

    from learners.jax_model import generate, init_params, sequence_logprobs
    from learners.losses_jax import policy_loss

    params = init_params(CFG, seed=0)
    rng = np.random.default_rng(1)
    samples = _samples(
        lambda p, t: generate(params, p, cfg=CFG, max_new_tokens=12, temperature=t, rng=rng), temperature
    )

    def score(ids: np.ndarray, mask: np.ndarray, temp: np.ndarray | None) -> np.ndarray:
        return np.asarray(sequence_logprobs(params, ids, mask, CFG, temp))

    right, wrong = _on_policy_check(samples, score)
    assert right < 1e-4
    if temperature != 1.0:
        assert wrong > 1e-2
    b = Batches(samples, batch_size=64, max_len=CFG.max_len).arrays
    new = jnp.asarray(score(b["input_ids"], b["completion_mask"], b["temperature"]))
    _, m = policy_loss(new, b["old_logp"], b["advantages"], b["completion_mask"], clip_eps=0.2)
    assert float(m["clip_frac"]) == 0.0 and abs(float(m["ratio_mean"]) - 1.0) < 1e-4


def test_rollout_correction_is_one_when_consistent_and_truncated_when_not() -> None:
    rng = np.random.default_rng(0)
    behaviour = -rng.random((4, 10)).astype(np.float32)
    mask = np.ones((4, 10), dtype=np.float32)
    mask[:, :3] = 0
    w, m = rollout_correction(behaviour.copy(), behaviour, mask, cap=2.0)
    assert np.all(w[mask != 0] == 1.0) and m["logp_mismatch_max"] == 0.0 and m["tis_truncated_frac"] == 0.0
    prox = behaviour + np.where(rng.random((4, 10)) < 0.3, 1.5, 0.0).astype(np.float32)  # some tokens far off
    w, m = rollout_correction(prox, behaviour, mask, cap=2.0)
    assert w.max() == 2.0 and 0 < m["tis_truncated_frac"] < 1 and m["logp_mismatch_max"] == pytest.approx(1.5)
    assert np.all(w[mask == 0] == 0.0)


def test_group_statistics_count_each_episode_once() -> None:
    def s(eid: str, reward: float) -> Sample:
        return Sample(eid, "g", "t", "p", reward, [1], [3], [-0.1])

    # episode a has three model calls, b one: per episode the group is {1, 0}, so A = +1 / -1
    adv = episode_advantages([s("a", 1.0), s("a", 1.0), s("a", 1.0), s("b", 0.0)])
    assert adv == pytest.approx([1.0, 1.0, 1.0, -1.0], abs=1e-5)


def test_policy_lag_counts_versions_back_along_the_lineage() -> None:
    lineage = ["ck-3", "ck-2", "ck-1"]  # newest (the parent of this step) first
    assert policy_lags(["ck-3", "ck-1", "ck-2", "scripted"], lineage) == [0, 2, 1, None]
