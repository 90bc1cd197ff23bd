"""Rollout workers: tasks -> sandboxes -> policy steps through tools -> judges -> events."""

from rollouts.actions import TOOLS, ToolAction, parse_action
from rollouts.errors import PolicySpecError, PolicyUnavailableError, RolloutError, RolloutWorkerError
from rollouts.policies import (
    Generation,
    GeneratorPolicy,
    ModelCall,
    OpenAIChatPolicy,
    Policy,
    PolicyStep,
    ScriptedPolicy,
)
from rollouts.runner import RolloutConfig, run_rollouts
from rollouts.sampler import Assignment, TaskPool, admitted_ids, group_assignments, group_id
from rollouts.summary import HISTORY_BREAK_WARN, RolloutSummary, summarize
from rollouts.worker import EpisodeOutcome, run_episode

__all__ = [
    "HISTORY_BREAK_WARN",
    "TOOLS",
    "Assignment",
    "EpisodeOutcome",
    "Generation",
    "GeneratorPolicy",
    "ModelCall",
    "OpenAIChatPolicy",
    "Policy",
    "PolicySpecError",
    "PolicyStep",
    "PolicyUnavailableError",
    "RolloutConfig",
    "RolloutError",
    "RolloutSummary",
    "RolloutWorkerError",
    "ScriptedPolicy",
    "TaskPool",
    "ToolAction",
    "admitted_ids",
    "group_assignments",
    "group_id",
    "parse_action",
    "run_episode",
    "run_rollouts",
    "summarize",
]
