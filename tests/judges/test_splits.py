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
