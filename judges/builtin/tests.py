"""``tests``: run the task's hidden tests and judge by their results.

Trust boundary: the agent controls every file of the workspace and any code the
tests import, so the verdict must rest on nothing that code can write. Where the
tests run is the task's ``hidden_tests.runs``:

``outputs`` / ``bridge`` (every shipped family)
    The hidden tests run in the judge's own pytest on the host, and its JUnit
    report is written where the sandbox cannot reach (:mod:`judges.host_run`).
    With ``outputs`` no agent code runs at all while it is judged; with
    ``bridge`` the agent's package is called across a pipe from the sandbox and
    sees only the calls' arguments, never the tests or their expected values. A
    bridge the agent's code breaks (an exit, a kill, a forged frame) is a
    ``fail`` flagged ``judge_run_ended_by_agent``, never an ``error``.
``sandbox``
    The hidden tests are copied into the workspace at judging time and run there
    under ``python3 -I`` with ``--noconftest``, no ini-file and plugin autoloading
    off, after every process the agent left has been killed. The agent's code then
    shares the test process, so the report is cross-checked against pytest's exit
    status and its console summary; disagreement is flagged.

``error`` is left for the judge's own faults and the sandbox's.
"""

from __future__ import annotations

import errno
import functools
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from judges.context import JudgeContext
from judges.errors import WorkspaceUnjudgeable
from judges.generated import (
    bridge_cases,
    is_generated,
    procedure_runs,
    seed_for,
    write_bridge_check,
    write_procedure_check,
)
from judges.host_run import NO_BYTECODE, HostRun, agent_modules, order_seed, run_bridge, run_outputs
from judges.judgement import Flag, TestOutcome
from judges.junit import parse_junit
from judges.registry import Judge, JudgeConfig, Outcome, register_judge
from sandboxes.errors import SandboxError

_RUNNER = (
    "import sys; sys.path.append('/workspace'); import pytest; raise SystemExit(pytest.main(sys.argv[1:]))"
)
_STATUSES = ("passed", "failed", "error", "skipped")
_PYTEST_EXIT = {0: "all passed", 1: "some failed", 2: "interrupted (collection errors)", 3: "internal error",
                4: "usage error", 5: "no tests collected"}  # fmt: skip


class TestsConfig(JudgeConfig):
    """Configuration of the ``tests`` judge."""

    timeout_s: float = 120.0
    """Wall-clock limit of the test run; running past it is the policy's failure."""
    extra_args: list[str] = []
    """More pytest arguments."""
    runs: Literal["outputs", "bridge", "sandbox"] | None = None
    """Where the hidden tests run, instead of the task's ``hidden_tests.runs`` (``None``: the task's)."""
    generated: bool = True
    """Ask the task's generated check too, where it has one (``False``: its fixed tests only, a looser
    judge version that a lookup table of the fixed examples passes)."""


