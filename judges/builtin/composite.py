"""``composite``: a weighted combination of judges, with vetoes.

Components are judges whose scores are combined with weights (e.g. correctness
from ``tests``, maintainability from ``static``, efficiency from steps). A
``required`` component must pass for the composite to pass, and the optional
ones only count when every required one passed. Any flag of a veto judge
(``process``) makes the verdict ``fail`` and the score 0. If a required
component or a veto judge could not run, the composite is ``error``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from judges.context import JudgeContext
from judges.registry import Judge, JudgeConfig, Outcome, build_judge, register_judge


class Component(BaseModel):
    """One weighted judge of the composite."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    """Component name (``correctness``, ``maintainability``, ``efficiency``)."""
    judge: dict[str, Any]
    """The judge's spec: ``{"name": ..., "config": {...}}``."""
    weight: float = Field(default=1.0, ge=0)
    required: bool = False
    """Must pass for the composite to pass."""


class CompositeConfig(JudgeConfig):
    """Configuration of the ``composite`` judge."""

    components: list[Component]
    vetoes: list[dict[str, Any]] = Field(default_factory=lambda: [{"name": "process"}])
    """Judges any of whose flags (or a fail) vetoes the reward."""


@register_judge
class CompositeJudge(Judge):
    """Weighted components plus vetoes."""

    name = "composite"
    Config = CompositeConfig
    config: CompositeConfig

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        self.components = [(c, build_judge(c.judge)) for c in self.config.components]
        self.vetoes = [build_judge(v) for v in self.config.vetoes]

    def version_inputs(self) -> dict[str, Any]:
        """Own code and config, plus every sub-judge's version (their code counts too)."""
        base = super().version_inputs()
        base["components"] = {c.name: j.version for c, j in self.components}
        base["vetoes"] = [j.version for j in self.vetoes]
        return base

    def _judge(self, ctx: JudgeContext) -> Outcome:
        ctx.diff()  # capture the final state before any judge changes the workspace
        evidence: dict[str, Any] = {}
        flags = []
        errors = []
        for veto in self.vetoes:
            j = veto(ctx)
            evidence[f"veto:{j.judge_name}"] = {
                "verdict": j.verdict,
                "version": j.judge_version,
                **j.evidence,
            }
            flags += j.flags
            if j.verdict == "error":
                errors.append(f"veto {j.judge_name}: {j.detail}")
        results = {}
        for comp, judge in self.components:
            j = judge(ctx)
            results[comp.name] = (comp, j)
            evidence[comp.name] = {
                "judge": j.judge_name,
                "version": j.judge_version,
                "verdict": j.verdict,
                "score": j.score,
                "detail": j.detail,
                **j.evidence,
            }
            flags += j.flags
            if j.verdict == "error" and comp.required:
                errors.append(f"{comp.name}: {j.detail}")
        components = {name: j.score for name, (_, j) in results.items()}
        if errors:
            return Outcome(0.0, "error", components, evidence, flags, detail="; ".join(errors))
        required_ok = all(j.verdict == "pass" for c, j in results.values() if c.required)
        counted = [(c, j) for c, j in results.values() if c.required or required_ok]
        total_weight = sum(c.weight for c, _ in results.values()) or 1.0
        score = sum(c.weight * j.score for c, j in counted) / total_weight
        if flags:
            kinds = sorted({f.kind for f in flags})
            return Outcome(0.0, "fail", components, evidence, flags, detail=f"vetoed: {', '.join(kinds)}")
        if not required_ok:
            failed = [
                f"{n}: {j.detail}" for n, (c, j) in results.items() if c.required and j.verdict != "pass"
            ]
            return Outcome(score, "fail", components, evidence, detail="; ".join(failed))
        return Outcome(score, "pass", components, evidence)
