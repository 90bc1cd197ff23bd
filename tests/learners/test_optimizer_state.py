"""Adam's state is one optimiser across learner steps; constant-reward groups are left out and counted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from learners.checkpoints import Lineage, load_optimizer_state, save_checkpoint
from learners.config import ModelConfig
from learners.dataset import Sample, SampleSet
from learners.tokenizer import CharTokenizer
from learners.trainer import TrainArgs, _drop_zero_advantage, update

CFG = ModelConfig(d_model=32, n_layers=1, n_heads=2, d_ff=64, max_len=48)


def _samples(rewards: dict[str, list[float]]) -> list[Sample]:
    tok = CharTokenizer()
    rng = np.random.default_rng(0)
    out = []
    for g, rs in rewards.items():
        for i, r in enumerate(rs):
            completion = [int(x) for x in rng.integers(4, 60, size=5)] + [tok.EOS]
            out.append(
                Sample(
                    episode_id=f"{g}-{i}", group_id=g, task_id=g, policy_version="p", reward=r,
                    prompt_ids=[tok.BOS, *tok.encode("Write abc.\n")], completion_ids=completion,
                    behaviour_logprobs=[-4.0] * len(completion),
                )
            )  # fmt: skip
    return out


def _weights(backend: str) -> dict[str, np.ndarray]:
    import torch

    from learners.torch_model import TinyLM

    torch.manual_seed(0)
    return {k: v.numpy() for k, v in TinyLM(CFG).state_dict().items()}


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_the_optimiser_state_carries_over_and_changes_the_step(backend: str, tmp_path: Path) -> None:
    samples = _samples({"a": [0.0, 1.0, 0.5, 0.2], "b": [1.0, 0.0, 0.0, 0.3]})
    args = TrainArgs(lake="", checkpoint_root="", judge_name="j", backend=backend, epochs=2, batch_size=4,
                     lr=1e-2, device="cpu")  # fmt: skip
    w0 = _weights(backend)
    w1, rows, state = update(CFG, w0, samples, args)
    assert state.step == len(rows) == 4
    assert set(state.m) == set(state.v) <= set(w0) and all(np.any(state.v[k] > 0) for k in state.v)
    # saved beside the weights, read back exactly
    info = save_checkpoint(tmp_path, policy_id="t", backend=backend, config=CFG, weights=w1,
                           lineage=Lineage("", {}, None, None, 0), optimizer=state)  # fmt: skip
    back = load_optimizer_state(info.path)
    assert back is not None and back.step == 4
    assert all(
        np.array_equal(back.m[k], state.m[k]) and np.array_equal(back.v[k], state.v[k]) for k in state.m
    )
    # the next step resumes it (the step count goes on) and differs from a step with fresh moments
    w_resumed, _, after = update(CFG, w1, samples, args, opt_state=back)
    w_fresh, _, fresh = update(CFG, w1, samples, args)
    assert after.step == 8 and fresh.step == 4
    assert any(not np.allclose(w_resumed[k], w_fresh[k]) for k in w1)


def test_the_other_backend_reads_the_state() -> None:
    samples = _samples({"a": [0.0, 1.0, 0.5, 0.2]})
    torch_args = TrainArgs(lake="", checkpoint_root="", judge_name="j", epochs=1, batch_size=4, device="cpu")
    w1, _, state = update(CFG, _weights("torch"), samples, torch_args)
    jax_args = TrainArgs(lake="", checkpoint_root="", judge_name="j", backend="jax", epochs=1, batch_size=4)
    _, _, after = update(CFG, w1, samples, jax_args, opt_state=state)
    assert after.step == state.step + 1


def test_a_state_of_other_parameters_is_a_clear_error() -> None:
    from learners.errors import LearnerConfigError

    samples = _samples({"a": [0.0, 1.0]})
    args = TrainArgs(lake="", checkpoint_root="", judge_name="j", epochs=1, batch_size=2, device="cpu")
    _, _, state = update(CFG, _weights("torch"), samples, args)
    big = ModelConfig(d_model=64, n_layers=1, n_heads=2, d_ff=64, max_len=48)
    import torch

    from learners.torch_model import TinyLM

    other = {k: v.numpy() for k, v in TinyLM(big).state_dict().items()}
    with pytest.raises(LearnerConfigError, match="resume_optimizer=False"):
        update(big, other, samples, args, opt_state=state)
    del torch


def test_constant_reward_groups_are_dropped_and_counted() -> None:
    samples = _samples({"flat": [1.0, 1.0, 1.0], "varied": [1.0, 0.0, 0.5]})
    data = SampleSet.from_samples(samples, judge_name="j")
    groups, dropped = _drop_zero_advantage(data)
    assert (groups, dropped) == (2, 1)
    assert {s.group_id for s in data.samples} == {"varied"} and data.episodes == 3
    assert data.skipped["zero_advantage_group"] == 3


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_the_learning_rate_warms_up_across_learner_steps(backend: str) -> None:
    samples = _samples({"a": [0.0, 1.0, 0.5, 0.2], "b": [1.0, 0.0, 0.0, 0.3]})
    args = TrainArgs(lake="", checkpoint_root="", judge_name="j", backend=backend, epochs=2, batch_size=4,
                     lr=1e-2, lr_warmup_steps=6, device="cpu")  # fmt: skip
    w, rows, state = update(CFG, _weights(backend), samples, args)
    assert [r["lr"] for r in rows] == pytest.approx([1e-2 * k / 6 for k in (1, 2, 3, 4)])
    _, rows, _ = update(CFG, w, samples, args, opt_state=state)  # the next iteration goes on from step 4
    assert [r["lr"] for r in rows] == pytest.approx([1e-2 * 5 / 6, 1e-2, 1e-2, 1e-2])
    # the first steps are smaller than without the warm-up
    fresh, _, _ = update(CFG, _weights(backend), samples, args)
    full, _, _ = update(CFG, _weights(backend), samples, TrainArgs(**{**args.__dict__, "lr_warmup_steps": 0}))
    w0 = _weights(backend)
    moved = {
        name: float(sum(np.abs(x[k] - w0[k]).sum() for k in w0))
        for name, x in (("warm", fresh), ("full", full))
    }
    assert moved["warm"] < 0.6 * moved["full"]
