"""Task admission: only tasks whose judge is trustworthy on them enter the pool.

A task is admitted when, in a real sandbox:

1. its spec validates (and the files it names exist);
2. its instruction is non-empty and does not leak the hidden tests;
3. its initial state builds twice to the same digest (files and setup commands);
4. its judge *fails* the untouched initial state (the task is not already solved);
5. its judge *passes* the reference solution (the task is solvable);
6. the verdicts are identical over repeated runs (the judge is not flaky);
7. its generated check (where the task has one, :mod:`judges.generated`) is passed whole by the
   reference, not by the untouched state, and draws and answers the same questions every time
   for one seed; a task of a family that asks for one and has none is refused, and a task with
   no generated check at all is reported (``notes``);
8. no null-effort state (:mod:`judges.null_effort`: outputs emptied, echoed, sorted, padded
   with placeholders or zeros; a package of stubs) scores above doing nothing under the task's
   judge: a partial credit for form is refused with the task.

Every failed check becomes a reason, recorded with the task in the ``tasks`` table.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from judges.context import JudgeContext, initial_tree
from judges.errors import TaskSetupError, TaskSpecError, WorkspaceUnjudgeable
from judges.final_state import WORKSPACE_LIMIT, FinalState, read_archive
from judges.generated import GeneratedCheckError
from judges.host_run import agent_modules
from judges.judgement import Judgement
from judges.null_effort import NullEffort, output_nulls, package_nulls
from judges.registry import build_judge
from judges.replay import Trajectory, replay
from judges.splits import split_of
from judges.tasks import Task, load_task
from sandboxes.errors import SandboxError
from sandboxes.interface import SandboxSpec
from sandboxes.pool import SandboxPool

ADMISSION_SPEC = SandboxSpec(memory_mb=1024, pids=256, disk_mb=256, tmp_mb=128, exec_timeout_s=300)


@dataclass(frozen=True)
class Check:
    """One admission check."""

    name: str
    ok: bool
    detail: str = ""


@dataclass
class AdmissionResult:
    """Whether a task was admitted, and why (not)."""

    path: str
    task: Task | None
    checks: list[Check] = field(default_factory=list)
    state_digest: str | None = None
    verdicts: dict[str, list[str]] = field(default_factory=dict)
    duration_s: float = 0.0
    do_nothing_score: float | None = None
    """The task's judge's score for the untouched state: the partial credit a policy gets for doing
    nothing, which training and analysis should see (an exploit must not score above it)."""
    null_effort_scores: dict[str, float] = field(default_factory=dict)
    """The task's judge's score for each null-effort state (none may exceed ``do_nothing_score``)."""
    notes: list[str] = field(default_factory=list)
    """What admission reports without refusing the task (e.g. that it has no generated check)."""
    split: str | None = None
    """The split recorded with the result (``None``: :func:`judges.splits.split_of` with no record)."""

    @property
    def admitted(self) -> bool:
        """Every check passed."""
        return bool(self.checks) and all(c.ok for c in self.checks)

    @property
    def reasons(self) -> list[str]:
        """One line per failed check."""
        return [f"{c.name}: {c.detail}" for c in self.checks if not c.ok]

    @property
    def task_id(self) -> str:
        """The task's id, or its path when the spec did not load."""
        return self.task.id if self.task else self.path

    def row(self) -> dict[str, Any]:
        """The task's row of the ``tasks`` table."""
        spec = self.task.spec if self.task else None
        return {
            "task_id": self.task_id,
            "version": spec.version if spec else "?",
            "family": spec.family if spec else "?",
            "tier": spec.tier if spec else None,
            "spec": json.dumps(spec.model_dump(mode="json"), sort_keys=True) if spec else "{}",
            "spec_digest": self.task.spec_digest if self.task else "",
            "state_digest": self.state_digest,
            "admitted": self.admitted,
            "reasons": self.reasons,
            "admitted_at": dt.datetime.now(dt.UTC),
            "do_nothing_score": self.do_nothing_score,
            "null_effort_max": max(self.null_effort_scores.values()) if self.null_effort_scores else None,
            "split": self.split or (split_of(self.task, {}) if self.task else None),
        }

    def event(self) -> Any:
        """The result as an event of its control stream ``task:<id>@<version>`` (the ``tasks`` row)."""
        from schemas.control import TASK, control_event

        return control_event(TASK, self.row(), "admission")


