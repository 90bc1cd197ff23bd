"""``answer``: compare one answer file of the final state with the task's hidden expected answer.

For families whose whole output is one short string (``wordplay``, ``reverse``) this is
the same grading their hidden pytest files do, without starting a test process: the
file is read through the sandbox's ``read_file`` (never following a symlink, never a
special file), the expected answer comes from the task's hidden directory (never from
the workspace, never from the judge's configuration, so one judge version serves the
whole family), and the score gives partial credit:

- ``one_word``: the answer is one lower-case alphabetic word;
- ``same_length``: it has the expected length;
- one component per position: the letter there is the expected one;
- ``exact``: it is the expected answer.

Score = fraction of these checks that hold; ``pass`` on the exact answer (or, with a
``pass_score`` below 1, from that score on: a looser judge version). An answer
larger than ``max_bytes``, not UTF-8, a symlink or a directory is a ``fail`` with the
reason, as is a missing file. A task without the hidden file is the judge's ``error``.
"""

from __future__ import annotations

from pydantic import Field

from judges.context import JudgeContext
from judges.judgement import Verdict
from judges.registry import Judge, JudgeConfig, Outcome, register_judge
from sandboxes.errors import SandboxPathError


class AnswerConfig(JudgeConfig):
    """Configuration of the ``answer`` judge."""

    path: str = "answer.txt"
    """The answer file, relative to the workspace."""
    expected_file: str = "expected.txt"
    """The hidden file (relative to the task's hidden directory) holding the expected answer."""
    max_bytes: int = 4096
    """A larger answer file is not read (a ``fail``)."""
    pass_score: float = Field(1.0, gt=0.0, le=1.0)
    """The verdict is ``pass`` from this score on (1.0: only the exact answer passes)."""


def grade(answer: str, expected: str) -> tuple[dict[str, bool], float]:
    """The checks and the score of ``answer`` against ``expected``."""
    checks = {
        "one_word": answer.isalpha() and answer.islower() and answer.isascii(),
        "same_length": len(answer) == len(expected),
    }
    for i, ch in enumerate(expected):
        checks[f"letter_{i}"] = answer[i : i + 1] == ch
    checks["exact"] = answer == expected
    return checks, sum(checks.values()) / len(checks)


@register_judge
class AnswerJudge(Judge):
    """Partial credit for an answer file against the task's hidden expected answer."""

    name = "answer"
    Config = AnswerConfig
    code_modules = ("judges.context",)
    config: AnswerConfig

    def _judge(self, ctx: JudgeContext) -> Outcome:
        hidden = ctx.task.hidden_files().get(self.config.expected_file)
        if hidden is None:
            return Outcome(0.0, "error", detail=f"the task has no hidden {self.config.expected_file}")
        expected = hidden.decode("utf-8").rstrip("\n")
        ctx.sandbox.stop_processes()  # nothing the agent left running may rewrite the file as it is read
        try:
            raw = ctx.sandbox.read_file(self.config.path, max_bytes=self.config.max_bytes)
        except FileNotFoundError:
            return self._fail(expected, f"{self.config.path} was not written")
        except SandboxPathError as exc:
            return self._fail(expected, f"{self.config.path} cannot be read as an answer: {exc}")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return self._fail(expected, f"{self.config.path} is not UTF-8 text")
        answer = text.rstrip("\n")
        checks, score = grade(answer, expected)
        evidence = {"answer": answer[:200], "checks": checks}
        passed = checks["exact"] or score >= self.config.pass_score
        verdict: Verdict = "pass" if passed else "fail"
        detail = None if checks["exact"] else f"{sum(checks.values())} of {len(checks)} checks hold"
        return Outcome(score, verdict, {"answer": score}, evidence, detail=detail)

    def _fail(self, expected: str, why: str) -> Outcome:
        checks, _ = grade("\0", expected)
        return Outcome(0.0, "fail", {"answer": 0.0}, {"checks": {k: False for k in checks}}, detail=why)
