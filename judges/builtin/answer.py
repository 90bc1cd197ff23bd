"""``answer``: compare one answer file of the final state with the task's hidden expected answer.

For families whose whole output is one short string (``wordplay``, ``reverse``) this is
the grading in one place, without starting a test process: the file is read from the
judged tree (a symlink, a directory, a file over ``max_bytes`` or non-UTF-8 bytes is a
``fail`` with the reason, as is a missing file), the expected answer comes from the
task's hidden directory (never from the workspace, never from the judge's configuration,
so one judge version serves the whole family), and the score pays only for progress:

- the exact answer scores 1;
- otherwise the partial credit is the *correct prefix* of the answer (its first ``k``
  characters are the expected answer's first ``k``) beyond the longest correct prefix
  that a null-effort answer of this very task reaches (``baseline``): the expected
  answer's characters reversed (for a reversal: the given word echoed back), sorted
  either way, or one of its characters repeated to length. Score = ``(k - baseline) /
  (n - baseline)``, 0 at or below the baseline.

A correct prefix is work done: the first ``k`` characters of the answer, in order. Credit
for the answer's form (one word, the right length, letters that happen to sit in place)
paid a policy that did none of the task: an echoed or sorted word, or junk of the right
length, scored up to half. ``pass`` on the exact answer (or, with a ``pass_score`` below
1, from that score on: a looser judge version). A task without the hidden file is the
judge's ``error``.
"""

from __future__ import annotations

from pydantic import Field

from judges.context import JudgeContext
from judges.judgement import Verdict
from judges.registry import Judge, JudgeConfig, Outcome, register_judge


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


def null_answers(expected: str) -> dict[str, str]:
    """What a policy can answer without doing any of the task, built from the expected answer itself."""
    out = {
        "empty": "",
        "reversed": expected[::-1],
        "sorted": "".join(sorted(expected)),
        "sorted_descending": "".join(sorted(expected, reverse=True)),
    }
    for ch in dict.fromkeys(expected):
        out[f"repeated_{ch}"] = ch * len(expected)
    return out


def _prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def grade(answer: str, expected: str) -> tuple[dict[str, int | bool], float]:
    """The checks and the score of ``answer`` against ``expected`` (see the module docstring)."""
    exact = answer == expected
    k = _prefix(answer, expected)
    base = max((_prefix(a, expected) for a in null_answers(expected).values() if a != expected), default=0)
    n = len(expected)
    partial = 0.0 if n <= base else max(0, k - base) / (n - base)
    score = 1.0 if exact else min(partial, 1.0 - 1.0 / (n + 1))
    return {"prefix": k, "baseline": base, "length": n, "exact": exact}, score


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
        state = ctx.final_state()  # what every judge reads: nothing the agent left running changes it
        path = self.config.path
        if path in state.links:
            return self._fail(expected, f"{path} cannot be read as an answer: it is a symlink")
        raw = state.files.get(path)
        if raw is None:
            if path in state.dirs:
                return self._fail(expected, f"{path} cannot be read as an answer: it is a directory")
            return self._fail(expected, f"{path} was not written")
        if len(raw) > self.config.max_bytes:
            return self._fail(
                expected, f"{path} cannot be read as an answer: over {self.config.max_bytes} bytes"
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return self._fail(expected, f"{path} is not UTF-8 text")
        answer = text.rstrip("\n")
        checks, score = grade(answer, expected)
        evidence = {"answer": answer[:200], "checks": checks}
        passed = bool(checks["exact"]) or score >= self.config.pass_score
        verdict: Verdict = "pass" if passed else "fail"
        detail = (
            None
            if checks["exact"]
            else (
                f"the first {checks['prefix']} of {checks['length']} characters are right "
                f"(a null-effort answer gets {checks['baseline']})"
            )
        )
        return Outcome(score, verdict, {"answer": score}, evidence, detail=detail)

    def _fail(self, expected: str, why: str) -> Outcome:
        checks, _ = grade("", expected)
        return Outcome(0.0, "fail", {"answer": 0.0}, {"checks": checks}, detail=why)
