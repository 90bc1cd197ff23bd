"""Which episodes of a snapshot a learner trains on: the one implementation of the rules.

``learners.dataset`` selects its training data with :func:`trainable` and computes group-relative
advantages with :func:`group_advantages_np`; the query API (``GET /episodes/{id}/training``)
recomputes a checkpoint's selection from its lineage with the same functions. They live in
``lake`` because both packages may import it (``tests/test_dependency_rule.py``), so the rule
that decides what trains and the rule that explains it cannot drift apart. Pure functions over
Arrow tables and plain values: the callers read the tables.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

TABLES_READ = ("episodes", "rewards", "samples")
"""The tables a dataset reads at pinned versions (a lineage that can be read again pins them)."""
LEARNABLE = ("success", "failure", "truncated")
"""Episode statuses a learner may learn from (never ``infra_error`` or ``aborted``)."""
EPISODE_COLUMNS = ("episode_id", "task_id", "task_family", "policy_version", "group_id", "status",
                   "completeness", "group_size", "started_at", "ended_at", "source",
                   "task_version")  # fmt: skip
"""The ``episodes`` columns the selection reads."""
REWARD_COLUMNS = ("episode_id", "judge_name", "judge_version", "score", "verdict", "ts", "source")
"""The ``rewards`` columns the selection reads."""
WAITING = (None, "incomplete", "no_reward")
"""An episode's exclusion while its group waits for it (``None``: not excluded)."""


@dataclass(frozen=True)
class Retracted:
    """What a set of retractions takes out of training."""

    episodes: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()
    task_versions: frozenset[tuple[str, str]] = frozenset()
    judges: frozenset[tuple[str, str]] = frozenset()

    @classmethod
    def of(cls, rows: Sequence[Mapping[str, Any]]) -> Retracted:
        """From ``retractions`` rows."""

        def split(target: str) -> tuple[str, str]:
            name, _, version = target.rpartition("@")
            return name, version

        by = {
            s: [r["target"] for r in rows if r["scope"] == s]
            for s in ("episode", "group", "task_version", "judge_version")
        }
        return cls(
            episodes=frozenset(by["episode"]),
            groups=frozenset(by["group"]),
            task_versions=frozenset(split(t) for t in by["task_version"]),
            judges=frozenset(split(t) for t in by["judge_version"]),
        )

    def __bool__(self) -> bool:
        return bool(self.episodes or self.groups or self.task_versions or self.judges)

    def hits(self, episode: Mapping[str, Any], judge: tuple[str, str | None]) -> bool:
        """Whether an ``episodes`` row scored by ``judge`` (name, version) is retracted."""
        return (
            episode["episode_id"] in self.episodes
            or (episode.get("group_id") or "") in self.groups
            or (episode.get("task_id"), episode.get("task_version")) in self.task_versions
            or judge in self.judges
        )


def retractions_hitting(
    rows: Sequence[Mapping[str, Any]], episode: Mapping[str, Any], judge: tuple[str, str | None]
) -> list[Mapping[str, Any]]:
    """The ``retractions`` rows that take ``episode`` (scored by ``judge``) out of training.

    Each row is matched by :meth:`Retracted.hits`, so what is named is what the selection excluded.
    """
    return [r for r in rows if Retracted.of([r]).hits(episode, judge)]


def epoch_seconds(column: pa.ChunkedArray) -> list[float | None]:
    """A timestamp column as epoch seconds, none later than the reader's clock.

    (A time in the future is not a time yet: an event stamped ahead by a skewed or forged clock
    cannot make a group look as if it had waited for hours.)
    """
    cap = time.time()
    return [None if v is None else min(v / 1e6, cap) for v in pc.cast(column, pa.int64()).to_pylist()]


def group_key(episode: Mapping[str, Any]) -> str:
    """An episode's group (the episode itself when it has none)."""
    return str(episode["group_id"] or episode["episode_id"])


