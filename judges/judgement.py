"""What a judge returns."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from schemas.events import RewardPayload

Verdict = Literal["pass", "fail", "error"]
"""``error``: the judge itself could not run; never a policy failure."""

TestStatus = Literal["passed", "failed", "error", "skipped"]


class TestOutcome(BaseModel):
    """One test case's result."""

    model_config = ConfigDict(frozen=True)

    name: str
    """``classname::name`` as the test runner reported it."""
    status: TestStatus
    """Outcome."""
    message: str | None = None
    """Failure or error message (first line), when any."""
    duration_s: float = 0.0
    """Seconds the test took."""


class Flag(BaseModel):
    """A suspicion raised by a judge, with what it is based on."""

    model_config = ConfigDict(frozen=True)

    kind: str
    """What was detected (e.g. ``tests_modified``)."""
    evidence: str
    """Where: a file and line of the final diff, or a step of the trajectory."""


class Judgement(BaseModel):
    """A judge's verdict on one trajectory and the final state it left."""

    model_config = ConfigDict(frozen=True)

    judge_name: str
    """Registered judge name."""
    judge_version: str
    """Content hash of the judge's code and configuration."""
    judge_spec: dict[str, JsonValue]
    """Name and configuration: enough to rebuild exactly this judge."""
    score: float
    """Scalar reward in [0, 1]."""
    verdict: Verdict
    """``pass``/``fail``, or ``error`` when the judge could not run."""
    components: dict[str, float] = Field(default_factory=dict)
    """Named parts of the score."""
    evidence: dict[str, JsonValue] = Field(default_factory=dict)
    """What the verdict rests on (per-test results, compile errors, ...)."""
    flags: list[Flag] = Field(default_factory=list)
    """Suspicions (reward hacking), each with its evidence."""
    detail: str | None = None
    """One line for humans (why it failed or errored)."""

    @property
    def flag_kinds(self) -> list[str]:
        """The distinct kinds of the flags, sorted."""
        return sorted({f.kind for f in self.flags})

    def to_payload(
        self, *, source: Literal["online", "rejudge"] = "online", rejudge_run_id: str | None = None
    ) -> RewardPayload:
        """The payload of the ``reward`` event this judgement becomes: the one path from judge to log.

        Flags travel twice: their kinds (plus ``reward_hack_suspected`` when there is any) as the
        event's ``flags``, and each flag with its evidence inside ``evidence``.
        """
        evidence: dict[str, JsonValue] = dict(self.evidence)
        if self.flags:
            evidence["flags"] = [f.model_dump() for f in self.flags]
        if self.detail:
            evidence["detail"] = self.detail
        return RewardPayload(
            judge_name=self.judge_name,
            judge_version=self.judge_version,
            judge_spec=self.judge_spec,
            score=self.score,
            verdict=self.verdict,
            components=self.components,
            evidence=evidence,
            flags=self.flag_kinds + (["reward_hack_suspected"] if self.flags else []),
            source=source,
            rejudge_run_id=rejudge_run_id,
        )
