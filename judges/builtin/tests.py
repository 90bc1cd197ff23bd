"""``tests``: run the task's hidden tests in the sandbox and judge by their results.

The hidden tests are copied into the workspace only now, at judging time. They
run under an isolated interpreter (``python3 -I``: no current directory or
``PYTHON*`` variables on the path before pytest is imported, so a ``pytest.py``
the agent planted cannot stand in for pytest), with ``--noconftest`` and no
ini-file (so a planted ``conftest.py`` or ``pytest.ini`` cannot skip or rewrite
them) and plugin autoloading off. Results come from pytest's JUnit report,
written to a path the agent cannot guess, after every process the agent left
running has been killed.
"""

from __future__ import annotations

import uuid

from judges.context import JudgeContext
from judges.judgement import TestOutcome
from judges.junit import parse_junit
from judges.registry import Judge, JudgeConfig, Outcome, register_judge

_RUNNER = (
    "import sys; sys.path.append('/workspace'); import pytest; raise SystemExit(pytest.main(sys.argv[1:]))"
)
_PYTEST_EXIT = {0: "all passed", 1: "some failed", 2: "interrupted (collection errors)", 3: "internal error",
                4: "usage error", 5: "no tests collected"}  # fmt: skip


class TestsConfig(JudgeConfig):
    """Configuration of the ``tests`` judge."""

    timeout_s: float = 120.0
    """Wall-clock limit of the test run; running past it is the policy's failure."""
    extra_args: list[str] = []
    """More pytest arguments."""


@register_judge
class TestsJudge(Judge):
    """Score = fraction of hidden tests passing; pass only when all pass."""

    name = "tests"
    Config = TestsConfig
    code_modules = ("judges.junit", "judges.context")
    config: TestsConfig

    def _judge(self, ctx: JudgeContext) -> Outcome:
        sb = ctx.sandbox
        hidden = ctx.task.hidden_files()
        if not hidden:
            return Outcome(0.0, "error", detail="the task has no hidden tests")
        target = ctx.task.spec.hidden_tests.target
        sb.snapshot()  # kills whatever the agent left running (e.g. a watcher rewriting files)
        sb.exec(["rm", "-rf", f"/workspace/{target}"], timeout=30)
        for rel, data in hidden.items():
            sb.write_file(f"{target}/{rel}", data)
        report = f"/tmp/trajlake-junit-{uuid.uuid4().hex}.xml"
        argv = [
            "python3", "-I", "-c", _RUNNER,
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
        passed = run.exit_code == 0 and counts["passed"] == total
        detail = None if passed else f"{total - counts['passed']} of {total} hidden tests did not pass"
        return Outcome(score, "pass" if passed else "fail", {"tests": score}, evidence, detail=detail)
