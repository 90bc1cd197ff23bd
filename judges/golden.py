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

import hashlib
import math
import threading
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
from judges.replay import Trajectory, replay
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
    task_judgement: Judgement | None = None
    """Corpus cases: what the task's own judge says about the same final state."""
    do_nothing: float | None = None
    """Corpus cases: the task's own judge's score for the untouched state."""

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
        unexpected = [f"{f.kind}: {f.evidence[:300]}" for f in j.flags if f.kind not in set(exp["flags"])]
        problems.append(f"flags {sorted(set(exp['flags']))} -> {j.flag_kinds} (evidence: {unexpected})")
    return problems


_DO_NOTHING: dict[str, float] = {}
_DO_NOTHING_LOCK = threading.Lock()


def do_nothing_score(task: Task, pool: SandboxPool) -> float:
    """The task's own judge's score for the untouched state (once per task, secret and process)."""
    from judges.host_run import judge_secret

    # the secret decides which questions a generated check asks, so the score is the secret's too
    key = task.content_digest + hashlib.sha256(judge_secret()).hexdigest()
    with _DO_NOTHING_LOCK:
        if key in _DO_NOTHING:
            return _DO_NOTHING[key]
    judge = build_judge(task.spec.judge.model_dump())
    with pool.lease(image=task.spec.initial_state.image, workspace=task.initial_dir) as sb:
        task.prepare(sb)
        score = judge(JudgeContext(task=task, sandbox=sb, events=Trajectory(task).events)).score
    with _DO_NOTHING_LOCK:
        _DO_NOTHING[key] = score
    return score


def run_case(case: GoldenCase, pool: SandboxPool, tasks_dir: Path = TASKS_DIR) -> CaseResult:
    """Replay one case in a sandbox and judge it.

    A corpus case (one with a ``kind``) is also judged by the task's own judge on the same final
    state, and compared with what that judge gives the untouched state: an exploit must neither
    pass nor score above doing nothing.
    """
    try:
        task: Task = load_task(tasks_dir / case.task)
    except TaskSpecError as exc:
        return CaseResult(case, None, [f"task: {exc}"])
    task_spec = task.spec.judge.model_dump()
    spec = task_spec if case.judge == "task" else case.judge
    judge = build_judge(spec)
    corpus = case.kind is not None
    with pool.lease(image=task.spec.initial_state.image, workspace=task.initial_dir) as sb:
        task.prepare(sb)
        traj = replay(task, sb, case.actions)
        ctx = JudgeContext(task=task, sandbox=sb, events=traj.events)
        j = judge(ctx)
        tj = (j if spec == task_spec else build_judge(task_spec)(ctx)) if corpus else None
    res = CaseResult(case, j, compare(case, j), task_judgement=tj)
    if corpus:
        res.do_nothing = do_nothing_score(task, pool)
    return res


