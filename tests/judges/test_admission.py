"""Task admission: shipped tasks pass it; deliberately broken tasks are rejected with the right reason."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from judges.admission import ADMISSION_SPEC, AdmissionResult, admit, instruction_leaks
from judges.tasks import find_task_dirs, load_task
from sandboxes import SandboxBackend, SandboxPool

TASKS = Path(__file__).resolve().parents[2] / "tasks"
SHIPPED = "pyfix/pyfix-001"


@pytest.fixture(scope="module")
def pool(local_backend: SandboxBackend, base_image: str) -> Iterator[SandboxPool]:
    with SandboxPool(local_backend, ADMISSION_SPEC, max_size=2) as p:
        yield p


def _copy(tmp_path: Path, name: str, src: str = SHIPPED) -> Path:
    """A copy of a shipped task (with its family's defaults) to break."""
    family = src.split("/")[0]
    dest = tmp_path / family / name
    shutil.copytree(TASKS / src, dest)
    shutil.copy(TASKS / family / "family.yaml", tmp_path / family / "family.yaml")
    spec = yaml.safe_load((dest / "task.yaml").read_text())
    spec["id"] = name
    (dest / "task.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return dest


def _failed(res: AdmissionResult) -> set[str]:
    return {c.name for c in res.checks if not c.ok}


def test_a_shipped_task_is_admitted(pool: SandboxPool) -> None:
    res = admit(TASKS / SHIPPED, pool, runs=3)
    assert res.admitted, res.reasons
    assert res.verdicts == {"untouched": ["fail", "fail"], "reference": ["pass", "pass", "pass"]}
    row = res.row()
    assert row["admitted"] and row["state_digest"] and row["reasons"] == [] and row["family"] == "pyfix"


def test_reference_replaced_by_the_untouched_state_is_rejected(pool: SandboxPool, tmp_path: Path) -> None:
    task = _copy(tmp_path, "no-op-reference")
    (task / "solution.patch").write_text("")  # the "solution" leaves the state untouched
    res = admit(task, pool, runs=2)
    # the generated check's answers come from the reference: the untouched state now passes it all
    assert not res.admitted and _failed(res) == {"passes_reference", "generated"}, res.reasons


def test_already_solved_task_is_rejected(pool: SandboxPool, tmp_path: Path) -> None:
    task = _copy(tmp_path, "already-solved")
    subprocess.run(["git", "apply", str(task / "solution.patch")], cwd=task / "repo", check=True)
    res = admit(task, pool, runs=2)
    assert not res.admitted and "fails_untouched" in _failed(res), res.reasons
    # the reference patch no longer applies either, which the generated check needs: said as such
    assert any("already solved" in r or "reference patch does not apply" in r for r in res.reasons), (
        res.reasons
    )


def test_unsolvable_task_is_rejected(pool: SandboxPool, tmp_path: Path) -> None:
    task = _copy(tmp_path, "unsolvable")
    (task / "hidden_tests" / "test_impossible.py").write_text(
        "from slugkit import slugify\n\ndef test_impossible():\n    assert slugify('a b') == 'no-slug-ever'\n"
    )
    res = admit(task, pool, runs=2)
    assert not res.admitted and _failed(res) == {"passes_reference"}, res.reasons


def test_flaky_judge_is_rejected(pool: SandboxPool, tmp_path: Path) -> None:
    task = _copy(tmp_path, "flaky")
    (task / "hidden_tests" / "test_coin.py").write_text(
        "import random\n\ndef test_coin():\n    assert random.random() < 0.5\n"
    )
    # 16 runs of a fair coin all landing the same way: probability 2 / 2**16
    res = admit(task, pool, runs=16)
    assert not res.admitted and "deterministic" in _failed(res), res.reasons


def test_non_reproducible_setup_is_rejected(pool: SandboxPool, tmp_path: Path) -> None:
    task = _copy(tmp_path, "unreproducible")
    spec = yaml.safe_load((task / "task.yaml").read_text())
    spec["initial_state"] = {"setup": ["date +%s%N > build_stamp.txt"]}
    (task / "task.yaml").write_text(yaml.safe_dump(spec))
    res = admit(task, pool, runs=2)
    assert not res.admitted and _failed(res) == {"reproducible"}, res.reasons


def test_leaking_instruction_is_rejected(pool: SandboxPool, tmp_path: Path) -> None:
    task = _copy(tmp_path, "leaky")
    hidden = next((task / "hidden_tests").glob("test_*.py")).read_text()
    line = next(
        ln.strip() for ln in hidden.splitlines() if ln.strip().startswith("assert") and len(ln.strip()) > 30
    )
    spec = yaml.safe_load((task / "task.yaml").read_text())
    spec["instruction"] += f"\nMake sure this holds: {line}\n"
    (task / "task.yaml").write_text(yaml.safe_dump(spec))
    assert instruction_leaks(load_task(task))
    res = admit(task, pool, runs=2)
    assert not res.admitted and _failed(res) == {"instruction"}, res.reasons


def test_invalid_spec_is_rejected_without_running_anything(pool: SandboxPool, tmp_path: Path) -> None:
    task = _copy(tmp_path, "invalid")
    spec = yaml.safe_load((task / "task.yaml").read_text())
    del spec["tier"]
    spec["instruction"] = "   "
    (task / "task.yaml").write_text(yaml.safe_dump(spec))
    res = admit(task, pool)
    assert not res.admitted and _failed(res) == {"spec"}
    assert "tier" in res.reasons[0] and "instruction" in res.reasons[0]


def test_a_task_of_a_family_with_generated_checks_needs_its_generator(
    pool: SandboxPool, tmp_path: Path
) -> None:
    task = _copy(tmp_path, "no-generator")
    (task / "generator.py").unlink()
    res = admit(task, pool, runs=2)
    assert not res.admitted and "generated" in _failed(res), res.reasons
    assert any("generator.py is missing" in r for r in res.reasons)


def test_a_generator_that_draws_differently_for_one_seed_is_rejected(
    pool: SandboxPool, tmp_path: Path
) -> None:
    task = _copy(tmp_path, "restless-generator")
    src = (task / "generator.py").read_text()
    # draws from the clock besides the seed: the same state would get other questions each time
    (task / "generator.py").write_text(
        src.replace(
            "def cases(rng, n):",
            "def cases(rng, n):\n    import time; rng.seed(rng.random() + time.time_ns())",
        )
    )
    res = admit(task, pool, runs=2)
    assert not res.admitted and "generated" in _failed(res), res.reasons
    assert any("differently for the same seed" in r for r in res.reasons)


def test_a_task_without_a_generated_check_is_reported(pool: SandboxPool, tmp_path: Path) -> None:
    res = admit(TASKS / "wordplay" / "wordplay-001", pool, runs=2)
    assert res.admitted and res.notes == ["no generated check: the hidden tests ask fixed questions only"]
    assert res.null_effort_scores and max(res.null_effort_scores.values()) <= (res.do_nothing_score or 0.0)


def test_partial_credit_for_form_is_refused(pool: SandboxPool, tmp_path: Path) -> None:
    # a judge that pays for an answer of the right length: the input echoed back earns it
    task = _copy(tmp_path, "credit-for-form", src="wordplay/wordplay-003")
    family = yaml.safe_load((task.parent / "family.yaml").read_text())
    family["judge"] = {"name": "tests"}
    (task.parent / "family.yaml").write_text(yaml.safe_dump(family, sort_keys=False))
    expected = (task / "hidden_tests" / "expected.txt").read_text().strip()
    (task / "hidden_tests" / "test_answer.py").write_text(
        "from pathlib import Path\n\n"
        "def _a():\n    p = Path('answer.txt')\n    return p.read_text().strip() if p.exists() else ''\n\n"
        f"def test_length():\n    assert len(_a()) == {len(expected)}\n\n"
        f"def test_exact():\n    assert _a() == {expected!r}\n"
    )
    res = admit(task, pool, runs=2)
    assert not res.admitted and _failed(res) == {"null_effort"}, res.reasons
    assert res.null_effort_scores["reversed"] == 0.5 and res.do_nothing_score == 0.0


def test_shipped_families_are_varied_and_large_enough() -> None:
    tasks = [load_task(d) for d in find_task_dirs([TASKS])]
    by_family: dict[str, list[str]] = {}
    for t in tasks:
        by_family.setdefault(t.spec.family, []).append(t.spec.tier)
    assert len(by_family.get("pyfix", [])) >= 30
    assert len(by_family) >= 2
    for tiers in by_family.values():
        assert {"easy", "medium", "hard"} <= set(tiers)
