"""Difficulty-aware task scheduling: spend rollouts where they teach most, and say why.

A task's recent pass rate (its online verdicts over the last few policy versions
that ran it, from the ``episodes`` and ``rewards`` tables) puts it in a
difficulty pool; pools are data (:class:`CurriculumConfig`, YAML): a pass-rate
range and a sampling weight each, tasks with too few episodes in ``unseen``.
Tasks are drawn by their pool's weight; under a time budget, cheaper tiers are
drawn first (a task's cost is its median episode time, else its tier's
default). A group whose rewards all come out equal teaches a group-relative
learner nothing: the rollout replaces it with a fresh task, at most
``max_refills`` times in all (counted: never an endless loop). Every choice is
recorded on ``episode_started`` (``metadata.curriculum``: pool, pass rate,
reason, round, the group it replaces), so the curriculum can be replayed from
the log.
"""

from __future__ import annotations

import random
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from judges.tasks import Task
from rollouts.sampler import Assignment, group_id
from schemas.errors import TrajlakeError

TIER_ORDER = ("easy", "medium", "hard")
TIER_COST_S = {"easy": 30.0, "medium": 60.0, "hard": 120.0}
"""A task's assumed seconds per episode before any of its episodes ran."""


class CurriculumError(TrajlakeError):
    """A curriculum file that is not valid."""


@dataclass(frozen=True)
class Pool:
    """One difficulty pool: tasks whose recent pass rate is in ``[min_rate, max_rate]``."""

    name: str
    weight: float
    min_rate: float = 0.0
    max_rate: float = 1.0


@dataclass(frozen=True)
class CurriculumConfig:
    """The pools and the bounds of a curriculum (data: :meth:`load`)."""

    pools: tuple[Pool, ...] = (
        Pool("hard", 2.0, 0.0, 0.25),
        Pool("medium", 1.0, 0.25, 0.75),
        Pool("easy", 0.5, 0.75, 1.0),
    )
    unseen_weight: float = 1.5
    """Weight of tasks with fewer than ``min_episodes`` recent episodes."""
    min_episodes: int = 2
    recent_versions: int = 3
    """How many of the latest policy versions that ran a task its rate is over."""
    max_refills: int = 4
    """Constant-reward groups replaced, at most, per rollout."""

    @classmethod
    def load(cls, path: Path | None) -> CurriculumConfig:
        """The configuration of a YAML file (``None``: the defaults).

        Raises:
            CurriculumError: not YAML, unknown keys, or a pool without a valid range and weight.
        """
        if path is None:
            return cls()
        try:
            doc = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise CurriculumError(f"cannot read the curriculum {path}: {exc}") from exc
        known = {"pools", "unseen_weight", "min_episodes", "recent_versions", "max_refills"}
        if not isinstance(doc, dict) or set(doc) - known:
            raise CurriculumError(f"{path}: a curriculum has only {sorted(known)}")
        pools = []
        for name, p in (doc.get("pools") or {}).items():
            try:
                pool = Pool(str(name), float(p["weight"]), float(p.get("min", 0.0)), float(p.get("max", 1.0)))
            except (KeyError, TypeError, ValueError) as exc:
                raise CurriculumError(
                    f"{path}: pool {name!r} needs a weight (and min/max rates): {exc}"
                ) from exc
            if pool.weight < 0 or not 0 <= pool.min_rate <= pool.max_rate <= 1:
                raise CurriculumError(f"{path}: pool {name!r}: 0 <= min <= max <= 1 and weight >= 0")
            pools.append(pool)
        base = cls()
        try:
            return cls(
                pools=tuple(pools) or base.pools,
                unseen_weight=float(doc.get("unseen_weight", base.unseen_weight)),
                min_episodes=int(doc.get("min_episodes", base.min_episodes)),
                recent_versions=int(doc.get("recent_versions", base.recent_versions)),
                max_refills=int(doc.get("max_refills", base.max_refills)),
            )
        except (TypeError, ValueError) as exc:
            raise CurriculumError(f"{path}: {exc}") from exc


@dataclass(frozen=True)
class TaskStats:
    """A task's recent record."""

    passes: int = 0
    episodes: int = 0
    versions: tuple[str, ...] = ()
    """The policy versions the rate is over, oldest first."""
    median_s: float | None = None

    @property
    def rate(self) -> float | None:
        """Passes over episodes (``None``: no episode)."""
        return self.passes / self.episodes if self.episodes else None


