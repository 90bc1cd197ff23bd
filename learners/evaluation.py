"""How a set of episodes went, as the lake holds them: the numbers a learning curve plots."""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
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
    return _wilson_of_rate(successes / n, n, z)


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


# ------------------------------------------------------------------ pass@k over tasks


@dataclass(frozen=True)
class Estimate:
    """A pass rate (or a difference of two) with its 95% interval, over ``tasks`` tasks and ``n`` samples."""

    value: float
    low: float
    high: float
    n: int
    tasks: int

    def as_dict(self) -> dict[str, float | int]:
        """The numbers, rounded for a report."""
        return {"value": round(self.value, 6), "ci_low": round(self.low, 6), "ci_high": round(self.high, 6),
                "n": self.n, "tasks": self.tasks}  # fmt: skip


def pass_at_k_of_task(passes: int, samples: int, k: int) -> float:
    """The unbiased pass@k of one task from ``passes`` of ``samples``: ``1 - C(n-c, k) / C(n, k)``.

    Raises:
        ValueError: fewer samples than ``k``, or passes outside ``[0, samples]``.
    """
    if not 0 <= passes <= samples or samples < k or k < 1:
        raise ValueError(
            f"pass@{k} needs at least {k} samples and 0 <= passes <= samples (got {passes}/{samples})"
        )
    if samples - passes < k:
        return 1.0
    fail_all = 1.0
    for i in range(samples - passes + 1, samples + 1):  # prod (1 - k/i): stable, no big binomials
        fail_all *= 1.0 - k / i
    return 1.0 - fail_all


def pass_at_k(
    per_task: Sequence[tuple[int, int]], k: int = 1, *, z: float = 1.96, resamples: int = 2000, seed: int = 0
) -> Estimate:
    """pass@k averaged over tasks (``per_task``: ``(passes, samples)`` each), with a 95% interval.

    With one sample per task the samples are independent and the interval is Wilson's. With
    several, the samples of one task are not independent (a task is easy or hard), so the interval
    is a percentile bootstrap over tasks, widened to hold the Wilson interval of the estimate with
    the number of tasks as the sample size: never narrower than one Bernoulli trial per task, never
    the zero-width interval a bootstrap gives when every task passes.
    Tasks with fewer than ``k`` samples are left out.
    """
    import numpy as np

    rows = [(c, m) for c, m in per_task if m >= k]
    n = sum(m for _, m in rows)
    if not rows:
        return Estimate(0.0, 0.0, 1.0, 0, 0)
    values = np.array([pass_at_k_of_task(c, m, k) for c, m in rows])
    value = float(values.mean())
    if all(m == 1 for _, m in rows):
        low, high = wilson(sum(c for c, _ in rows), len(rows), z)
        return Estimate(value, low, high, n, len(rows))
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(axis=1)
    b_low, b_high = (float(x) for x in np.quantile(means, [0.025, 0.975]))
    w_low, w_high = _wilson_of_rate(value, len(rows), z)
    return Estimate(value, min(b_low, w_low), max(b_high, w_high), n, len(rows))


def _wilson_of_rate(p: float, n: int, z: float) -> tuple[float, float]:
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def paired_difference(
    base: Mapping[str, tuple[int, int]],
    other: Mapping[str, tuple[int, int]],
    *,
    resamples: int = 2000,
    seed: int = 0,
) -> Estimate:
    """``other - base`` pass@1 over the tasks both were run on, paired by task, with a 95% interval.

    The interval is a percentile bootstrap of the mean per-task difference over tasks (pairing
    removes the tasks' difficulty from the noise: the point of running both on the same tasks),
    widened to hold Newcombe's interval for two independent rates with the number of tasks as each
    sample size, so that a few tasks that all moved the same way do not make a zero-width interval.
    """
    import numpy as np

    common = sorted(t for t in base.keys() & other.keys() if base[t][1] and other[t][1])
    if not common:
        return Estimate(0.0, -1.0, 1.0, 0, 0)
    d = np.array([other[t][0] / other[t][1] - base[t][0] / base[t][1] for t in common])
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(resamples, len(d)))].mean(axis=1)
    low, high = (float(x) for x in np.quantile(means, [0.025, 0.975]))
    m = len(common)
    p_base = sum(base[t][0] / base[t][1] for t in common)
    p_other = sum(other[t][0] / other[t][1] for t in common)
    _, n_low, n_high = difference_interval(p_base, m, p_other, m)  # type: ignore[arg-type]
    n = sum(base[t][1] + other[t][1] for t in common)
    return Estimate(float(d.mean()), min(low, n_low), max(high, n_high), n, m)
