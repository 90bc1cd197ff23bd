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


def test_a_multi_turn_sequence_is_on_policy_on_its_model_tokens_and_ignores_the_tool_tokens() -> None:
    """Two calls in one sequence: the tool's tokens between them are context, never scored or trained."""
    import torch

    from learners.losses_torch import policy_loss
    from learners.torch_model import TinyLM, generate, sequence_logprobs

    torch.manual_seed(0)
    model = TinyLM(CFG).eval()
    gen = torch.Generator().manual_seed(3)
    samples = []
    for i, prompt in enumerate(PROMPTS * 2):
        first, lp1 = generate(model, prompt, max_new_tokens=6, temperature=0.8, generator=gen, eos_id=-1)
        tool = [30 + i, 31, 32]  # what the environment answered, as the next prompt's tokens
        second, lp2 = generate(model, prompt + first + tool, max_new_tokens=6, temperature=0.8,
                               generator=gen, eos_id=-1)  # fmt: skip
        samples.append(
            Sample(
                episode_id=f"e{i}", group_id=f"g{i % 2}", task_id="t", policy_version="p",
                reward=float(i % 3), prompt_ids=prompt, completion_ids=first + tool + second,
                behaviour_logprobs=lp1 + [0.0] * len(tool) + lp2, temperature=0.8,
                completion_mask=[1] * len(first) + [0] * len(tool) + [1] * len(second),
            )
        )  # fmt: skip
    b = Batches(samples, batch_size=64, max_len=CFG.max_len).arrays
    assert b["completion_mask"].sum() == sum(len(s.completion_ids) - 3 for s in samples)
    with torch.no_grad():
        ids, temps = torch.from_numpy(b["input_ids"]), torch.from_numpy(b["temperature"])
        new = sequence_logprobs(model, ids, torch.from_numpy(b["completion_mask"]), temps)
        everything = torch.from_numpy((b["input_ids"] != 0).astype(np.float32))
        everything[:, 0] = 0
        unmasked = sequence_logprobs(model, ids, everything, temps)
    on = b["completion_mask"] != 0
    assert np.abs(new.numpy() - b["old_logp"])[on].max() < 1e-4
    # scored as if the tool's tokens were the policy's, the same batch is far off: the mask matters
    tool_pos = (everything.numpy() != 0) & ~on & (np.arange(b["input_ids"].shape[1]) >= 5)
    assert np.abs(unmasked.numpy() - b["old_logp"])[tool_pos].max() > 1.0
    _, m = policy_loss(
        new, torch.from_numpy(b["old_logp"]), torch.from_numpy(b["advantages"]),
        torch.from_numpy(b["completion_mask"]), clip_eps=0.2,
    )  # fmt: skip
    assert float(m["clip_frac"]) == 0.0 and abs(float(m["ratio_mean"]) - 1.0) < 1e-4


def test_a_sample_whose_log_probs_do_not_match_its_tokens_is_refused() -> None:
    from learners.errors import LearnerConfigError

    ok = Sample("a", "g", "t", "p", 1.0, [1], [3, 4], [-0.1, -0.2])
    short = Sample("b", "g", "t", "p", 0.0, [1], [3, 4, 5], [-0.1, -0.2])
    with pytest.raises(LearnerConfigError, match="3 completion tokens but 2 log-probs"):
        Batches([ok, short], batch_size=2, max_len=CFG.max_len)


def test_max_token_ids_per_row() -> None:
    from learners.dataset import max_token_ids, samples_table

    rows = [
        Sample("a", "g", "t", "p", 1.0, [1, 90], [3], [-0.1]),
        Sample("b", "g", "t", "p", 0.0, [1], [300], [-1.0]),
    ]
    assert max_token_ids(samples_table(rows)).tolist() == [90, 300]


def test_batched_greedy_decoding_gives_what_one_prompt_at_a_time_gives() -> None:
    import torch

    from learners.torch_model import TinyLM, generate, greedy_batch

    torch.manual_seed(5)
    model = TinyLM(CFG).eval()
    prompts = [*PROMPTS, [1, 40, 41, 42], [1, 7], [1, 12, 13, 14, 15]]
    eos = generate(model, prompts[0], max_new_tokens=10, greedy=True, eos_id=-1)[0][3]  # one row ends early
    batched = greedy_batch(model, prompts, max_new_tokens=10, eos_id=eos)
    single = [generate(model, p, max_new_tokens=10, greedy=True, eos_id=eos)[0] for p in prompts]
    assert batched == single and any(len(x) < 10 for x in single)
