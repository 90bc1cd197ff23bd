"""Versioned, regression-tested judges; task specs and task admission.

A judge is a registered, configurable function of (trajectory events, final
sandbox state) to a :class:`Judgement`; its version is a hash of its code and
configuration. Built-ins: ``tests``, ``static``, ``assertions``, ``process``
(reward-hacking checks), ``efficiency`` and ``composite``.
"""

from judges.context import JudgeContext, WorkspaceDiff, compute_diff
from judges.errors import (
    AdmissionError,
    GoldenSetError,
    JudgeConfigError,
    JudgeError,
    TaskSetupError,
    TaskSpecError,
)
from judges.judgement import Flag, Judgement, TestOutcome, Verdict
from judges.metrics import judge_measured, record_judgement
from judges.registry import Judge, JudgeConfig, Outcome, build_judge, judge_names, register_judge
from judges.tasks import Task, TaskSpec, find_task_dirs, load_task

__all__ = [
    "AdmissionError",
    "Flag",
    "GoldenSetError",
    "TaskSetupError",
    "Judge",
    "JudgeConfig",
    "JudgeConfigError",
    "JudgeContext",
    "JudgeError",
    "Judgement",
    "Outcome",
    "Task",
    "TaskSpec",
    "TaskSpecError",
    "TestOutcome",
    "Verdict",
    "WorkspaceDiff",
    "build_judge",
    "compute_diff",
    "find_task_dirs",
    "judge_measured",
    "judge_names",
    "load_task",
    "record_judgement",
    "register_judge",
]