@register_judge
class TestsJudge(Judge):
    """Score = fraction of hidden tests passing; pass only when all pass."""

    name = "tests"
    Config = TestsConfig
    code_modules = (
        "judges.junit", "judges.context", "judges.host_run", "judges.bridge", "judges.bridge_plugin",
        "judges.pytest_server", "judges.final_state", "judges.generated",
    )  # fmt: skip
    config: TestsConfig

    def _judge(self, ctx: JudgeContext) -> Outcome:
        hidden = ctx.task.hidden_files()
        if not hidden:
            return Outcome(0.0, "error", detail="the task has no hidden tests")
        ctx.judged_sandbox()  # everything below runs in exactly the judged tree
        before = _sent(ctx)
        outcome = self._run(ctx, hidden)
        after = _sent(ctx)
        if before is None or after is None or after[0] <= before[0]:
            return outcome
        # the agent's code, run by the hidden tests, tried to reach a network: never a pass
        flag = Flag(kind="network_attempt", evidence=f"during the hidden tests: {after[1]}")
        detail = "the agent's code tried to reach the network during the judge's run"
        return Outcome(0.0, "fail", {"tests": 0.0}, outcome.evidence, [*outcome.flags, flag], detail=detail)

    def _run(self, ctx: JudgeContext, hidden: dict[str, bytes]) -> Outcome:
        spec = ctx.task.spec.hidden_tests
        runs = self.config.runs or spec.runs
        state = ctx.final_state()  # and the sandbox holds exactly it (see _judge)
        if runs == "sandbox":
            return self._in_sandbox(ctx, hidden, spec.target)
        gen = ctx.task.spec.generated if self.config.generated else None
        seed = seed_for(ctx.task) if gen is not None else 0
        args = dict(timeout=self.config.timeout_s, extra_args=list(self.config.extra_args))
        extra: Callable[[Path], None] | None = None
        if runs == "outputs":
            if gen is not None and gen.procedure is not None:
                procedure = procedure_runs(ctx.task, ctx.sandbox, state, seed)
                extra = functools.partial(write_procedure_check, task=ctx.task, runs=procedure)
            run = run_outputs(state, hidden, spec.target, extra=extra, **args)  # type: ignore[arg-type]
        else:
            if gen is not None:
                cases = bridge_cases(ctx.task, seed)
                extra = functools.partial(write_bridge_check, task=ctx.task, cases=cases)
            modules = agent_modules(ctx.task.initial_dir, spec.target)
            order = order_seed(ctx.task.id + "\0" + state.digest)
            run = run_bridge(ctx.sandbox, hidden, spec.target, modules, order=order, extra=extra, **args)  # type: ignore[arg-type]
        return self._host_verdict(run, runs)

    def _host_verdict(self, run: HostRun, mode: str) -> Outcome:
        outcomes = run.outcomes
        counts = {s: sum(1 for o in outcomes if o.status == s) for s in _STATUSES}
        evidence: dict[str, Any] = {
            "runs": mode,
            "tests": [o.model_dump(exclude_defaults=True) for o in outcomes],
            **counts,
            "exit_code": run.exit_code,
            "duration_s": round(run.duration_s, 3),
            "output_tail": run.output[-1500:],
        }
        if run.bridge is not None:
            evidence["bridge"] = run.bridge
        server = run.server
        if server is not None:
            evidence["server"] = {"exit_code": server.exit_code, "timed_out": server.timed_out,
                                  "oom_killed": server.oom_killed,
                                  "output_tail": (server.stdout + server.stderr)[-1000:]}  # fmt: skip
        score, components = _score(outcomes)
        evidence.update({f"{k}_share": v for k, v in components.items()})
        total = len(outcomes)
        passed_n = counts["passed"]
        if run.timed_out:  # the agent's code looping: the judge's pytest was stopped at the limit
            return Outcome(score, "fail", components, evidence,
                           detail=f"tests timed out after {run.duration_s:.0f}s")  # fmt: skip
        if mode == "bridge" and (run.bridge is None or not run.bridge.get("connected")):
            why = (run.bridge or {}).get("error") or "the judge's pytest never reached it"
            return Outcome(
                0.0, "error", evidence=evidence, detail=f"the bridge to the sandbox did not open: {why}"
            )
        broken = (run.bridge or {}).get("broken")
        if broken:
            if server is not None and server.oom_killed:
                return Outcome(
                    score, "fail", components, evidence, detail="the agent's code ran out of memory"
                )
            if server is not None and server.timed_out:
                return Outcome(score, "fail", components, evidence,
                               detail=f"tests timed out after {run.duration_s:.0f}s")  # fmt: skip
            code = server.exit_code if server is not None else None
            said = f"the agent's side of the bridge ended the run: {broken} (its process exited {code})"
            flag = Flag(kind="judge_run_ended_by_agent",
                        evidence=f"{said} after {passed_n} of {total} tests passed")  # fmt: skip
            return Outcome(0.0, "fail", {k: 0.0 for k in components}, evidence, [flag],
                           detail="the agent's code ended the judge's run")  # fmt: skip
        if run.exit_code in (3, 4, 5) or (not run.report_ok):
            why = _PYTEST_EXIT.get(run.exit_code or -1, f"exit {run.exit_code}")
            return Outcome(0.0, "error", evidence=evidence, detail=f"the test run could not be judged: {why}")
        if not outcomes:
            return Outcome(0.0, "fail", {"tests": 0.0}, evidence, detail="tests could not be collected")
        passed = run.exit_code == 0 and passed_n == total
        detail = None if passed else f"{total - passed_n} of {total} hidden tests did not pass"
        return Outcome(score if passed else min(score, _BELOW_PASS), "pass" if passed else "fail", components,
                       evidence, detail=detail)  # fmt: skip

    def _in_sandbox(self, ctx: JudgeContext, hidden: dict[str, bytes], target: str) -> Outcome:
        sb = ctx.sandbox  # reset to the judged tree (which leaves the hidden tests' name out)
        try:
            for rel, data in hidden.items():
                sb.write_file(f"{target}/{rel}", data)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):  # the agent filled its workspace
                why = "the workspace is full: the hidden tests cannot be copied in"
                raise WorkspaceUnjudgeable(why) from exc
            raise
        report = f"/tmp/trajlake-junit-{uuid.uuid4().hex}.xml"
        argv = [
            "python3", "-I", *NO_BYTECODE, "-c", _RUNNER,
            "-q", "-p", "no:cacheprovider", "--noconftest", "-c", "/dev/null", "--rootdir", "/workspace",
            f"--junitxml={report}", "-o", "junit_family=xunit1", *self.config.extra_args, target,
        ]  # fmt: skip
        run = sb.exec(argv, timeout=self.config.timeout_s, env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
        xml = sb.exec(["cat", report], timeout=30)
        outcomes: list[TestOutcome] = []
        if xml.exit_code == 0 and xml.stdout.strip():
            try:
                outcomes = parse_junit(xml.stdout)
            except ValueError:
                outcomes = []
        counts = {
            s: sum(1 for o in outcomes if o.status == s) for s in ("passed", "failed", "error", "skipped")
        }
        evidence = {
            "tests": [o.model_dump(exclude_defaults=True) for o in outcomes],
            **counts,
            "exit_code": run.exit_code,
            "duration_s": run.duration_s,
            "output_tail": (run.stdout + run.stderr)[-1500:],
        }
        total = len(outcomes)
        if run.timed_out:
            score = counts["passed"] / total if total else 0.0
            return Outcome(
                score,
                "fail",
                {"tests": score},
                evidence,
                detail=f"tests timed out after {run.duration_s:.0f}s",
            )
        if run.exit_code in (3, 4, 5) or (not outcomes and run.exit_code not in (1, 2)):
            why = _PYTEST_EXIT.get(run.exit_code, f"exit {run.exit_code}")
            return Outcome(0.0, "error", evidence=evidence, detail=f"the test run could not be judged: {why}")
        if not outcomes:
            # collection failed before any test ran: the agent's code does not import
            return Outcome(0.0, "fail", {"tests": 0.0}, evidence, detail="tests could not be collected")
        score = counts["passed"] / total
        disagree = _disagreement(counts, run.exit_code, run.stdout + run.stderr)
        if disagree:
            flag = Flag(kind="report_disagrees", evidence=disagree)
            return Outcome(0.0, "fail", {"tests": 0.0}, evidence, [flag],
                           detail="the test report disagrees with the test run")  # fmt: skip
        passed = run.exit_code == 0 and counts["passed"] == total
        detail = None if passed else f"{total - counts['passed']} of {total} hidden tests did not pass"
        return Outcome(score, "pass" if passed else "fail", {"tests": score}, evidence, detail=detail)


_BELOW_PASS = 0.999
"""A run that does not pass scores below 1 whatever its shares are."""


def _score(outcomes: list[TestOutcome]) -> tuple[float, dict[str, float]]:
    """The score and its components.

    Without a generated check: the share of hidden tests passed. With one: the share of generated
    checks passed. The fixed tests' own share is reported (``tests``) but not paid for: their
    inputs and answers are known in advance, so a lookup table passes them and a partial credit
    for them would pay a table above doing nothing; they gate the pass instead (a run with a
    failing fixed test scores below the generated checks' whole share at most, see ``_host_verdict``).
    """
    fixed = [o for o in outcomes if not is_generated(o.name)]
    gen = [o for o in outcomes if is_generated(o.name)]

    def share(xs: list[TestOutcome]) -> float:
        return sum(1 for o in xs if o.status == "passed") / len(xs) if xs else 0.0

    if not gen:
        return share(fixed), {"tests": share(fixed)}
    g = share(gen)
    cap = (len(gen) - 1) / len(gen)  # below every generated check passing
    score = g if all(o.status == "passed" for o in fixed) else min(g, cap)
    return score, {"tests": share(fixed), "generated": g}


def _sent(ctx: JudgeContext) -> tuple[int, str] | None:
    """Packets the sandbox's namespace has seen so far and their description (None: not observed)."""
    try:
        report = ctx.sandbox.network_report()
    except SandboxError:
        return None
    return None if report is None else (report.packets + report.lookups, report.describe())


_SUMMARY = re.compile(r"(\d+) (passed|failed|errors?|skipped)")


def _disagreement(counts: dict[str, int], exit_code: int, console: str) -> str | None:
    """Where the report, pytest's exit status and its console summary disagree (None: they agree)."""
    bad = counts["failed"] + counts["error"]
    if exit_code == 0 and bad:
        return f"pytest exited 0 but the report has {bad} failed tests"
    if exit_code == 1 and not bad:
        return "pytest exited 1 (tests failed) but every test in the report passed"
    lines = [ln for ln in console.splitlines() if _SUMMARY.search(ln) and " in " in ln]
    if not lines:
        return None if exit_code != 0 else "pytest exited 0 without its summary line"
    said: dict[str, int] = {}
    for n, what in _SUMMARY.findall(lines[-1]):
        key = "error" if what.startswith("error") else what
        said[key] = said.get(key, 0) + int(n)
    for key in ("passed", "failed"):
        if said.get(key, 0) != counts[key]:
            return f"the console says {said.get(key, 0)} {key}, the report {counts[key]}"
    return None
