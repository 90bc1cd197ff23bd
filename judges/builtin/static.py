"""``static``: do the Python files of the final state compile?"""

from __future__ import annotations

import json

from judges.context import JudgeContext
from judges.errors import WorkspaceUnjudgeable
from judges.registry import Judge, JudgeConfig, Outcome, register_judge

_COMPILE = r"""
import json, os, sys
root, skip = sys.argv[1], set(sys.argv[2:])
res, files = {}, 0
for dp, dns, fns in os.walk(root):
    rel_dp = os.path.relpath(dp, root)
    dns[:] = [d for d in dns if os.path.normpath(os.path.join(rel_dp, d)) not in skip]
    for fn in fns:
        if fn.endswith(".py"):
            files += 1
            p = os.path.join(dp, fn)
            rel = os.path.normpath(os.path.relpath(p, root))
            try:
                with open(p, "rb") as fh:
                    compile(fh.read(), rel, "exec", dont_inherit=True)
            except Exception as e:  # whatever the source makes the compiler do is the file's fault
                if len(res) < 200:
                    res[rel] = f"{type(e).__name__}: {e}"[:300]
                else:
                    res["..."] = "more files do not compile"
print(json.dumps({"files": files, "errors": res}))
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
        state = ctx.final_state()
        target = ctx.task.spec.hidden_tests.target
        r = ctx.judged_sandbox().exec(
            ["python3", "-I", "-S", "-c", _COMPILE, "/workspace", target], timeout=120
        )
        if r.timed_out or r.oom_killed:  # the agent's sources, not the judge: compiling them ran away
            why = "ran past 120 s" if r.timed_out else "ran out of the sandbox's memory"
            raise WorkspaceUnjudgeable(f"compiling the workspace's Python files {why}")
        if r.exit_code != 0:
            return Outcome(0.0, "error", detail=f"compile check did not run: {r.stderr[-300:]}")
        data = json.loads(r.stdout)
        errors: dict[str, str] = data["errors"]
        if self.config.changed_only:
            changed = set(ctx.diff().paths)
            files = sum(1 for p in state.files if p.endswith(".py") and p in changed)
            errors = {k: v for k, v in errors.items() if k in changed}
        else:
            files = int(data["files"])
        score = 1.0 if not files else max(0.0, (files - len(errors)) / files)
        evidence = {"files": files, "errors": dict(errors)}
        if errors:
            return Outcome(
                score, "fail", {"static": score}, evidence, detail=f"{len(errors)} files do not compile"
            )
        return Outcome(score, "pass", {"static": score}, evidence)
