"""The closed loop, wired: rollouts -> log -> Beam -> Delta -> learner -> checkpoint -> rollouts.

Composition only: each phase calls its package (``rollouts``, ``pipelines``,
``learners``); the phases talk through the log, the tables and checkpoint
files, never directly.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judges.errors import AdmissionError
from judges.registry import build_judge
from judges.tasks import Task
from rollouts import Assignment, EpisodeOutcome, RolloutConfig, TaskPool, run_rollouts


def admitted_ids(lake: Path) -> set[str] | None:
    """Ids admitted in the ``tasks`` table (``None`` when there is no table yet)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        rows = DeltaTable(str(lake / "tasks")).to_pyarrow_table(columns=["task_id", "admitted"]).to_pylist()
    except TableNotFoundError:
        return None
    return {r["task_id"] for r in rows if r["admitted"]}


def rollout_config(
    settings: Any, policy_spec: str, *, workers: int, metadata: dict[str, Any] | None = None
) -> RolloutConfig:
    """A rollout configuration from the settings."""
    return RolloutConfig(
        bootstrap=settings.kafka_bootstrap,
        home=str(settings.home),
        topic=settings.topic_episodes,
        policy_factory="trajlake.policy_specs:make_policy",
        policy_spec=policy_spec,
        sandbox_backend=settings.sandbox_backend,
        sandbox_config=settings.sandbox_config(),
        workers=workers,
        metadata=metadata or {},
    )


def rollout(
    settings: Any,
    tasks: Sequence[Task],
    policy_spec: str,
    *,
    group_size: int,
    workers: int,
    tag: str,
    seed: int = 0,
    on_outcome: Callable[[EpisodeOutcome], None] | None = None,
) -> list[EpisodeOutcome]:
    """``group_size`` attempts at every task, over ``workers`` processes; groups are tagged ``tag``."""
    rng = random.Random(seed)
    assignments = []
    for t in tasks:
        group = f"{tag}:{t.id}:{rng.getrandbits(40):010x}"  # the G attempts at a task share one group
        assignments += [Assignment(str(t.root), group, a) for a in range(group_size)]
    cfg = rollout_config(settings, policy_spec, workers=workers, metadata={"tag": tag})
    return run_rollouts(cfg, assignments, on_outcome=on_outcome)


def fold_log(settings: Any) -> int:
    """Run the Beam pipeline over everything new in the log; return records folded."""
    from pipelines import PipelineConfig, run_once

    cfg = PipelineConfig(
        bootstrap=settings.kafka_bootstrap,
        lake_root=str(Path(settings.lake).resolve()),
        topics=(settings.topic_episodes, settings.topic_judgements),
        worker_log=str(Path(settings.home) / "logs" / "beam-workers.log"),
    )
    return sum(r.records for r in run_once(cfg))


@dataclass
class SplitMetrics:
    """Outcomes of a set of episodes, as the lake holds them."""

    episodes: int
    success_rate: float
    mean_reward: float
    infra_errors: int


def metrics_from_lake(lake: Path, episode_ids: set[str], judge_name: str) -> SplitMetrics:
    """Success rate and mean reward of these episodes, read from the ``episodes`` and ``rewards`` tables."""
    from deltalake import DeltaTable

    eps = [
        r
        for r in DeltaTable(str(lake / "episodes")).to_pyarrow_table().to_pylist()
        if r["episode_id"] in episode_ids
    ]
    rewards = {
        r["episode_id"]: r["score"]
        for r in DeltaTable(str(lake / "rewards")).to_pyarrow_table().to_pylist()
        if r["episode_id"] in episode_ids and r["judge_name"] == judge_name
    }
    learnable = [e for e in eps if e["status"] != "infra_error"]
    ok = sum(1 for e in learnable if e["status"] == "success")
    return SplitMetrics(
        episodes=len(eps),
        success_rate=ok / len(learnable) if learnable else 0.0,
        mean_reward=sum(rewards.values()) / len(rewards) if rewards else 0.0,
        infra_errors=len(eps) - len(learnable),
    )


def family_judge(tasks: Sequence[Task]) -> tuple[str, str]:
    """The judge name and version the tasks' rewards carry (they must share one).

    Raises:
        AdmissionError: there are no tasks, or they are judged by more than one judge version.
    """
    if not tasks:
        raise AdmissionError("no admitted tasks, so there is no judge to train against")
    judges = {(j.name, j.version) for j in (build_judge(t.spec.judge) for t in tasks)}
    if len(judges) != 1:
        raise AdmissionError(
            "the tasks are judged by several judges ("
            + ", ".join(f"{n} {v}" for n, v in sorted(judges))
            + "); train on one family, or give them one judge"
        )
    return judges.pop()


def load_pool(paths: Sequence[str | Path], lake: Path, **filters: Any) -> TaskPool:
    """Tasks under ``paths`` that the ``tasks`` table admits (all valid ones when it has no rows yet)."""
    return TaskPool(paths, admitted=admitted_ids(lake), **filters)