@dataclass
class Picked:
    """The episode selection of one snapshot: who is kept, with what score, and why the others are not."""

    rows: list[dict[str, Any]]
    """Every ``episodes`` row of the snapshot (timestamps as epoch seconds), in table order."""
    keep: dict[str, dict[str, Any]]
    """Episode id -> row, for the trainable episodes."""
    score: dict[str, float]
    """Episode id -> the chosen judge version's score, for the trainable episodes."""
    why: dict[str, str]
    """Episode id -> its exclusion reason (an episode outside the selection's scope has none)."""
    members: dict[str, list[str]] = field(default_factory=dict)
    """Group key -> the episodes in the selection's scope with that key."""
    sizes: dict[str, int] = field(default_factory=dict)
    """Group key -> the largest group size its members' rollouts recorded."""

    @cached_property
    def by_id(self) -> dict[str, dict[str, Any]]:
        """Episode id -> row, every episode of the snapshot."""
        return {ep["episode_id"]: ep for ep in self.rows}

    @cached_property
    def groups(self) -> dict[str, list[str]]:
        """Group key -> every episode of the snapshot with that key (in scope or not)."""
        out: dict[str, list[str]] = {}
        for ep in self.rows:
            out.setdefault(group_key(ep), []).append(ep["episode_id"])
        return out


