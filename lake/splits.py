"""The split (train or eval) each task's first admission recorded in the ``tasks`` table.

Read by the task sampler (training never draws an eval task) and by datasets (no episode of an
eval task is trained on, whatever its worker wrote on it).
"""

from __future__ import annotations

import pyarrow as pa

from lake.store import Lake

SPLITS = ("train", "eval")


def recorded_splits(lake: Lake, version: int | None = None) -> dict[str, str]:
    """Each admitted task's split, from its earliest row (at ``version`` of ``tasks``; none: ``{}``).

    A task first admitted before splits existed (its first row has none) was open to training
    then: it is ``train`` for good, so it can never become an evaluation task it was trained on.
    """
    if not lake.exists("tasks"):
        return {}
    return splits_of(lake.read("tasks", version=version, columns=["task_id", "split", "admitted_at"]))


def splits_of(tasks: pa.Table) -> dict[str, str]:
    """:func:`recorded_splits` of rows of the ``tasks`` table already read."""
    rows = tasks.select(["task_id", "split", "admitted_at"]).to_pylist()
    out: dict[str, str] = {}
    for r in sorted(rows, key=lambda r: r["admitted_at"]):
        out.setdefault(r["task_id"], r.get("split") if r.get("split") in SPLITS else "train")
    return out
