"""``efficiency``: fewer steps than the task allows scores higher."""

from __future__ import annotations

from judges.context import JudgeContext
from judges.registry import Judge, JudgeConfig, Outcome, register_judge


class EfficiencyConfig(JudgeConfig):
    """Configuration of the ``efficiency`` judge."""

    free_steps: int = 3
    """Steps that cost nothing (reading the task, running the tests once)."""


@register_judge
class EfficiencyJudge(Judge):
    """Score = 1 - (steps beyond the free ones) / (the task's step limit); always passes."""

    name = "efficiency"
    Config = EfficiencyConfig
    config: EfficiencyConfig

    def _judge(self, ctx: JudgeContext) -> Outcome:
        steps = ctx.steps_taken()
        limit = max(1, ctx.task.spec.limits.max_steps - self.config.free_steps)
        score = max(0.0, 1.0 - max(0, steps - self.config.free_steps) / limit)
        return Outcome(
            score,
            "pass",
            {"efficiency": score},
            {"steps": steps, "max_steps": ctx.task.spec.limits.max_steps},
        )
