"""The rollout worker loop: task -> sandbox -> policy steps through tools -> judge -> events.

Every step is recorded through the ``EpisodeRecorder``: the model calls, the
tool calls and their results, the sandbox's lifecycle, the reward and the end.
Step and time limits end an episode as ``truncated`` (it is still judged);
a sandbox that breaks or a recorder that cannot record ends it as
``infra_error``, never as a failure to learn from.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ingest.errors import IngestError
from ingest.recorder import Episode, EpisodeRecorder
from judges.context import JudgeContext
from judges.metrics import judge_measured
from judges.registry import build_judge
from judges.state_cache import StateCache
from judges.tasks import Task
from rollouts.policies import Policy
from sandboxes.errors import SandboxError, SandboxQuotaError
from sandboxes.interface import Sandbox
from sandboxes.pool import SandboxPool
from sandboxes.tools import ToolAction, run_tool
from schemas.errors import InfraError
from schemas.events import PolicyRef

OBSERVATION_LIMIT = 4000
"""Characters of a tool's output the policy sees (the event keeps the full text)."""


@dataclass(frozen=True)
class EpisodeOutcome:
    """How one episode went."""

    episode_id: str
    task_id: str
    group_id: str | None
    status: str
    verdict: str | None
    score: float | None
    steps: int
    duration_s: float
    policy_version: str
    error: str | None = None
    model_calls: int = 0
    history_breaks: int = 0
    """Model calls whose prompt did not continue the conversation's token history."""


def _run_tool(ep: Episode, sb: Sandbox, action: ToolAction, timeout: float) -> str:
    """Execute one tool call in the sandbox, record call and result, return the observation."""
    call = ep.tool_call(action.tool, action.arguments)
    out = run_tool(sb, action, timeout=timeout)
    ep.tool_result(call, exit_code=out.exit_code, stdout=out.stdout, stderr=out.stderr,
                   duration_s=out.duration_s, timed_out=out.timed_out, error_kind=out.error_kind)  # fmt: skip
    return out.observation(action, OBSERVATION_LIMIT)


def _capture_final_state(
    ep: Episode, sb: Sandbox, recorder: EpisodeRecorder
) -> tuple[str | None, bytes | None]:
    """Archive the workspace the agent left, before the judge runs anything in it.

    The archive goes to the blob store by sha256 and ``episode_ended`` carries the
    reference, so a re-judge job can rebuild exactly this state later; the judge reads
    its final state from the same archive.
    """
    if recorder.blobs is None:
        return None, None
    try:
        archive = sb.export_workspace()
        return recorder.blobs.put(archive).sha256, archive
    except (SandboxQuotaError, IngestError, OSError) as exc:
        # too big or too deep to keep, or the blob store failed: the episode is still judged and
        # counts; only re-judging it later will not be possible, and the annotation says why
        ep.annotate("final_state_not_captured", f"{type(exc).__name__}: {exc}"[:2000])
        return None, None


def run_episode(
    task: Task,
    policy: Policy,
    pool: SandboxPool,
    recorder: EpisodeRecorder,
    *,
    group_id: str | None = None,
    attempt: int = 0,
    metadata: dict[str, Any] | None = None,
    acquire_timeout: float = 120.0,
    state_cache: StateCache | None = None,
) -> EpisodeOutcome:
    """Run one episode of ``task`` with ``policy`` and record all of it.

    Never raises for the policy's or the sandbox's sake: the outcome says what happened.
    """
    start = time.monotonic()
    limits = task.spec.limits
    judge = build_judge(task.spec.judge)
    steps = calls = breaks = 0
    verdict = score = None
    status = "aborted"
    error = None
    sync_error: Exception | None = None
    try:
        policy.sync()  # the weights it serves now: the episode's policy version
    except Exception as exc:  # noqa: BLE001 - the episode records it (below), the worker goes on
        sync_error = exc
    ep = recorder.episode(
        task=task.ref,
        policy=PolicyRef(id=policy.policy_id, version=policy.policy_version),
        group_id=group_id,
        attempt=attempt,
        sampling=policy.sampling or None,
        sandbox_image=task.spec.initial_state.image,
        limits={"max_steps": limits.max_steps, "time_limit_s": limits.time_limit_s},
        metadata={"judge": judge.name, "judge_version": judge.version, **(metadata or {})},
        keep_events=True,
    )
    try:
        if sync_error is not None:  # (under the version it served last: never trained on, infra_error)
            with ep:
                raise sync_error
        with ep, pool.lease(
            image=task.spec.initial_state.image, workspace=task.initial_dir, timeout=acquire_timeout,
            listener=ep.sandbox_step,
        ) as sb:  # fmt: skip
            if state_cache is not None:  # the prepared state, shared by attempts and workers
                state_cache.prepare(task, sb)
            else:
                task.prepare(sb)
            policy.begin(task)
            deadline = start + limits.time_limit_s
            observation: str | None = None
            truncated = None
            while True:
                if steps >= limits.max_steps:
                    truncated = f"step limit {limits.max_steps} reached"
                    break
                if time.monotonic() >= deadline:
                    truncated = f"time limit {limits.time_limit_s}s reached"
                    break
                step = policy.step(observation)
                steps += 1
                if step.model_call is not None:
                    ep.model_call(**step.model_call.event_fields())
                    calls += 1
                    breaks += step.model_call.history_break
                if step.action is None:
                    observation = "[error] no action found in your reply; run a ```bash``` block or submit"
                    continue
                if step.action.tool == "submit":
                    call = ep.tool_call("submit", {})
                    ep.tool_result(call, exit_code=0)
                    break
                observation = _run_tool(ep, sb, step.action, deadline - time.monotonic())
            ep.final_state_ref, archive = _capture_final_state(ep, sb, recorder)
            judgement = judge_measured(
                judge, JudgeContext(task=task, sandbox=sb, events=list(ep.events or []), archive=archive)
            )
            ep.record_reward(judgement.to_payload())
            verdict, score = judgement.verdict, judgement.score
            if truncated:
                ep.end("truncated", reason=truncated)
    except InfraError as exc:
        error = f"{type(exc).__name__}: {exc}"
    except SandboxError as exc:
        error = f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # noqa: BLE001 - recorded as aborted; the worker goes on with the next episode
        error = f"{type(exc).__name__}: {exc}"
    status = ep.ended or status
    return EpisodeOutcome(
        episode_id=ep.episode_id,
        task_id=task.id,
        group_id=group_id,
        status=status,
        verdict=verdict,
        score=score,
        steps=steps,
        duration_s=time.monotonic() - start,
        policy_version=policy.policy_version,
        error=error,
        model_calls=calls,
        history_breaks=breaks,
    )
