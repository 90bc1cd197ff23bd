"""Task splits: what decides a task's split, in order, and that the hash is stable and about the share."""

from __future__ import annotations

import shutil
from pathlib import Path

from judges.splits import EVAL_SHARE, hashed_split, split_of
from judges.tasks import load_task

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def _task(tmp_path: Path, extra: str = "", task_id: str = "pyfix-006") -> object:
    root = tmp_path / "pyfix"
    shutil.copytree(TASKS / "pyfix" / task_id, root / task_id)
    shutil.copy(TASKS / "pyfix" / "family.yaml", root / "family.yaml")
    (root / task_id / "task.yaml").write_text((root / task_id / "task.yaml").read_text() + extra)
    return load_task(root / task_id)


def test_the_hash_puts_about_its_share_in_eval_and_never_changes() -> None:
    ids = [f"task-{i}" for i in range(4000)]
    share = sum(hashed_split(i) == "eval" for i in ids) / len(ids)
    assert abs(share - EVAL_SHARE) < 0.03
    assert [hashed_split(i) for i in ids[:50]] == [hashed_split(i) for i in ids[:50]]
    assert hashed_split("pyfix-006") == "eval" and hashed_split("pyfix-004") == "train"
    assert hashed_split("anything", 0.0) == "train" and hashed_split("anything", 1.0) == "eval"


def test_a_recorded_split_wins_over_a_declared_one_which_wins_over_the_hash(tmp_path: Path) -> None:
    declared = _task(tmp_path / "a", "split: train\n")
    assert split_of(declared, {}) == "train"  # declared, against its hash (eval)
    assert split_of(declared, {"pyfix-006": "eval"}) == "eval"  # recorded first: never moves
    assert split_of(_task(tmp_path / "b"), {}) == "eval"  # the hash


def test_a_derived_task_inherits_its_source_tasks_split(tmp_path: Path) -> None:
    lineage = "lineage:\n  case: stuck\n  derived_from: pyfix-006@1\n"
    derived = _task(tmp_path, lineage, task_id="pyfix-004")
    assert hashed_split("pyfix-004") == "train"
    assert split_of(derived, {}) == "eval"  # a near copy of an eval task is not trained on
    assert split_of(derived, {"pyfix-006": "train"}) == "train"


def test_a_draft_follows_its_source_even_against_the_split_its_copied_spec_declares(tmp_path: Path) -> None:
    lineage = "lineage:\n  case: stuck\n  derived_from: pyfix-006@1\nsplit: train\n"
    assert split_of(_task(tmp_path, lineage, task_id="pyfix-004"), {}) == "eval"


def test_a_task_admitted_before_splits_existed_stays_in_train(tmp_path: Path) -> None:
    import datetime as dt

    import pyarrow as pa

    from lake import Lake
    from rollouts.sampler import recorded_splits
    from schemas.tables import TABLES

    t0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)

    def row(task: str, version: str, split: str | None, days: int) -> dict[str, object]:
        return {"task_id": task, "version": version, "family": "pyfix", "tier": "easy", "spec": "{}",
                "spec_digest": "d", "admitted": True, "reasons": [], "split": split,
                "admitted_at": t0 + dt.timedelta(days=days)}  # fmt: skip

    lake = Lake(tmp_path / "lake")
    lake.ensure(["tasks"])
    rows = [
        row("pyfix-006", "1", None, 0),
        row("pyfix-006", "2", "eval", 1),
        row("pyfix-007", "1", "eval", 0),
    ]
    lake.write("tasks", pa.Table.from_pylist(rows, schema=TABLES["tasks"]), mode="upsert")
    # pyfix-006 hashes to eval, but its first admission (from before splits) left it open to training
    assert recorded_splits(tmp_path / "lake") == {"pyfix-006": "train", "pyfix-007": "eval"}