def task_stats(episodes: Any, rewards: Any, *, recent_versions: int = 3) -> dict[str, TaskStats]:
    """Per task: its online pass rate over the latest ``recent_versions`` policy versions that ran it.

    ``episodes`` and ``rewards`` are the tables (Arrow); evaluation episodes are left out.
    """
    rows = rewards.select(["episode_id", "verdict", "source"]).to_pylist()
    online = {r["episode_id"]: r["verdict"] for r in rows if r["source"] == "online"}
    cols = ["episode_id", "task_id", "policy_version", "started_at", "duration_s", "source", "status"]
    have = [c for c in cols if c in episodes.column_names]
    runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in episodes.select(have).to_pylist():
        if (
            e.get("source") == "eval"
            or e["episode_id"] not in online
            or e["status"] in ("infra_error", "aborted")
        ):
            continue
        runs[e["task_id"]].append(e)
    out = {}
    for task_id, eps in runs.items():
        first_seen: dict[str, Any] = {}
        for e in sorted(eps, key=lambda e: e["started_at"]):
            first_seen.setdefault(e["policy_version"] or "", e["started_at"])
        latest = sorted(first_seen, key=lambda v: first_seen[v])[-recent_versions:]
        recent = [e for e in eps if (e["policy_version"] or "") in latest]
        durations = [e["duration_s"] for e in eps if e.get("duration_s")]
        out[task_id] = TaskStats(
            passes=sum(online[e["episode_id"]] == "pass" for e in recent),
            episodes=len(recent),
            versions=tuple(latest),
            median_s=statistics.median(durations) if durations else None,
        )
    return out


@dataclass(frozen=True)
class Choice:
    """A task the curriculum drew, and why."""

    task: Task
    pool: str
    rate: float | None
    episodes: int
    reason: str
    cost_s: float


@dataclass
class CurriculumSampler:
    """Draws tasks by difficulty pool (see the module)."""

    tasks: Sequence[Task]
    stats: Mapping[str, TaskStats]
    config: CurriculumConfig = field(default_factory=CurriculumConfig)

    def classify(self, task: Task) -> Choice:
        """The task's pool and the reason it is there."""
        st = self.stats.get(task.id, TaskStats())
        cost = st.median_s if st.median_s is not None else TIER_COST_S.get(task.spec.tier, 60.0)
        if st.episodes < self.config.min_episodes or st.rate is None:
            why = f"{st.episodes} recent episodes (fewer than {self.config.min_episodes})"
            return Choice(task, "unseen", st.rate, st.episodes, why, cost)
        for pool in self.config.pools:
            if pool.min_rate <= st.rate <= pool.max_rate:
                versions = ", ".join(st.versions) or "-"
                why = f"pass rate {st.rate:.2f} over {st.episodes} episodes of policy versions {versions}"
                return Choice(task, pool.name, st.rate, st.episodes, why, cost)
        return Choice(task, "unpooled", st.rate, st.episodes, f"pass rate {st.rate:.2f} is in no pool", cost)

    def weight(self, choice: Choice) -> float:
        """The sampling weight of a task's pool."""
        if choice.pool == "unseen":
            return self.config.unseen_weight
        return next((p.weight for p in self.config.pools if p.name == choice.pool), 0.0)

    def draw(
        self, n: int, rng: random.Random, *, exclude: set[str] | None = None, budget_s: float | None = None,
        group_size: int = 1,
    ) -> list[Choice]:  # fmt: skip
        """``n`` distinct tasks by pool weight (none of ``exclude``).

        Under ``budget_s`` (seconds, for the group of each) cheaper tiers are drawn first, and drawing
        stops when the next task would not fit.
        """
        choices = [self.classify(t) for t in self.tasks if t.id not in (exclude or set())]
        choices = [c for c in choices if self.weight(c) > 0]
        tiers = (
            [[c for c in choices if c.task.spec.tier == t] for t in TIER_ORDER]
            if budget_s is not None
            else [choices]
        )
        out: list[Choice] = []
        spent = 0.0
        for tier in tiers:
            left = list(tier)
            while left and len(out) < n:
                pick = left.pop(rng.choices(range(len(left)), weights=[self.weight(c) for c in left])[0])
                cost = pick.cost_s * group_size
                if budget_s is not None and spent + cost > budget_s:
                    return out
                spent += cost
                out.append(pick)
        return out


def assignments(
    choices: Sequence[Choice], group_size: int, rng: random.Random, *, tag: str, round_: int = 0,
    replaces: Mapping[str, str] | None = None,
) -> list[Assignment]:  # fmt: skip
    """The groups of the drawn tasks, each attempt carrying its choice's record for ``episode_started``."""
    out = []
    for c in choices:
        gid = group_id(tag, c.task.id, rng)
        record: dict[str, Any] = {"pool": c.pool, "pass_rate": c.rate, "recent_episodes": c.episodes,
                                  "reason": c.reason, "round": round_}  # fmt: skip
        if replaces and c.task.id in replaces:
            record["replaces"] = replaces[c.task.id]
        out += [Assignment(str(c.task.root), gid, a, group_size, metadata={"curriculum": record})
                for a in range(group_size)]  # fmt: skip
    return out


def constant_groups(outcomes: Sequence[Any]) -> list[str]:
    """Groups whose members all got the same score (and all got one): no signal for the learner."""
    scores: dict[str, list[float | None]] = defaultdict(list)
    for o in outcomes:
        if o.group_id:
            scores[o.group_id].append(o.score)
    return sorted(g for g, s in scores.items() if len(s) > 1 and None not in s and len(set(s)) == 1)
