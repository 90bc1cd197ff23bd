"""Judging's Prometheus metrics move with real judgements: verdicts, hack flags, time.

Counters accumulate over a session, so each assertion is on a difference from the value before.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from judges import Flag, JudgeContext, build_judge, judge_measured, load_task
from judges.metrics import KNOWN_FLAGS
from judges.registry import Judge, JudgeConfig, Outcome
from judges.replay import Trajectory
from sandboxes import Sandbox, SandboxBackend, SandboxSpec
from sandboxes.tools import ToolAction, ToolOutcome

ROOT = Path(__file__).resolve().parents[2]
TASK = ROOT / "tasks" / "pyfix" / "pyfix-001"


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def host_sandbox(local_backend: SandboxBackend) -> Iterator[Sandbox]:
    """A local sandbox over the host's files (no image needed) holding the task's initial state."""
    with local_backend.create(SandboxSpec(workspace=load_task(TASK).initial_dir)) as sb:
        yield sb


def test_a_flagged_judgement_counts_its_verdict_its_flag_and_its_time(host_sandbox: Sandbox) -> None:
    task = load_task(TASK)
    traj = Trajectory(task)
    traj.record(ToolAction("bash", {"command": "curl http://example.com/answers"}), ToolOutcome(7))
    fail = value("trajlake_judge_verdicts_total", judge="process", verdict="fail")
    flag = value("trajlake_judge_hack_flags_total", judge="process", flag="network_attempt")
    timed = value("trajlake_judge_seconds_count", judge="process")
    ctx = JudgeContext(task=task, sandbox=host_sandbox, events=traj.events)
    j = judge_measured(build_judge({"name": "process"}), ctx)
    assert j.verdict == "fail" and j.flag_kinds == ["network_attempt"]
    assert value("trajlake_judge_verdicts_total", judge="process", verdict="fail") - fail == 1
    assert value("trajlake_judge_hack_flags_total", judge="process", flag="network_attempt") - flag == 1
    assert value("trajlake_judge_seconds_count", judge="process") - timed == 1


def test_pass_and_error_verdicts_are_counted_and_unknown_flags_bucketed() -> None:
    task = load_task(TASK)
    passed = value("trajlake_judge_verdicts_total", judge="efficiency", verdict="pass")
    ctx = JudgeContext(task=task, sandbox=None, events=Trajectory(task).events)  # type: ignore[arg-type]
    j = judge_measured(build_judge({"name": "efficiency"}), ctx)
    assert j.verdict == "pass"
    assert value("trajlake_judge_verdicts_total", judge="efficiency", verdict="pass") - passed == 1

    errors = value("trajlake_judge_verdicts_total", judge="metrics-test-odd", verdict="error")
    other = value("trajlake_judge_hack_flags_total", judge="metrics-test-odd", flag="other")
    j = judge_measured(_Odd(), JudgeContext(task=task, sandbox=None))  # type: ignore[arg-type]
    assert j.verdict == "error" and j.flag_kinds == ["made_up_for_a_test"]
    assert value("trajlake_judge_verdicts_total", judge="metrics-test-odd", verdict="error") - errors == 1
    assert value("trajlake_judge_hack_flags_total", judge="metrics-test-odd", flag="other") - other == 1


class _Odd(Judge):
    name = "metrics-test-odd"
    Config = JudgeConfig

    def _judge(self, ctx: JudgeContext) -> Outcome:
        return Outcome(0.0, "error", flags=[Flag(kind="made_up_for_a_test", evidence="-")])


def test_every_flag_kind_the_judges_raise_is_a_known_label_value() -> None:
    """Flag kinds written in the judges' source (``Flag(kind="...")``, ``WorkspaceUnjudgeable(...,
    kind="...")``, the process checks, the code facts' kinds, an unjudgeable workspace's default)
    are all in ``KNOWN_FLAGS``, so none is counted as ``other`` by accident."""
    from judges.builtin.process import CHECKS
    from judges.code_facts import _KINDS
    from judges.errors import WorkspaceUnjudgeable

    found = set(CHECKS) | set(_KINDS.values()) | {WorkspaceUnjudgeable("x").kind}
    literal = 0
    for path in (ROOT / "judges").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in (
                "Flag",
                "WorkspaceUnjudgeable",
            ):
                for kw in node.keywords:
                    if kw.arg == "kind" and isinstance(kw.value, ast.Constant):
                        found.add(str(kw.value.value))
                        literal += 1
    assert literal > 10  # the scan sees the judges' flags
    assert found - KNOWN_FLAGS == set()