def instruction_leaks(task: Task) -> list[str]:
    """What of the hidden tests the instruction gives away (names, paths, verbatim lines)."""

    def norm(s: str) -> str:
        return re.sub(r"\s+", " ", s).strip()

    text = task.spec.instruction
    flat = norm(text)
    leaks = []
    hidden = task.hidden_files()
    for name in {task.spec.hidden_tests.target, task.spec.hidden_tests.dir}:
        if name and name in text:
            leaks.append(f"names the hidden test location {name!r}")
    for rel, data in hidden.items():
        src = data.decode("utf-8", "replace")
        if PurePosixPath(rel).name in text:
            leaks.append(f"names the hidden test file {PurePosixPath(rel).name!r}")
        for fn in re.findall(r"def\s+(test_\w+)", src):
            if re.search(rf"\b{re.escape(fn)}\b", text):
                leaks.append(f"names the hidden test {fn!r}")
        for line in src.splitlines():
            n = norm(line)
            # an issue may show the same call as a test does; quoting a test's *check* gives it away
            is_check = n.startswith(("assert ", "with pytest.raises", "pytest.raises"))
            if is_check and len(n) >= 25 and n in flat:
                leaks.append(f"quotes a hidden test check: {n[:80]!r}")
    return sorted(set(leaks))


def state_digest(files: dict[str, str]) -> str:
    """Digest of a workspace listing (path -> sha256)."""
    return hashlib.sha256(json.dumps(sorted(files.items())).encode()).hexdigest()


@dataclass
class _Judged:
    judgement: Judgement
    state: FinalState | None


def _judge_once(
    task: Task, pool: SandboxPool, actions: list[Any], files: dict[str, bytes] | None = None
) -> _Judged:
    """Judge the task's initial state after ``actions`` (or with ``files`` written over it)."""
    return _judge_states(task, pool, [files or {}], actions)[0]


def _judge_states(
    task: Task, pool: SandboxPool, states: list[dict[str, bytes]], actions: list[Any] | None = None
) -> list[_Judged]:
    """Judge each state (files written over the task's initial state, after ``actions``), in one lease."""
    judge = build_judge(task.spec.judge)
    out = []
    with pool.lease(image=task.spec.initial_state.image, workspace=task.initial_dir) as sb:
        for files in states:
            task.prepare(sb)
            traj = replay(task, sb, actions) if actions else Trajectory(task)
            for path, data in files.items():
                sb.write_file(path, data, mode=0o755 if path.endswith(".sh") else 0o644)
            ctx = JudgeContext(task=task, sandbox=sb, events=traj.events)
            j = judge(ctx)
            out.append(_Judged(j, ctx._state if isinstance(ctx._state, FinalState) else None))
    return out


def generated_share(j: Judgement) -> float | None:
    """The share of the generated check a judgement reports (``None``: it ran none)."""

    def find(v: Any) -> float | None:
        if isinstance(v, dict):
            if isinstance(v.get("generated_share"), int | float):
                return float(v["generated_share"])
            for x in v.values():
                got = find(x)
                if got is not None:
                    return got
        return None

    return find(j.evidence)


def _generated_checks(task: Task, untouched: list[Judgement], reference: list[Judgement],
                      pool: SandboxPool) -> tuple[list[Check], list[str]]:  # fmt: skip
    """The generated check's admission checks (see the module docstring), and notes."""
    gen = task.spec.generated
    if gen is None:
        return [], ["no generated check: the hidden tests ask fixed questions only"]
    path = task.generator_path
    if path is None or not path.is_file():
        return [
            Check("generated", False, f"the family asks for a generated check and {gen.module} is missing")
        ], []
    ref = [generated_share(j) for j in reference]
    un = [generated_share(j) for j in untouched]
    problems = []
    if any(r is None for r in ref):
        problems.append("the judge ran no generated check on the reference")
    elif any(r < 1.0 for r in ref):  # type: ignore[operator]
        problems.append(f"the reference passes {min(ref):.0%} of it, not all")  # type: ignore[type-var]
    if all(u is not None and u >= 1.0 for u in un):
        problems.append("the untouched state passes all of it (it asks nothing the bug gets wrong)")
    try:
        _deterministic(task, pool)
    except GeneratedCheckError as exc:
        problems.append(str(exc))
    return [Check("generated", not problems, "; ".join(problems))], []


