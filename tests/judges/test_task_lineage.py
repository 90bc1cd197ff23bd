"""A task's lineage: part of a derived task's identity, absent from every other task's."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from judges.errors import TaskSpecError
from judges.tasks import load_task

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def test_a_task_without_lineage_keeps_the_spec_digest_it_had_before_lineage_existed() -> None:
    # Episodes and admission rows carry spec digests: a new optional field must not make every
    # recorded task look changed (re-judging would call them drifted). 3ad931bb... is pyfix-004's
    # digest computed by the code before `lineage` was added (3a12aa2); `split` and `nondeterministic`
    # came later still.
    task = load_task(TASKS / "pyfix" / "pyfix-004")
    assert task.spec.lineage is None and task.spec.split is None and task.spec.nondeterministic is None
    assert task.spec_digest == "3ad931bb520dacd14d49eb6693a7e99413a987ca8019873b736c040cce0d627c"
    later = ("lineage", "split", "nondeterministic")
    dumped = {k: v for k, v in task.spec.model_dump(mode="json").items() if k not in later}
    canonical = json.dumps(dumped, sort_keys=True, separators=(",", ":")).encode()
    assert task.spec_digest == hashlib.sha256(canonical).hexdigest()


def test_a_lineage_is_validated_and_part_of_the_digest(tmp_path: Path) -> None:
    shutil.copytree(TASKS / "pyfix" / "pyfix-004", tmp_path / "pyfix" / "t")
    shutil.copy(TASKS / "pyfix" / "family.yaml", tmp_path / "pyfix" / "family.yaml")
    spec_path = tmp_path / "pyfix" / "t" / "task.yaml"
    raw = yaml.safe_load(spec_path.read_text())
    before = load_task(spec_path.parent).spec_digest
    raw["lineage"] = {"case": "my-case", "derived_from": "pyfix-004@1", "episode": "e1"}
    spec_path.write_text(yaml.safe_dump(raw))
    task = load_task(spec_path.parent)
    assert task.spec.lineage is not None and task.spec.lineage.case == "my-case"
    assert task.spec_digest != before
    raw["lineage"]["case"] = "Not A Case"
    spec_path.write_text(yaml.safe_dump(raw))
    with pytest.raises(TaskSpecError, match="lineage.case"):
        load_task(spec_path.parent)
