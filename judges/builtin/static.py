"""``static``: do the Python files of the final state compile?"""

from __future__ import annotations

import json

from judges.context import JudgeContext
from judges.registry import Judge, JudgeConfig, Outcome, register_judge

_COMPILE = r"""
import json, os, sys
root, skip = sys.argv[1], set(sys.argv[2:])
res = {}
for dp, dns, fns in os.walk(root):
    rel_dp = os.path.relpath(dp, root)
    dns[:] = [d for d in dns if d not in ("__pycache__", ".git")
              and os.path.normpath(os.path.join(rel_dp, d)) not in skip]
    for fn in fns:
        if fn.endswith(".py"):
            p = os.path.join(dp, fn)
            rel = os.path.normpath(os.path.relpath(p, root))
            try:
                with open(p, "rb") as fh:
                    compile(fh.read(), rel, "exec", dont_inherit=True)
                res[rel] = None
            except (SyntaxError, ValueError) as e:
                res[rel] = f"{type(e).__name__}: {e}"
print(json.dumps(res))
"""


class StaticConfig(JudgeConfig):
    """Configuration of the ``static`` judge."""

    changed_only: bool = False
    """Only files the trajectory changed (default: every Python file)."""


@register_judge
class StaticJudge(Judge):
    """Score = fraction of Python files that compile; pass when all do."""

    name = "static"
    Config = StaticConfig
    code_modules = ("judges.context",)
    config: StaticConfig

    def _judge(self, ctx: JudgeContext) -> Outcome:
        target = ctx.task.spec.hidden_tests.target
        r = ctx.sandbox.exec(["python3", "-I", "-c", _COMPILE, "/workspace", target], timeout=120)
        if r.exit_code != 0:
            return Outcome(0.0, "error", detail=f"compile check did not run: {r.stderr[-300:]}")
        results: dict[str, str | None] = json.loads(r.stdout)
        if self.config.changed_only:
            changed = set(ctx.diff().paths)
            results = {k: v for k, v in results.items() if k in changed}
        errors = {k: v for k, v in results.items() if v}
        score = 1.0 if not results else (len(results) - len(errors)) / len(results)
        evidence = {"files": len(results), "errors": dict(errors)}
        if errors:
            return Outcome(
                score, "fail", {"static": score}, evidence, detail=f"{len(errors)} files do not compile"
            )
        return Outcome(score, "pass", {"static": score}, evidence)