def _deterministic(task: Task, pool: SandboxPool) -> None:
    """The generator draws, and the reference answers, the same for one seed every time.

    Raises:
        GeneratedCheckError: they differ (or the generator or the reference failed).
    """
    import secrets

    from judges.generated import _read_outputs, bridge_cases, input_sets
    from judges.replay import apply_reference

    gen = task.spec.generated
    assert gen is not None
    seed = secrets.randbits(63)
    if gen.procedure is None:
        first = bridge_cases(task, seed, cached=False)
        again = bridge_cases(task, seed, cached=False)
        if first != again:
            raise GeneratedCheckError("the generated check draws or answers differently for the same seed")
        return
    sets = input_sets(task, seed)
    if sets.sets != input_sets(task, seed, cached=False).sets:
        raise GeneratedCheckError("the generator draws different inputs for the same seed")
    initial = initial_tree(task.initial_dir)
    gone = tuple(sets.inputs) + tuple(sets.outputs)
    outs = []
    with pool.lease(image=task.spec.initial_state.image, workspace=task.initial_dir) as sb:
        for _ in range(2):
            initial.edited(remove=gone, replace=sets.sets[0]).load_into(sb)
            r = apply_reference(task, sb)
            if r.exit_code != 0:
                raise GeneratedCheckError(
                    f"the reference fails on generated inputs: {(r.stderr or r.stdout)[-200:]}"
                )
            outs.append(_read_outputs(sb, sets.outputs))
    if outs[0] != outs[1]:
        differ = sorted(p for p in set(outs[0]) | set(outs[1]) if outs[0].get(p) != outs[1].get(p))
        raise GeneratedCheckError(f"the reference writes different outputs for the same inputs: {differ[:3]}")


def _null_states(task: Task, untouched: FinalState | None, reference: FinalState | None) -> list[NullEffort]:
    spec = task.spec
    if untouched is None or reference is None:
        return []
    if spec.hidden_tests.runs == "bridge":
        return package_nulls(untouched, agent_modules(task.initial_dir, spec.hidden_tests.target))
    if spec.hidden_tests.runs == "outputs":
        return output_nulls(untouched, reference, spec.generated.procedure if spec.generated else None)
    return []


def admit(path: str | Path, pool: SandboxPool, *, runs: int = 3) -> AdmissionResult:
    """Run every admission check of one task.

    Args:
        path: the task directory (or its ``task.yaml``).
        pool: sandboxes to build and judge in.
        runs: how many times the reference solution is judged (flakiness).
    """
    start = time.monotonic()
    res = AdmissionResult(path=str(path), task=None)
    try:
        task = load_task(path)
    except TaskSpecError as exc:
        res.checks.append(Check("spec", False, str(exc)))
        return res
    res.task = task
    res.checks.append(Check("spec", True))
    leaks = instruction_leaks(task)
    res.checks.append(Check("instruction", not leaks, "; ".join(leaks)))
    try:
        digests = []
        with pool.lease(image=task.spec.initial_state.image, workspace=task.initial_dir) as sb:
            for _ in range(2):
                task.prepare(sb)
                digests.append(read_archive(sb.export_workspace(max_bytes=WORKSPACE_LIMIT)).digest)
        res.state_digest = digests[0]
        same = digests[0] == digests[1]
        res.checks.append(
            Check(
                "reproducible",
                same,
                "" if same else f"two builds gave {digests[0][:12]} and {digests[1][:12]}",
            )
        )
        untouched_runs = [_judge_once(task, pool, []) for _ in range(max(1, runs - 1))]
        reference_runs = [_judge_once(task, pool, ["apply_reference"]) for _ in range(runs)]
        untouched = [r.judgement for r in untouched_runs]
        reference = [r.judgement for r in reference_runs]
        gen_checks, notes = _generated_checks(task, untouched, reference, pool)
        nulls = _null_states(task, untouched_runs[0].state, reference_runs[0].state)
        judged = _judge_states(task, pool, [n.files for n in nulls])
        null_scores = {n.name: j.judgement for n, j in zip(nulls, judged, strict=True)}
    except (SandboxError, TaskSetupError, WorkspaceUnjudgeable) as exc:
        res.checks.append(Check("build", False, f"{type(exc).__name__}: {exc}"))
        res.duration_s = time.monotonic() - start
        return res
    res.notes = notes
    res.verdicts = {"untouched": [j.verdict for j in untouched], "reference": [j.verdict for j in reference]}
    u = untouched[0]
    res.do_nothing_score = u.score
    if u.verdict == "pass":
        res.checks.append(
            Check("fails_untouched", False, "the judge passes the untouched state (already solved)")
        )
    elif u.verdict == "error":
        res.checks.append(
            Check("fails_untouched", False, f"the judge errors on the untouched state: {u.detail}")
        )
    else:
        res.checks.append(Check("fails_untouched", True))
    r = reference[0]
    if r.verdict == "pass":
        res.checks.append(Check("passes_reference", True))
    else:
        res.checks.append(
            Check("passes_reference", False, f"the judge gives {r.verdict} on the reference: {r.detail}")
        )
    keys = {(j.verdict, j.score) for j in reference}
    ukeys = {j.verdict for j in untouched}
    stable = len(keys) == 1 and len(ukeys) == 1
    res.checks.append(
        Check(
            "deterministic",
            stable,
            "" if stable else f"verdicts vary over runs: reference {sorted(keys)}, untouched {sorted(ukeys)}",
        )
    )
    res.checks += gen_checks
    res.null_effort_scores = {name: j.score for name, j in null_scores.items()}
    beating = [f"{name} scores {j.score:.3f}" for name, j in null_scores.items() if j.score > u.score + 1e-9]
    errored = [f"{name} ({j.detail})" for name, j in null_scores.items() if j.verdict == "error"]
    problems = []
    if beating:
        problems.append(
            f"null-effort outputs score above doing nothing ({u.score:.3f}): " + ", ".join(beating)
        )
    if errored:
        problems.append("the judge errors on null-effort states: " + "; ".join(errored))
    if nulls:
        res.checks.append(Check("null_effort", not problems, "; ".join(problems)))
    res.duration_s = time.monotonic() - start
    return res


