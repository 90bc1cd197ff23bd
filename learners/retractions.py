"""Retractions: data taken out of training, and the checkpoints that trained on it before.

A retraction (a row of ``retractions``, folded from the ``retraction:`` control
stream) names an episode, a group, a task version or a judge version. A
dataset read with a retraction in its snapshot excludes what it names (counted
``retracted``): an episode or group whose task version is retracted, every
episode scored by a retracted judge version when that is the dataset's judge;
a group that loses a member this way is dropped whole (``partial_group``), as
for any member lost for good. :func:`impacted_checkpoints` recomputes, from
each checkpoint's pinned lineage, what it trained on, and names those that
trained on retracted data and every checkpoint descending from them. What a retraction
matches is :class:`lake.selection.Retracted`, shared with the query API.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lake import Lake
from lake.selection import Retracted


def read_retracted(lake: Lake, version: int | None) -> Retracted:
    """The retractions of the ``retractions`` table at ``version`` (``None``: none)."""
    if version is None or not lake.exists("retractions"):
        return Retracted()
    return Retracted.of(lake.read("retractions", version=version).to_pylist())


def impacted_checkpoints(lake_root: str | Path, retraction_id: str) -> list[dict[str, Any]]:
    """The checkpoints that trained on what a retraction names, and every checkpoint descending from one.

    What a checkpoint trained on is read again from its lineage (its pinned table versions, judge,
    selection, and its parent's versions when it read incrementally), with the retractions it saw.

    Raises:
        KeyError: no such retraction.
    """
    from learners.checkpoints import read_checkpoints
    from learners.dataset import DatasetSpec, load_samples

    lk = Lake(lake_root)
    rows = lk.read("retractions").to_pylist() if lk.exists("retractions") else []
    match = [r for r in rows if r["retraction_id"] == retraction_id]
    if not match:
        raise KeyError(retraction_id)
    only = Retracted.of(match)
    checkpoints = read_checkpoints(lake_root)
    episodes_cols = ["episode_id", "group_id", "task_id", "task_version"]
    direct: dict[str, int] = {}
    for ck in sorted(checkpoints.values(), key=lambda r: r["created_at"]):
        versions = json.loads(ck["table_versions"] or "{}")
        if "episodes" not in versions or not ck["judge_name"]:
            continue  # a warm start: no episodes
        metrics = json.loads(ck["metrics"] or "{}")
        sel = metrics.get("selection") or {}
        args = metrics.get("args") or {}
        parent = checkpoints.get(ck["parent_id"] or "")
        since = (
            json.loads(parent["table_versions"] or "{}") if parent and args.get("incremental", True) else {}
        )
        spec = DatasetSpec(
            lake=str(lake_root),
            judge_name=ck["judge_name"],
            judge_version=ck["judge_version"],
            versions={k: int(v) for k, v in versions.items()},
            since={k: int(v) for k, v in since.items()} or None,
            since_judge_version=parent["judge_version"] if parent and since else None,
            task_ids=frozenset(sel["tasks"]) if sel.get("tasks") is not None else None,
            families=frozenset(sel["families"]) if sel.get("families") is not None else None,
            max_group_wait_s=sel.get("max_group_wait_s", args.get("max_group_wait_s")),
        )
        trained = sorted(set(load_samples(spec).table.column("episode_id").to_pylist()))
        if not trained:
            continue
        if (ck["judge_name"], ck["judge_version"]) in only.judges:
            direct[ck["checkpoint_id"]] = len(trained)
            continue
        eps = lk.read_episodes_rows("episodes", trained, version=versions["episodes"], columns=episodes_cols)
        hit = sum(only.hits(e, (ck["judge_name"], ck["judge_version"])) for e in eps.to_pylist())
        if hit:
            direct[ck["checkpoint_id"]] = hit
    out = []
    for ck in sorted(checkpoints.values(), key=lambda r: r["created_at"]):
        chain: list[str] = []
        cur: dict[str, Any] | None = ck
        while cur is not None and cur["checkpoint_id"] not in direct:
            chain.append(cur["checkpoint_id"])
            cur = checkpoints.get(cur["parent_id"] or "")
        if cur is None:
            continue
        via = cur["checkpoint_id"]
        out.append({
            "checkpoint_id": ck["checkpoint_id"],
            "path": ck["path"],
            "created_at": ck["created_at"],
            "trained_on_retracted": direct.get(ck["checkpoint_id"], 0),
            "via": None if via == ck["checkpoint_id"] else via,
        })  # fmt: skip
    return out
