"""Train and eval splits of tasks: assigned once, recorded by admission, never sampled for training.

A task's split is, in order: the split its first admission recorded in the
``tasks`` table (a split never changes once recorded: a task trained on must
not become an evaluation task, and an evaluation task must not leak into
training; a task admitted before splits existed is ``train``), the split of the
task it was derived from (a draft targeted at a failure case is as close to its
source as a task can be, and copies its spec), the split its spec declares, and
otherwise a stable hash of its id (:data:`EVAL_SHARE` of ids land in ``eval``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from judges.tasks import Task

SPLITS = ("train", "eval")
EVAL_SHARE = 0.2
"""The share of task ids the hash puts in ``eval`` when neither a record nor the spec decides."""
_SALT = b"trajlake-split\x1f"


def hashed_split(task_id: str, eval_share: float = EVAL_SHARE) -> str:
    """``eval`` for a stable ``eval_share`` of ids (sha256 of a salted id), else ``train``."""
    x = int(hashlib.sha256(_SALT + task_id.encode()).hexdigest()[:16], 16) / 2**64
    return "eval" if x < eval_share else "train"


def split_of(task: Task, recorded: Mapping[str, str]) -> str:
    """The task's split (see the module's docstring for the order of what decides it)."""
    if task.id in recorded:
        return recorded[task.id]
    lineage = task.spec.lineage
    if lineage is not None:  # before its own declaration: a draft copies its source's spec
        source = lineage.derived_from.rpartition("@")[0] or lineage.derived_from
        return recorded.get(source) or hashed_split(source)
    if task.spec.split is not None:
        return task.spec.split
    return hashed_split(task.id)
