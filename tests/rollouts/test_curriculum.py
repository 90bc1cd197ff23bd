"""The curriculum: pass-rate history -> difficulty pools -> weighted, budgeted draws; constant groups."""

from __future__ import annotations

import datetime as dt
import random
import shutil
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest

from judges.tasks import load_task
from rollouts.curriculum import (
    CurriculumConfig,
    CurriculumError,
    CurriculumSampler,
    TaskStats,
    constant_groups,
    task_stats,
)

TASKS = Path(__file__).resolve().parents[2] / "tasks"
T0 = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def _tables(rows: list[tuple[str, str, str, str, str]]) -> tuple[pa.Table, pa.Table]:
    """(episode, task, policy version, verdict, source) -> episodes and rewards tables."""
    eps = pa.Table.from_pylist([
        {"episode_id": e, "task_id": t, "policy_version": v, "started_at": T0 + dt.timedelta(minutes=i),
         "duration_s": 10.0 + i, "source": src, "status": "success" if verdict == "pass" else "failure"}
        for i, (e, t, v, verdict, src) in enumerate(rows)
    ])  # fmt: skip
    rewards = pa.Table.from_pylist([{"episode_id": e, "verdict": verdict, "source": "online"}
                                    for e, _, _, verdict, _ in rows])  # fmt: skip
    return eps, rewards


def test_the_rate_is_over_the_latest_policy_versions_and_leaves_evaluations_out() -> None:
    rows = [(f"a{i}", "a", "1", "fail", "rollout") for i in range(4)]  # old: version 1 failed
    rows += [(f"b{i}", "a", "2", "pass", "rollout") for i in range(2)]  # then version 2 passed
    rows += [("c0", "a", "2", "fail", "eval")]  # an evaluation: not the curriculum's business
    stats = task_stats(*_tables(rows), recent_versions=1)
    assert (stats["a"].passes, stats["a"].episodes, stats["a"].versions) == (2, 2, ("2",))
    assert task_stats(*_tables(rows), recent_versions=2)["a"].rate == pytest.approx(2 / 6)


def _pyfix(tmp_path: Path, *ids: str) -> list:  # type: ignore[type-arg]
    root = tmp_path / "pyfix"
    root.mkdir(exist_ok=True)
    shutil.copy(TASKS / "pyfix" / "family.yaml", root / "family.yaml")
    for i in ids:
        shutil.copytree(TASKS / "pyfix" / i, root / i)
    return [load_task(root / i) for i in ids]


def test_pools_weights_and_budget(tmp_path: Path) -> None:
    tasks = _pyfix(
        tmp_path, "pyfix-004", "pyfix-005", "pyfix-010", "pyfix-013"
    )  # tiers easy, medium, hard, easy
    tiers = {t.id: t.spec.tier for t in tasks}
    assert [tiers[t.id] for t in tasks] == ["easy", "medium", "hard", "easy"]
    stats = {"pyfix-004": TaskStats(4, 4, ("1",), 5.0), "pyfix-005": TaskStats(0, 4, ("1",), 50.0),
             "pyfix-010": TaskStats(2, 4, ("1",), 20.0)}  # fmt: skip
    sampler = CurriculumSampler(tasks, stats)
    pools = {t.id: sampler.classify(t).pool for t in tasks}
    assert pools == {"pyfix-004": "easy", "pyfix-005": "hard", "pyfix-010": "medium", "pyfix-013": "unseen"}
    assert "pass rate 0.00 over 4 episodes" in sampler.classify(tasks[1]).reason
    # weights: over many draws of one task, the hard one comes first most often (2 against 0.5, 1, 1.5)
    firsts = [sampler.draw(1, random.Random(i))[0].task.id for i in range(400)]
    assert firsts.count("pyfix-005") > firsts.count("pyfix-013") > firsts.count("pyfix-004")
    assert len({c.task.id for c in sampler.draw(10, random.Random(0))}) == 4  # distinct, all there are
    # a budget takes cheaper tiers first and stops where the next group would not fit
    budgeted = sampler.draw(4, random.Random(0), budget_s=200.0, group_size=2)
    order = ["easy", "medium", "hard"]
    assert [order.index(tiers[c.task.id]) for c in budgeted] == sorted(
        order.index(tiers[c.task.id]) for c in budgeted
    )
    assert sum(c.cost_s * 2 for c in budgeted) <= 200.0
    assert sampler.draw(4, random.Random(0), budget_s=1.0, group_size=2) == []


def test_constant_groups_and_config_files(tmp_path: Path) -> None:
    o = lambda g, s: SimpleNamespace(group_id=g, score=s)  # noqa: E731
    outcomes = [
        o("g1", 1.0),
        o("g1", 1.0),
        o("g2", 1.0),
        o("g2", 0.0),
        o("g3", None),
        o("g3", None),
        o("g4", 1.0),
    ]
    assert constant_groups(outcomes) == ["g1"]  # g3 was never scored, g4 is alone
    good = tmp_path / "c.yaml"
    good.write_text("pools: {hard: {max: 0.3, weight: 3}, rest: {min: 0.3, weight: 1}}\nmax_refills: 2\n")
    cfg = CurriculumConfig.load(good)
    assert [p.name for p in cfg.pools] == ["hard", "rest"] and cfg.max_refills == 2
    for text, says in [("pools: {x: {min: 0.9, max: 0.1, weight: 1}}", "min <= max"),
                       ("pools: {x: {max: 0.5}}", "needs a weight"), ("budget: 3", "has only")]:  # fmt: skip
        good.write_text(text)
        with pytest.raises(CurriculumError, match=says):
            CurriculumConfig.load(good)
