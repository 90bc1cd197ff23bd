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
    successes: int = 0
    """Successful episodes (the numerator of ``success_rate``)."""
    judged: int = 0
    """Episodes that were not infrastructure errors (its denominator)."""

    def interval(self, z: float = 1.96) -> tuple[float, float]:
        """The Wilson score interval of the success rate (95% by default)."""
        return wilson(self.successes, self.judged, z)


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (``(0, 1)`` when ``n == 0``)."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def difference_interval(k1: int, n1: int, k2: int, n2: int, z: float = 1.96) -> tuple[float, float, float]:
    """``p2 - p1`` with Newcombe's hybrid score interval (from the two Wilson intervals; his method 10).

    Returns:
        ``(difference, low, high)``.
    """
    p1 = k1 / n1 if n1 else 0.0
    p2 = k2 / n2 if n2 else 0.0
    l1, u1 = wilson(k1, n1, z)
    l2, u2 = wilson(k2, n2, z)
    d = p2 - p1
    low = d - ((p2 - l2) ** 2 + (u1 - p1) ** 2) ** 0.5
    high = d + ((u2 - p2) ** 2 + (p1 - l1) ** 2) ** 0.5
    return d, low, high


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
        successes=ok,
        judged=len(learnable),
    )


def _ids(ids: list[str]) -> object:
    import pyarrow as pa

    return pa.array(ids, type=pa.string())