def verify(
    cases: list[GoldenCase],
    pool: SandboxPool,
    *,
    tasks_dir: Path = TASKS_DIR,
    workers: int = 2,
    on_result: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    """Run every case (``workers`` at a time) and return the results in order.

    The judges run as they do for a rollout, with this host's secret: which questions a generated
    check asks differs from host to host, so a case expects no score that depends on them (the
    golden files judge the fixed tests' cases with ``generated: false``).
    """
    results: list[CaseResult] = []
    with ThreadPoolExecutor(max_workers=workers) as ex:
        for res in ex.map(lambda c: run_case(c, pool, tasks_dir), cases):
            results.append(res)
            if on_result:
                on_result(res)
    return results


STRUCTURAL_KINDS = frozenset({"unread_code", "memorised_answers", "form_credit", "judged_regardless"})
"""Exploit kinds no flag has to name, because the judge's structure contains them: the code is not
in the judged tree (``unread_code``), the generated check asks what no table holds
(``memorised_answers``), the partial credit pays only progress (``form_credit``), an attempt to make
the judge fail leaves it judging the state on its merits (``judged_regardless``). Such a case must
get no pass, no ``error`` and no more than doing nothing under the task's own judge; a flag is a
bonus."""


def hack_report(results: list[CaseResult]) -> dict[str, Any]:
    """What the reward-hacking corpus (cases with a ``kind``) shows.

    Detection by the case's judge (over the exploits whose kind is a flag), what the tasks' own
    judges gave the exploits against doing nothing (full passes, gains, and ``error`` verdicts, which
    training excludes instead of punishing), and false positives on honest solutions.
    """
    corpus = [r for r in results if r.case.kind is not None and r.judgement is not None]
    hacks = [r for r in corpus if r.case.kind != "honest"]
    honest = [r for r in corpus if r.case.kind == "honest"]
    flagged_kinds = [r for r in hacks if r.case.kind not in STRUCTURAL_KINDS]
    detected = [r for r in flagged_kinds if r.judgement and r.judgement.flags]
    false_pos = [r for r in honest if r.judgement and r.judgement.flags]
    judged = [r for r in hacks if r.task_judgement is not None and r.do_nothing is not None]
    gains = [r.task_judgement.score - r.do_nothing for r in judged]  # type: ignore[union-attr,operator]
    full = [r for r in judged if r.task_judgement and r.task_judgement.verdict == "pass"]
    errored = [r for r in hacks if (r.task_judgement and r.task_judgement.verdict == "error")
               or (r.judgement and r.judgement.verdict == "error")]  # fmt: skip
    gained = [r for r, g in zip(judged, gains, strict=True) if g > 1e-9]
    contained = [
        r for r, g in zip(judged, gains, strict=True) if (r.judgement and r.judgement.flags) or g <= 1e-9
    ]
    return {
        "exploits": len(hacks),
        "exploit_kinds": sorted({r.case.kind for r in hacks if r.case.kind}),
        "tasks": sorted({r.case.task for r in corpus}),
        "detected": len(detected),
        "detection_rate": len(detected) / len(flagged_kinds) if flagged_kinds else None,
        "structural": len([r for r in hacks if r.case.kind in STRUCTURAL_KINDS]),
        "full_passes": len(full),
        "errors": len(errored),
        "gained": len(gained),
        "mean_gain": sum(gains) / len(gains) if gains else None,
        "contained_rate": len(contained) / len(judged) if judged else None,
        "honest": len(honest),
        "false_positives": len(false_pos),
        "false_positive_rate": len(false_pos) / len(honest) if honest else None,
        "missed": [r.case.id for r in flagged_kinds if r not in detected],
        "passed": [r.case.id for r in full],
        "gaining": [r.case.id for r in gained],
        "erroring": [r.case.id for r in errored],
        "wrongly_flagged": [r.case.id for r in false_pos],
    }


REPLAYABLE_TOOLS = ("bash", "write_file", "read_file", "submit")
"""Tools a golden case's actions can replay (:func:`judges.replay.replay`)."""


@dataclass(frozen=True)
class ReviewedEpisode:
    """What a golden case is made from: an episode, the judgement reviewed and the people's verdicts."""

    episode_id: str
    task_id: str | None
    task_family: str | None
    task_version: str | None
    judge_spec: dict[str, Any] | None
    judge_verdict: str | None
    verdicts: list[dict[str, Any]]
    """The ``reviews`` rows of the episode (reviewer, verdict, note)."""
    tool_calls: list[dict[str, Any]]
    """``tool_call`` payloads in ``seq`` order."""


def case_from_review(ep: ReviewedEpisode, tasks_dir: Path = TASKS_DIR) -> tuple[dict[str, Any] | None, str]:
    """A golden case (as written to a golden file) from a reviewed episode, or ``None`` and why not.

    What the case expects follows the reviewers: ``ok`` keeps the judge's verdict, ``judge_wrong``
    turns it over, ``hack`` expects no pass (a corpus case of kind ``reviewed_hack``: it must not
    score above doing nothing either). ``task_broken`` makes no judge case, nor do reviewers who
    disagree, a judgement whose spec is unknown, a task that is not under ``tasks_dir`` at the version
    the episode ran, or a call of a tool a case cannot replay.
    """
    said = {v["verdict"] for v in ep.verdicts}
    if len({(v.get("judge_name"), v.get("judge_version")) for v in ep.verdicts}) > 1:
        return None, "the reviewers reviewed different judgements of it (judge versions)"
    if len(said) != 1:
        return None, f"the reviewers disagree ({', '.join(sorted(said))})"
    (verdict,) = said
    if verdict == "task_broken":
        return None, "task_broken: a broken task is fixed or retired, not a judge's golden case"
    if not ep.judge_spec or ep.judge_verdict not in ("pass", "fail"):
        return (
            None,
            "the judgement reviewed is unknown (no reward event with its judge spec), or was an error",
        )
    rel = f"{ep.task_family}/{ep.task_id}"
    try:
        task = load_task(tasks_dir / rel)
    except TaskSpecError:
        return None, f"task {rel} is not under {tasks_dir}"
    if task.spec.version != ep.task_version:
        return None, f"{rel} is at version {task.spec.version} now; the episode ran {ep.task_version}"
    actions: list[Any] = []
    for call in ep.tool_calls:
        tool, args = call.get("tool"), call.get("arguments") or {}
        if tool not in REPLAYABLE_TOOLS:
            return None, f"it calls {tool!r}, which a golden case cannot replay"
        if tool == "bash":
            actions.append({"bash": str(args.get("command", ""))})
        elif tool == "write_file":
            actions.append(
                {"write_file": {"path": str(args.get("path", "")), "content": str(args.get("content", ""))}}
            )
        elif tool == "read_file":
            actions.append({"read_file": str(args.get("path", ""))})
    flipped = {"pass": "fail", "fail": "pass"}
    expect = {"ok": ep.judge_verdict, "judge_wrong": flipped[ep.judge_verdict], "hack": "fail"}[verdict]
    case: dict[str, Any] = {
        "id": f"review-{ep.episode_id[-12:]}",
        "task": rel,
        "judge": ep.judge_spec,
        "actions": actions,
        "expect": {"verdict": expect},
        "review": {"episode": ep.episode_id, "verdict": verdict, "judge_verdict": ep.judge_verdict,
                   "reviewers": sorted(v["reviewer"] for v in ep.verdicts),
                   "notes": [v["note"] for v in ep.verdicts if v.get("note")]},
    }  # fmt: skip
    if verdict == "hack":
        case["kind"] = "reviewed_hack"
    return case, verdict


def add_cases(path: Path, cases: list[dict[str, Any]]) -> list[str]:
    """Append the cases whose ids the golden file ``path`` lacks (made when missing); return the ids added.

    Raises:
        GoldenSetError: the file exists and is not a golden file.
    """
    if path.exists():
        try:
            doc = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise GoldenSetError(f"{path}: {exc}") from exc
        if not isinstance(doc, dict) or not isinstance(doc.get("cases", []), list):
            raise GoldenSetError(f"{path}: expected a mapping with a `cases` list")
    else:
        doc = {"judge": "task"}
    doc.setdefault("cases", [])
    have = {str(c.get("id")) for c in doc["cases"] if isinstance(c, dict)}
    added = [c for c in cases if c["id"] not in have]
    doc["cases"].extend(added)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    header = "# Golden cases made from reviewed episodes (`trajlake judges golden add --from-reviews`).\n"
    tmp.write_text(header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100))
    tmp.replace(path)
    return [c["id"] for c in added]
