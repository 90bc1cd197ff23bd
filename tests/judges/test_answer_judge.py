"""The ``answer`` judge: partial credit against a hidden answer, on the real sandbox, hard to fool."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from judges import JudgeContext, build_judge, load_task
from judges.admission import admit
from judges.builtin.answer import grade
from judges.judgement import Judgement
from judges.replay import Trajectory
from sandboxes import SandboxBackend, SandboxPool, SandboxSpec

MAKE_TASKS = Path(__file__).resolve().parents[2] / "tasks" / "reverse" / "make_tasks.py"


def _family() -> Any:
    spec = importlib.util.spec_from_file_location("reverse_make_tasks", MAKE_TASKS)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def family(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reverse") / "reverse"
    _family().write_family(out, train=3, held_out=2)
    return out


def test_grade_pays_the_correct_prefix_beyond_what_null_effort_reaches() -> None:
    checks, score = grade("fedcba", "fedcba")
    assert checks["exact"] and score == 1.0
    # every null-effort answer reaches the first letter at most (the last letter repeated does):
    # the partial credit starts after it
    checks, score = grade("fedcbx", "fedcba")
    assert not checks["exact"] and (checks["prefix"], checks["baseline"]) == (5, 1) and score == 4 / 5
    assert grade("fexxxx", "fedcba")[1] == 1 / 5
    assert grade("fxdcba", "fedcba")[1] == 0.0  # letters in place after a wrong one are not progress
    assert grade("FEDCBA", "fedcba")[1] == 0.0
    assert grade("", "fedcba")[1] == 0.0


@pytest.mark.parametrize("word", ["sun", "cloud", "hello", "qzxwvu", "abcabc", "moon", "letter"])
def test_no_null_effort_answer_scores_above_nothing(word: str) -> None:
    from judges.builtin.answer import null_answers

    expected = word[::-1]
    nulls = {**null_answers(expected), "echo": word, "junk": "x" * len(word), "sorted": "".join(sorted(word))}
    scores = {name: grade(a, expected)[1] for name, a in nulls.items() if a != expected}
    assert max(scores.values()) == 0.0, scores


def test_generated_family_is_deterministic_and_disjoint(tmp_path: Path) -> None:
    mod = _family()
    a = mod.splits(20, 30, seed=0)
    assert a == mod.splits(20, 30, seed=0)
    assert not set(a["train"]) & set(a["eval"]) and len(set(a["eval"])) == 30
    lo, hi = mod.LENGTHS
    assert all(lo <= len(w) <= hi and w.isalpha() for w in a["train"] + a["eval"])
    dirs = mod.write_family(tmp_path / "f", train=2, held_out=1)
    task = load_task(dirs[-1])
    word = task.spec.instruction.split('"')[1]
    assert task.id == "reverse-eval-0001"
    assert task.hidden_files() == {"expected.txt": word[::-1].encode() + b"\n"}
    # the answer is nowhere in what the agent gets: the workspace and the instruction
    assert word[::-1] not in task.spec.instruction
    assert all(word[::-1].encode() not in p.read_bytes() for p in task.initial_dir.rglob("*") if p.is_file())


def test_one_judge_version_for_the_whole_family(family: Path) -> None:
    versions = {build_judge(load_task(d).spec.judge).version for d in sorted(family.iterdir()) if d.is_dir()}
    assert len(versions) == 1


def _judge_after(
    backend: SandboxBackend, image: str, task_dir: Path, setup: str, config: dict[str, object] | None = None
) -> Judgement:
    task = load_task(task_dir)
    judge = build_judge({"name": "answer", "config": config or {}})
    with backend.create(SandboxSpec(image=image, workspace=task.initial_dir)) as sb:
        task.prepare(sb)
        if setup:
            r = sb.exec(["sh", "-c", setup], timeout=30)
            assert r.exit_code == 0, r.stderr
        return judge(JudgeContext(task=task, sandbox=sb, events=Trajectory(task).events))


def test_verdicts_on_the_real_sandbox(local_backend: SandboxBackend, base_image: str, family: Path) -> None:
    task_dir = family / "reverse-eval-0001"
    answer = (task_dir / "hidden" / "expected.txt").read_text().strip()
    j = _judge_after(local_backend, base_image, task_dir, f"printf '%s\\n' {answer} > answer.txt")
    assert (j.verdict, j.score) == ("pass", 1.0)
    wrong = answer[:-1] + ("a" if answer[-1] != "a" else "b")
    j = _judge_after(local_backend, base_image, task_dir, f"printf %s {wrong} > answer.txt")
    assert j.verdict == "fail" and 0.5 < j.score < 1.0
    # a looser version of the same judge passes that answer
    j = _judge_after(
        local_backend, base_image, task_dir, f"printf %s {wrong} > answer.txt", {"pass_score": 0.75}
    )
    assert j.verdict == "pass" and j.judge_version != build_judge({"name": "answer"}).version
    j = _judge_after(local_backend, base_image, task_dir, "")
    assert (j.verdict, j.score) == ("fail", 0.0) and "not written" in (j.detail or "")


@pytest.mark.parametrize(
    ("setup", "why"),
    [
        # the agent cannot read the hidden answer, but it may try to point the judge at a file that
        # has it, or at something that never ends
        ("ln -s /etc/hostname answer.txt", "links the judge will not follow"),
        ("echo x > real.txt && ln -s real.txt answer.txt", "symlink"),
        ("mkfifo answer.txt", "not written"),
        ("mkdir answer.txt", "directory"),
        ("head -c 10000 /dev/zero | tr '\\0' a > answer.txt", "over 4096 bytes"),
        ("printf '\\377\\376' > answer.txt", "not UTF-8"),
        # a process left running to write the right answer after the judge starts reading: it is killed
        ("(sleep 2; echo late > answer.txt) > /dev/null 2>&1 &", "not written"),
    ],
)
def test_tricks_are_fails_with_the_reason(
    local_backend: SandboxBackend, base_image: str, family: Path, setup: str, why: str
) -> None:
    j = _judge_after(local_backend, base_image, family / "reverse-eval-0001", setup)
    assert j.verdict == "fail" and j.score == 0.0 and why in (j.detail or ""), j


def test_a_task_without_the_hidden_answer_is_the_judges_error(
    local_backend: SandboxBackend, base_image: str, family: Path, tmp_path: Path
) -> None:
    import shutil

    task_dir = tmp_path / "reverse-eval-0001"
    shutil.copytree(family / "reverse-eval-0001", task_dir)
    shutil.copy(family / "family.yaml", tmp_path / "family.yaml")
    (task_dir / "hidden" / "expected.txt").unlink()
    (task_dir / "hidden" / "other.txt").write_text("x\n")
    j = _judge_after(local_backend, base_image, task_dir, "echo x > answer.txt")
    assert j.verdict == "error" and "expected.txt" in (j.detail or "")


def test_the_family_passes_admission(local_backend: SandboxBackend, base_image: str, family: Path) -> None:
    from judges.admission import ADMISSION_SPEC

    with SandboxPool(local_backend, ADMISSION_SPEC, max_size=1) as pool:
        rows = [admit(d, pool, runs=2) for d in sorted(family.iterdir()) if d.is_dir()]
    assert all(r.admitted for r in rows), [r.reasons for r in rows]
