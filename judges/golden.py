"""Golden sets: trajectories with expected verdicts, one file per judge, kept in the repo.

``trajlake judges verify`` replays every case in a real sandbox, judges it and
compares verdict, score and flags with what the file expects; any difference
is a behaviour change of the judge and fails the run, naming what flipped.

A golden file (``judges/golden/<name>.yaml``)::

    judge: {name: tests}              # default judge of the file ("task": the task's own judge)
    cases:
      - id: reference-passes
        task: pyfix/pyfix-001          # relative to the tasks root
        actions: [apply_reference]     # see judges.replay
        expect: {verdict: pass, score: 1.0, flags: []}
        judge: {name: tests, config: {timeout_s: 5}}   # optional per-case judge
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from judges.context import JudgeContext
from judges.errors import GoldenSetError, TaskSpecError
from judges.judgement import Judgement
from judges.registry import build_judge
from judges.replay import prepare, replay
from judges.tasks import Task, load_task
from sandboxes.pool import SandboxPool

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
TASKS_DIR = Path(__file__).resolve().parents[1] / "tasks"


@dataclass(frozen=True)
class GoldenCase:
    """One trajectory and the judgement a judge must give it."""

    set_name: str
    id: str
    task: str
    actions: list[Any]
    judge: dict[str, Any] | str
    expect: dict[str, Any]
    kind: str | None = None
    """For the reward-hacking corpus: the exploit kind, or ``honest``."""


@dataclass
class CaseResult:
    """What the judge said about a case, and whether it matches."""

    case: GoldenCase
    judgement: Judgement | None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Verdict, score and flags as expected."""
        return self.judgement is not None and not self.problems


def load_golden(paths: Iterable[Path] | None = None) -> list[GoldenCase]:
    """Every case of the golden files (default: all of ``judges/golden``).

    Raises:
        GoldenSetError: a file or case is malformed.
    """
    files = sorted(paths) if paths is not None else sorted(GOLDEN_DIR.glob("*.yaml"))
    cases: list[GoldenCase] = []
    for path in files:
        try:
            doc = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise GoldenSetError(f"{path}: {exc}") from exc
        if not isinstance(doc, dict) or not isinstance(doc.get("cases"), list):
            raise GoldenSetError(f"{path}: expected a mapping with a `cases` list")
        default = doc.get("judge", "task")
        seen: set[str] = set()
        for raw in doc["cases"]:
            try:
                case = GoldenCase(
                    set_name=path.stem,
                    id=str(raw["id"]),
                    task=str(raw["task"]),
                    actions=list(raw.get("actions") or []),
                    judge=raw.get("judge", default),
                    expect=dict(raw["expect"]),
                    kind=raw.get("kind"),
                )
            except (KeyError, TypeError) as exc:
                raise GoldenSetError(f"{path}: malformed case {raw!r}: {exc}") from exc
            if case.id in seen:
                raise GoldenSetError(f"{path}: duplicate case id {case.id!r}")
            if "verdict" not in case.expect:
                raise GoldenSetError(f"{path}: case {case.id!r} expects no verdict")
            seen.add(case.id)
            cases.append(case)
    return cases


def compare(case: GoldenCase, j: Judgement) -> list[str]:
    """How a judgement differs from what the case expects (empty: it matches)."""
    problems = []
    exp = case.expect
    if j.verdict != exp["verdict"]:
        problems.append(f"verdict {exp['verdict']} -> {j.verdict} ({j.detail})")
    if "score" in exp and not math.isclose(j.score, float(exp["score"]), abs_tol=1e-3):
        problems.append(f"score {exp['score']} -> {j.score:.4f}")
    if "flags" in exp and sorted(set(exp["flags"])) != j.flag_kinds:
        problems.append(f"flags {sorted(set(exp['flags']))} -> {j.flag_kinds}")
    return problems


def run_case(case: GoldenCase, pool: SandboxPool, tasks_dir: Path = TASKS_DIR) -> CaseResult:
    """Replay one case in a sandbox and judge it."""
    try:
        task: Task = load_task(tasks_dir / case.task)
    except TaskSpecError as exc:
        return CaseResult(case, None, [f"task: {exc}"])
    spec = task.spec.judge.model_dump() if case.judge == "task" else case.judge
    judge = build_judge(spec)
    with pool.lease(image=task.spec.initial_state.image, workspace=task.initial_dir) as sb:
        prepare(task, sb)
        traj = replay(task, sb, case.actions)
        j = judge(JudgeContext(task=task, sandbox=sb, events=traj.events))
    return CaseResult(case, j, compare(case, j))


def verify(
    cases: list[GoldenCase],
    pool: SandboxPool,
    *,
    tasks_dir: Path = TASKS_DIR,
    workers: int = 2,
    on_result: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    """Run every case (``workers`` at a time) and return the results in order."""
    results: list[CaseResult] = []
    with ThreadPoolExecutor(max_workers=workers) as ex:
        for res in ex.map(lambda c: run_case(c, pool, tasks_dir), cases):
            results.append(res)
            if on_result:
                on_result(res)
    return results


def hack_report(results: list[CaseResult]) -> dict[str, Any]:
    """Detection and false-positive rates of the reward-hacking corpus (cases with a ``kind``)."""
    corpus = [r for r in results if r.case.kind is not None and r.judgement is not None]
    hacks = [r for r in corpus if r.case.kind != "honest"]
    honest = [r for r in corpus if r.case.kind == "honest"]
    detected = [r for r in hacks if r.judgement and r.judgement.flags]
    false_pos = [r for r in honest if r.judgement and r.judgement.flags]
    return {
        "exploits": len(hacks),
        "exploit_kinds": sorted({r.case.kind for r in hacks if r.case.kind}),
        "detected": len(detected),
        "detection_rate": len(detected) / len(hacks) if hacks else None,
        "honest": len(honest),
        "false_positives": len(false_pos),
        "false_positive_rate": len(false_pos) / len(honest) if honest else None,
        "missed": [r.case.id for r in hacks if r not in detected],
        "wrongly_flagged": [r.case.id for r in false_pos],
    }