def trainable(
    episodes: pa.Table,
    rewards: pa.Table,
    *,
    judge_name: str,
    judge_version: str | None,
    task_ids: frozenset[str] | None = None,
    families: frozenset[str] | None = None,
    policy_versions: frozenset[str] | None = None,
    max_group_wait_s: float | None,
    retracted: Retracted | None = None,
    eval_tasks: frozenset[str] = frozenset(),
) -> Picked:
    """The episodes a learner may train on in one snapshot, with their scores.

    An episode is trainable when it passes the selection's filters, ended with a
    learnable status, is complete, and the chosen judge version scored it with
    a verdict other than ``error``; a group is trainable only whole: while one
    of its episodes is not (yet) complete or scored, or fewer episodes than the
    group size its rollout recorded are in the table, the group waits, for at
    most ``max_group_wait_s`` after its first member ended; then it is
    dropped (``group_expired``), in this snapshot and every later one. A group
    one of whose episodes is left out for good (a ``gap``, a status such as
    ``infra_error``, a ``reward_error``) is dropped whole: that episode counts
    under its own reason, each other member under ``partial_group``.

    Args:
        episodes: ``episodes`` rows (at least :data:`EPISODE_COLUMNS`).
        rewards: ``rewards`` rows (at least :data:`REWARD_COLUMNS`; other judges' are ignored).
        judge_name: the judge whose rewards count.
        judge_version: and its version.
        task_ids: only these tasks (``None``: any).
        families: only these task families (``None``: any).
        policy_versions: only episodes run by these policy versions (``None``: any).
        max_group_wait_s: how long, in log time, a group waits for its last members after its
            first one ended (``None``: for ever).
        retracted: the retractions in the snapshot (``None``: none).
        eval_tasks: the tasks in the eval split (never trained on).

    Returns:
        The selection: the kept episodes and their scores, every other episode's reason, and the
        groups in scope with their recorded sizes.
    """
    why: dict[str, str] = {}

    def values(c: str) -> list[Any]:
        col = episodes.column(c)
        if pa.types.is_timestamp(col.type):  # as epoch seconds: datetime objects cost more than the rest
            return epoch_seconds(col)
        return list(col.to_pylist())

    rows = [dict(zip(EPISODE_COLUMNS, r, strict=True)) for r in zip(*(values(c) for c in EPISODE_COLUMNS))]
    scored: dict[str, tuple[float, str, float]] = {}
    r = rewards.filter(pc.equal(rewards.column("judge_name"), judge_name))
    for eid, version, value, verdict, at, source in zip(
        r.column("episode_id").to_pylist(), r.column("judge_version").to_pylist(),
        r.column("score").to_pylist(), r.column("verdict").to_pylist(), epoch_seconds(r.column("ts")),
        r.column("source").to_pylist(), strict=True,
    ):  # fmt: skip
        if version == judge_version:
            # an online reward is the last step of an episode becoming trainable; a re-judge
            # scores old episodes later by design, so its time is not a member being late
            scored[eid] = (float(value), verdict, (at or 0.0) if source == "online" else 0.0)
    keep: dict[str, dict[str, Any]] = {}
    score: dict[str, float] = {}
    pending_groups: set[str] = set()
    members: Counter[str] = Counter()
    sizes: dict[str, int] = {}
    first_end: dict[str, float] = {}
    whole_at: dict[str, float] = {}  # when the group's last member was ended and scored
    in_scope: dict[str, list[str]] = {}
    for ep in rows:
        if ep["source"] == "eval" or ep["task_id"] in eval_tasks:
            # an evaluation run's episode, or any episode of a task admission put in the eval split
            # (whatever its worker wrote on it): measured on, never trained on
            why[ep["episode_id"]] = "eval"
            continue
        if task_ids is not None and ep["task_id"] not in task_ids:
            continue
        if families is not None and ep["task_family"] not in families:
            continue
        if policy_versions is not None and ep["policy_version"] not in policy_versions:
            continue
        group = ep["group_id"] or ep["episode_id"]
        members[group] += 1
        in_scope.setdefault(group, []).append(ep["episode_id"])
        if ep["ended_at"] is not None:
            t = ep["ended_at"]
            first_end[group] = min(first_end.get(group, t), t)
            done = max(t, scored[ep["episode_id"]][2]) if ep["episode_id"] in scored else t
            whole_at[group] = max(whole_at.get(group, done), done)
        if ep.get("group_size"):
            sizes[group] = max(sizes.get(group, 0), int(ep["group_size"]))
        if retracted and retracted.hits(ep, (judge_name, judge_version)):
            why[ep["episode_id"]] = "retracted"  # taken out of training: its group goes with it
            continue
        if ep["completeness"] == "gap":
            why[ep["episode_id"]] = "gap"  # events lost for good (quarantined): never whole, never waited for
            continue
        if ep["completeness"] != "complete" or ep["status"] is None or ep["status"] == "open":
            pending_groups.add(group)  # the group is trained once it is whole
            why[ep["episode_id"]] = "incomplete"
            continue
        if ep["status"] not in LEARNABLE:
            why[ep["episode_id"]] = f"status:{ep['status']}"
            continue
        if ep["episode_id"] not in scored:
            pending_groups.add(group)
            why[ep["episode_id"]] = "no_reward"
            continue
        value, verdict, _ = scored[ep["episode_id"]]
        if verdict == "error":
            why[ep["episode_id"]] = "reward_error"  # the judge failed: no signal about the policy
            continue
        keep[ep["episode_id"]] = ep
        score[ep["episode_id"]] = value
    # a group that lost a member for good (a gap, an unlearnable status, a judge error) is never
    # trained: its baseline over the survivors would not be the group's
    lost = {
        ep["group_id"] or ep["episode_id"] for ep in rows if why.get(ep["episode_id"]) not in WAITING
    } & in_scope.keys()
    for g in lost:
        for eid in in_scope[g]:
            if eid in keep:
                why[eid] = "partial_group"
                del keep[eid], score[eid]
    pending_groups -= lost  # nothing to wait for: the group is dropped whole
    # a group whose recorded size is not reached yet has members that have not even started
    pending_groups |= {g for g, n in sizes.items() if members[g] < n and g not in lost}
    expired: set[str] = set()
    if max_group_wait_s is not None:
        # the snapshot's own clock: its newest episode time or reward
        clock = [t for t in (*(ep["started_at"] for ep in rows), *(ep["ended_at"] for ep in rows)) if t]
        clock += [at for _, _, at in scored.values()]
        now = max(clock, default=0.0)
        for g, t0 in first_end.items():
            # still waiting too long, or whole only thanks to a member that ended or was scored too late
            done = whole_at[g] if g not in pending_groups else max(now, t0)
            if done - t0 > max_group_wait_s:
                expired.add(g)
    for g in expired:
        for eid in in_scope[g]:
            if eid in keep or why.get(eid) in ("incomplete", "no_reward"):
                why[eid] = "group_expired"
                keep.pop(eid, None)
                score.pop(eid, None)
    for eid in [e for e, ep in keep.items() if (ep["group_id"] or e) in pending_groups]:
        why[eid] = "group_waiting"
        del keep[eid], score[eid]
    return Picked(rows, keep, score, why, in_scope, sizes)


def group_advantages_np(
    rewards: np.ndarray, groups: np.ndarray, eps: float = 1e-6, *, scale: bool = True
) -> np.ndarray:
    """(r - mean_g) / (std_g + eps) per group, population std; constant groups get 0 (numpy, vectorised).

    ``scale=False``: ``r - mean_g`` only (Dr. GRPO).
    """
    if not len(rewards):
        return np.zeros(0, dtype=np.float64)
    r = np.asarray(rewards, dtype=np.float64)
    _, g = np.unique(groups, return_inverse=True)
    count = np.bincount(g)
    mean = np.bincount(g, weights=r) / count
    var = np.bincount(g, weights=(r - mean[g]) ** 2) / count
    lo = np.full(len(count), np.inf)
    hi = np.full(len(count), -np.inf)
    np.minimum.at(lo, g, r)
    np.maximum.at(hi, g, r)
    adv = (r - mean[g]) / (np.sqrt(var)[g] + eps) if scale else r - mean[g]
    return np.where((hi == lo)[g], 0.0, adv)
