"""``assertions``: runtime behaviour the task declares, each a command and what it must print."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from judges.context import JudgeContext
from judges.judgement import Verdict
from judges.registry import Judge, JudgeConfig, Outcome, register_judge


class Assertion(BaseModel):
    """One command and its expected outcome."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    cmd: str
    """Shell command, run in the workspace root."""
    exit_code: int | None = 0
    """Expected exit code (``None``: any)."""
    stdout_equals: str | None = None
    stdout_contains: str | None = None
    stdout_regex: str | None = None
    timeout_s: float = 30.0


class AssertionsConfig(JudgeConfig):
    """Configuration of the ``assertions`` judge."""

    assertions: list[Assertion]


@register_judge
class AssertionsJudge(Judge):
    """Score = fraction of assertions that hold; pass when all do."""

    name = "assertions"
    Config = AssertionsConfig
    config: AssertionsConfig

    def _judge(self, ctx: JudgeContext) -> Outcome:
        if not self.config.assertions:
            return Outcome(0.0, "error", detail="no assertions configured")
        results = {}
        for a in self.config.assertions:
            r = ctx.judged_sandbox().exec(a.cmd, timeout=a.timeout_s)
            problems = []
            if r.timed_out:
                problems.append(f"timed out after {a.timeout_s}s")
            if a.exit_code is not None and r.exit_code != a.exit_code:
                problems.append(f"exit {r.exit_code}, expected {a.exit_code}")
            if a.stdout_equals is not None and r.stdout != a.stdout_equals:
                problems.append(f"stdout {r.stdout[:200]!r} != {a.stdout_equals[:200]!r}")
            if a.stdout_contains is not None and a.stdout_contains not in r.stdout:
                problems.append(f"stdout lacks {a.stdout_contains!r}")
            if a.stdout_regex is not None and not re.search(a.stdout_regex, r.stdout):
                problems.append(f"stdout does not match /{a.stdout_regex}/")
            results[a.name] = "; ".join(problems) or None
        ok = sum(1 for v in results.values() if v is None)
        score = ok / len(results)
        failed = {k: v for k, v in results.items() if v}
        verdict: Verdict = "pass" if not failed else "fail"
        detail = None if not failed else f"{len(failed)} of {len(results)} assertions failed"
        return Outcome(
            score, verdict, {"assertions": score}, {"failed": dict(failed), "passed": ok}, detail=detail
        )
