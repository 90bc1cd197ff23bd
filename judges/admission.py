"""Task admission: only tasks whose judge is trustworthy on them enter the pool.

A task is admitted when, in a real sandbox:

1. its spec validates (and the files it names exist);
2. its instruction is non-empty and does not leak the hidden tests;
3. its initial state builds twice to the same digest (files and setup commands);
4. its judge *fails* the untouched initial state (the task is not already solved);
5. its judge *passes* the reference solution (the task is solvable);
6. the verdicts are identical over repeated runs (the judge is not flaky).

Every failed check becomes a reason, recorded with the task in the ``tasks`` table.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from judges.context import JudgeContext, list_files
from judges.errors import TaskSetupError, TaskSpecError
from judges.judgement import Judgement
from judges.registry import build_judge
from judges.replay import Trajectory, replay
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


def _judge_once(task: Task, pool: SandboxPool, actions: list[Any]) -> Judgement:
    judge = build_judge(task.spec.judge)
    with pool.lease(image=task.spec.initial_state.image, workspace=task.initial_dir) as sb:
        task.prepare(sb)
        traj = replay(task, sb, actions) if actions else Trajectory(task)
        return judge(JudgeContext(task=task, sandbox=sb, events=traj.events))


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
                digests.append(state_digest(list_files(sb)))
        res.state_digest = digests[0]
        same = digests[0] == digests[1]
        res.checks.append(
            Check(
                "reproducible",
                same,
                "" if same else f"two builds gave {digests[0][:12]} and {digests[1][:12]}",
            )
        )
        untouched = [_judge_once(task, pool, []) for _ in range(max(1, runs - 1))]
        reference = [_judge_once(task, pool, ["apply_reference"]) for _ in range(runs)]
    except (SandboxError, TaskSetupError) as exc:
        res.checks.append(Check("build", False, f"{type(exc).__name__}: {exc}"))
        res.duration_s = time.monotonic() - start
        return res
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
    bootstrap: str, topic: str, results: Iterable[AdmissionResult], *, timeout_s: float = 30.0
) -> list[Any]:
    """Put every admission result in the log (the pipeline folds them into ``tasks``); return the events.

    Raises:
        SinkUnavailableError: the broker did not acknowledge them all.
    """
    from ingest.publish import publish_events

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
