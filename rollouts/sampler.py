"""The task pool: admitted tasks, sampled by family, tier and priority into groups of G attempts."""

from __future__ import annotations

import random
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judges.splits import split_of
from judges.tasks import Task, find_task_dirs, load_task
from lake import Lake
from lake.splits import recorded_splits as _recorded_splits
from lake.splits import splits_of

TIER_PRIORITY = {"easy": 1.0, "medium": 1.0, "hard": 1.0}


@dataclass(frozen=True)
class Assignment:
    """One episode to run: a task, its group and the attempt number within the group."""

    task_dir: str
    group_id: str
    attempt: int
    group_size: int | None = None
    """Attempts in the group (recorded, so a learner trains the group only once all of them are in)."""
    metadata: Mapping[str, Any] | None = None
    """Recorded on the episode's ``episode_started`` (e.g. why the curriculum chose the task)."""


def group_id(tag: str, task_id: str, rng: random.Random) -> str:
    """A new group id for the G attempts at one task (``<tag>:<task>:<48 bits of rng><32 fresh bits>``).

    The fresh bits keep two runs with the same seed (the same tasks, drawn alike) from sharing group
    ids: their attempts are two groups, never one group of twice the size.
    """
    return f"{tag}:{task_id}:{rng.getrandbits(48):012x}{secrets.token_hex(4)}"


def group_assignments(
    tasks: Iterable[Task], group_size: int, *, rng: random.Random, tag: str
) -> list[Assignment]:
    """``group_size`` attempts at every task, the attempts at one task sharing one group."""
    out = []
    for t in tasks:
        group = group_id(tag, t.id, rng)
        out += [Assignment(str(t.root), group, a, group_size) for a in range(group_size)]
    return out


def admitted_ids(lake: str | Path) -> set[str] | None:
    """Ids the ``tasks`` table admits (``None`` when nothing was ever admitted: no table, or no rows)."""
    return _admissions(lake)[0]


def _admissions(lake: str | Path) -> tuple[set[str] | None, dict[str, str]]:
    """The admitted ids (:func:`admitted_ids`) and the recorded splits, from one read of ``tasks``."""
    lk = Lake(lake)
    if not lk.exists("tasks"):
        return None, {}
    table = lk.read("tasks", columns=["task_id", "admitted", "split", "admitted_at"])
    if not table.num_rows:
        return None, {}
    admitted = {
        t for t, ok in zip(table["task_id"].to_pylist(), table["admitted"].to_pylist(), strict=True) if ok
    }
    return admitted, splits_of(table)


def recorded_splits(lake: str | Path) -> dict[str, str]:
    """The split each task's first admission recorded (:func:`lake.splits.recorded_splits`)."""
    return _recorded_splits(Lake(lake))


class TaskPool:
    """Tasks found under some paths, restricted to the admitted ones when an admission list is given.

    Args:
        paths: task directories or directories holding tasks.
        admitted: ids admitted (e.g. read from the ``tasks`` table); ``None`` admits every valid task.
        families: keep only these families.
        tiers: keep only these tiers.
        priority: sampling weight per tier.
    """

    def __init__(
        self,
        paths: Iterable[str | Path],
        *,
        admitted: set[str] | None = None,
        families: Sequence[str] | None = None,
        tiers: Sequence[str] | None = None,
        ids: Sequence[str] | None = None,
        priority: dict[str, float] | None = None,
        split: str | None = None,
        recorded_splits: Mapping[str, str] | None = None,
    ) -> None:
        tasks = [load_task(d) for d in find_task_dirs(paths)]
        self.splits = {t.id: split_of(t, recorded_splits or {}) for t in tasks}
        """Each task's split (:func:`judges.splits.split_of`)."""
        self.tasks: list[Task] = [
            t
            for t in tasks
            if (admitted is None or t.id in admitted)
            and (not families or t.spec.family in families)
            and (not tiers or t.spec.tier in tiers)
            and (not ids or t.id in ids)
            and (split is None or self.splits[t.id] == split)
        ]
        self.priority = {**TIER_PRIORITY, **(priority or {})}

    @classmethod
    def admitted_in(
        cls, paths: Iterable[str | Path], lake: str | Path, *, split: str | None = "train", **filters: Any
    ) -> TaskPool:
        """Tasks under ``paths`` the lake's ``tasks`` table admits (all valid ones when it has no rows).

        Only the ``train`` split by default: training never samples an ``eval`` task (``split="eval"``
        for an evaluation, ``None`` for both).
        """
        admitted, splits = _admissions(lake)
        return cls(paths, admitted=admitted, split=split, recorded_splits=splits, **filters)

    def __len__(self) -> int:
        return len(self.tasks)

    def by_id(self) -> dict[str, Task]:
        """The tasks, by id."""
        return {t.id: t for t in self.tasks}

    def sample(
        self, n_tasks: int, group_size: int, *, rng: random.Random, tag: str = "rollout"
    ) -> list[Assignment]:
        """``n_tasks`` distinct tasks (weighted by tier priority), ``group_size`` attempts each."""
        if not self.tasks:
            return []
        pool = list(self.tasks)
        chosen: list[Task] = []
        while pool and len(chosen) < n_tasks:
            weights = [self.priority.get(t.spec.tier, 1.0) for t in pool]
            pick = rng.choices(range(len(pool)), weights=weights)[0]
            chosen.append(pool.pop(pick))
        return group_assignments(chosen, group_size, rng=rng, tag=tag)
