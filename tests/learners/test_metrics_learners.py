"""The learner's Prometheus metrics move with real optimiser steps and real dataset exclusions.

Counters and histograms accumulate over a session, so each assertion is on a difference from the
value read before.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from prometheus_client import REGISTRY

from learners import torch_model as tm
from learners.config import ModelConfig
from learners.dataset import Sample, SampleSet
from learners.trainer import TrainArgs, update


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def samples(n_groups: int, seed: int = 0) -> list[Sample]:
    """Groups of four sampled completions with behaviour log-probs, one policy version per group."""
    rng = np.random.default_rng(seed)
    out = []
    for g in range(n_groups):
        prompt = [1, *rng.integers(3, 90, size=6).tolist()]
        for k in range(4):
            comp = rng.integers(3, 90, size=int(rng.integers(2, 8))).tolist()
            lp = (-rng.random(len(comp))).tolist()
            out.append(Sample(f"e{g}-{k}", f"g{g}", f"t{g}", f"v{g}", float(rng.random()), prompt, comp, lp))
    return out


def test_every_optimiser_step_is_timed_and_sets_the_logprob_mismatch() -> None:
    """(The JAX learner's loop is timed by the same wrapper; its compiles make it too slow to run here.)"""
    cfg = ModelConfig(d_model=32, n_layers=1, n_heads=2, d_ff=64, max_len=24)
    args = TrainArgs(lake="", checkpoint_root="", judge_name="j", backend="torch", device="cpu",
                     batch_size=4, epochs=2)  # fmt: skip
    torch.manual_seed(0)
    w0 = {k: v.numpy() for k, v in tm.TinyLM(cfg).state_dict().items()}
    steps, waits = (
        value("trajlake_learner_step_seconds_count"),
        value("trajlake_learner_data_wait_seconds_count"),
    )
    _, rows, _ = update(cfg, w0, SampleSet.from_samples(samples(3)), args)
    assert len(rows) == 6  # 12 samples, minibatches of 4, two epochs
    assert value("trajlake_learner_step_seconds_count") - steps == len(rows)
    assert value("trajlake_learner_data_wait_seconds_count") - waits == len(rows)
    # the behaviour log-probs are random, so the learner's differ: the gauge is the last step's
    assert rows[-1]["logp_mismatch_mean"] > 0
    assert value("trajlake_learner_logprob_mismatch") == pytest.approx(rows[-1]["logp_mismatch_mean"])


def test_dataset_exclusions_are_counted_by_reason_with_the_groups_they_break() -> None:
    data = SampleSet.from_samples(samples(3))
    lag = value("trajlake_learner_excluded_samples_total", reason="policy_lag")
    partial = value("trajlake_learner_excluded_samples_total", reason="partial_group")
    # one sample of group 0 is too stale: it goes, and the three others of its group with it
    dropped = data.keep([i != 1 for i in range(len(data))], "policy_lag")
    assert dropped == 1 and len(data) == 8 and data.skipped == {"policy_lag": 1, "partial_group": 3}
    assert value("trajlake_learner_excluded_samples_total", reason="policy_lag") - lag == 1
    assert value("trajlake_learner_excluded_samples_total", reason="partial_group") - partial == 3
    assert data.keep([True] * len(data), "policy_lag") == 0
    assert value("trajlake_learner_excluded_samples_total", reason="policy_lag") - lag == 1
