"""How a set of episodes went, as the lake holds them: the numbers a learning curve plots."""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc

from lake import Lake


@dataclass
class SplitMetrics:
    """Outcomes of a set of episodes (a held-out split, one iteration's training groups)."""

    episodes: int
    success_rate: float
    """Successes over the episodes that were not infrastructure errors."""
    mean_reward: float
    """Mean score of the named judge over the episodes it scored."""
    infra_errors: int


def split_metrics(lake: str | Path, episode_ids: Set[str], judge_name: str) -> SplitMetrics:
    """Success rate and mean reward of these episodes, from the ``episodes`` and ``rewards`` tables."""
    lk = Lake(lake)
    ids = sorted(episode_ids)
    eps = lk.read("episodes").select(["episode_id", "status"])
    eps = eps.filter(pc.is_in(eps["episode_id"], value_set=_ids(ids))).to_pylist()
    rewards = lk.read("rewards").select(["episode_id", "judge_name", "score"])
    rewards = rewards.filter(
        pc.and_(
            pc.is_in(rewards["episode_id"], value_set=_ids(ids)), pc.equal(rewards["judge_name"], judge_name)
        )
    )
    scores = {r["episode_id"]: r["score"] for r in rewards.to_pylist()}
    learnable = [e for e in eps if e["status"] != "infra_error"]
    ok = sum(1 for e in learnable if e["status"] == "success")
    return SplitMetrics(
        episodes=len(eps),
        success_rate=ok / len(learnable) if learnable else 0.0,
        mean_reward=sum(scores.values()) / len(scores) if scores else 0.0,
        infra_errors=len(eps) - len(learnable),
    )


def _ids(ids: list[str]) -> object:
    import pyarrow as pa

    return pa.array(ids, type=pa.string())