def rejection_reasons(results: Iterable[AdmissionResult]) -> Counter[str]:
    """Every distinct reason a task was rejected for, with how many tasks it rejected."""
    return Counter(reason for r in results for reason in dict.fromkeys(r.reasons))


def admit_all(
    paths: Iterable[str | Path],
    pool: SandboxPool,
    *,
    runs: int = 3,
    workers: int = 2,
    on_result: Callable[[AdmissionResult], None] | None = None,
) -> list[AdmissionResult]:
    """Admit many tasks concurrently (``workers`` threads over the pool's sandboxes)."""
    from concurrent.futures import ThreadPoolExecutor

    out: list[AdmissionResult] = []
    with ThreadPoolExecutor(max_workers=workers) as ex:
        for res in ex.map(lambda p: admit(p, pool, runs=runs), list(paths)):
            out.append(res)
            if on_result:
                on_result(res)
    return out


def publish_admissions(
    bootstrap: str,
    topic: str,
    results: Iterable[AdmissionResult],
    *,
    recorded_splits: Mapping[str, str] | None = None,
    timeout_s: float = 30.0,
) -> list[Any]:
    """Put every admission result in the log (the pipeline folds them into ``tasks``); return the events.

    Each result carries its task's split: the one ``recorded_splits`` (the lake's
    :func:`rollouts.sampler.recorded_splits`) already holds for it, else a new one (a task's
    split is assigned once, at its first admission).

    Raises:
        SinkUnavailableError: the broker did not acknowledge them all.
    """
    from ingest.publish import publish_events

    results = list(results)
    for r in results:
        if r.task is not None:
            r.split = split_of(r.task, recorded_splits or {})
    events = [r.event() for r in results]
    publish_events(bootstrap, topic, events, timeout_s=timeout_s)
    return events


def shared_judge(tasks: Iterable[Task]) -> tuple[str, str]:
    """The judge name and version the tasks' rewards carry (they must share one: one training signal).

    Raises:
        AdmissionError: there are no tasks, or they are judged by more than one judge version.
    """
    from judges.errors import AdmissionError

    judges = {(j.name, j.version) for j in (build_judge(t.spec.judge) for t in tasks)}
    if not judges:
        raise AdmissionError("no admitted tasks, so there is no judge to train against")
    if len(judges) != 1:
        raise AdmissionError(
            "the tasks are judged by several judges ("
            + ", ".join(f"{n} {v}" for n, v in sorted(judges))
            + "); train on one family, or give them one judge"
        )
    return judges.pop()
