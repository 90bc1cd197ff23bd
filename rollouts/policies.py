"""Policies behind one interface: scripted, OpenAI-compatible chat servers, and in-process models.

A policy is asked for one step at a time with the observation of the previous
step; it returns the tool action it wants and, when it called a model, what
the model saw and said (the ``model_call`` event), including token ids and
behaviour log-probabilities when the model reports them. Every episode
records the policy's id and version.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from judges.tasks import Task
from rollouts.actions import ToolAction, parse_action
from rollouts.errors import PolicySpecError, PolicyUnavailableError


@dataclass
class ModelCall:
    """What one model call saw and produced (becomes a ``model_call`` event)."""

    completion: str
    messages: list[dict[str, Any]] | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    completion_logprobs: list[float] | None = None
    finish_reason: str | None = None
    latency_s: float = 0.0
    model: str | None = None

    def event_fields(self) -> dict[str, Any]:
        """Keyword arguments of ``Episode.model_call``."""
        return {
            "messages": self.messages,
            "completion": self.completion,
            "prompt_token_ids": self.prompt_token_ids,
            "completion_token_ids": self.completion_token_ids,
            "completion_logprobs": self.completion_logprobs,
            "finish_reason": self.finish_reason,
            "latency_s": round(self.latency_s, 6),
            "prompt_tokens": len(self.prompt_token_ids) if self.prompt_token_ids is not None else None,
            "completion_tokens": len(self.completion_token_ids)
            if self.completion_token_ids is not None
            else None,
            "model": self.model,
        }


@dataclass
class PolicyStep:
    """One step: the action (``None`` when the completion held none) and the model call, if any."""

    action: ToolAction | None
    model_call: ModelCall | None = None


class Policy(ABC):
    """Decides the next tool action from the task and what the last action returned."""

    policy_id: str = "policy"
    policy_version: str = "0"
    sampling: dict[str, Any] = {}

    @abstractmethod
    def begin(self, task: Task) -> None:
        """Start an episode of ``task`` (forget any previous one)."""

    @abstractmethod
    def step(self, observation: str | None) -> PolicyStep:
        """The next action, given the previous action's observation (``None`` at the start)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the policy's resources."""


class ScriptedPolicy(Policy):
    """Replays given actions (for tests and admission); ``apply_reference`` runs the task's reference.

    Args:
        actions: a list for every task, or a function of the task giving its list.
        policy_id: id recorded in episodes.
    """

    def __init__(
        self,
        actions: Sequence[Any] | Callable[[Task], Sequence[Any]],
        *,
        policy_id: str = "scripted",
        policy_version: str = "0",
    ) -> None:
        self._actions = actions
        self.policy_id, self.policy_version = policy_id, policy_version
        self._queue: list[ToolAction] = []

    def begin(self, task: Task) -> None:
        """Queue the task's actions."""
        raw = self._actions(task) if callable(self._actions) else self._actions
        self._queue = [self._to_action(task, a) for a in raw]

    @staticmethod
    def _to_action(task: Task, a: Any) -> ToolAction:
        if isinstance(a, ToolAction):
            return a
        if a == "apply_reference":
            ref = task.spec.reference_solution
            data = task.reference_bytes().decode()
            if ref.patch is not None:
                heredoc = f"git apply --whitespace=nowarn - <<'TRAJLAKE_PATCH'\n{data}TRAJLAKE_PATCH"
                return ToolAction("bash", {"command": heredoc})
            return ToolAction("bash", {"command": f"sh -s <<'TRAJLAKE_SCRIPT'\n{data}TRAJLAKE_SCRIPT"})
        if isinstance(a, dict) and len(a) == 1:
            ((tool, arg),) = a.items()
            if tool == "bash":
                return ToolAction("bash", {"command": str(arg)})
            if tool == "write_file":
                return ToolAction("write_file", {"path": str(arg["path"]), "content": str(arg["content"])})
            if tool == "read_file":
                return ToolAction("read_file", {"path": str(arg)})
            if tool == "submit":
                return ToolAction("submit")
        raise PolicySpecError(f"unknown scripted action {a!r}")

    def step(self, observation: str | None) -> PolicyStep:
        """The next queued action; ``submit`` once they are used up."""
        action = self._queue.pop(0) if self._queue else ToolAction("submit")
        return PolicyStep(
            action, ModelCall(completion=json.dumps({"tool": action.tool, "arguments": action.arguments}))
        )


SYSTEM_PROMPT = (
    "You are an autonomous software engineer working in a sandbox at /workspace. "
    "Reply with exactly one action per message: a ```bash``` block to run a command, or a JSON object "
    '{"tool": "write_file", "arguments": {"path": ..., "content": ...}}, or {"tool": "read_file", '
    '"arguments": {"path": ...}}. When the task is done, reply with the single word submit.'
)


class OpenAIChatPolicy(Policy):
    """A model behind an OpenAI-compatible ``/v1/chat/completions`` endpoint (vLLM, SGLang, ...).

    Token log-probabilities are requested and recorded when the server returns
    them (``logprobs.content[].logprob``; token ids too where the server gives
    them, e.g. vLLM's ``return_tokens_as_token_ids``).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        temperature: float = 0.7,
        max_tokens: int = 1024,
        timeout_s: float = 120.0,
        system_prompt: str = SYSTEM_PROMPT,
        policy_version: str = "0",
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.system_prompt = system_prompt
        self.policy_id, self.policy_version = model, policy_version
        self.sampling = {"temperature": temperature, "max_tokens": max_tokens}
        self.messages: list[dict[str, Any]] = []

    def begin(self, task: Task) -> None:
        """Start the conversation with the task's instruction."""
        self.messages = [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": task.spec.instruction},
        ]

    def step(self, observation: str | None) -> PolicyStep:
        """Send the conversation, read one action from the reply."""
        if observation is not None:
            self.messages.append({"role": "user", "content": observation})
        body = {"model": self.model, "messages": self.messages, "logprobs": True, **self.sampling}
        req = urllib.request.Request(self.url, data=json.dumps(body).encode(), method="POST")
        req.add_header("Content-Type", "application/json")
        if self.api_key:
            req.add_header("Authorization", f"Bearer {self.api_key}")
        start = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                reply = json.loads(resp.read())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise PolicyUnavailableError(f"policy server {self.url} failed: {exc}") from exc
        latency = time.monotonic() - start
        try:
            choice = reply["choices"][0]
            text = choice["message"].get("content") or ""
        except (KeyError, IndexError, TypeError) as exc:
            raise PolicyUnavailableError(
                f"policy server {self.url} sent no choice: {str(reply)[:300]}"
            ) from exc
        logprobs = ids = None
        content = (choice.get("logprobs") or {}).get("content")
        if content:
            logprobs = [float(t["logprob"]) for t in content]
            raw_ids = [t.get("token_id") for t in content]
            ids = [int(i) for i in raw_ids] if all(i is not None for i in raw_ids) else None
        call = ModelCall(
            completion=text,
            messages=[dict(m) for m in self.messages],
            completion_token_ids=ids,
            completion_logprobs=logprobs,
            finish_reason=choice.get("finish_reason"),
            latency_s=latency,
            model=reply.get("model", self.model),
        )
        self.messages.append({"role": "assistant", "content": text})
        return PolicyStep(parse_action(text), call)


@dataclass
class Generation:
    """One completion of an in-process model, with what a learner needs."""

    completion: str
    prompt_token_ids: list[int]
    completion_token_ids: list[int]
    completion_logprobs: list[float]
    finish_reason: str = "stop"
    extra: dict[str, Any] = field(default_factory=dict)


class GeneratorPolicy(Policy):
    """An in-process model (e.g. the learner's latest checkpoint) answering in one step.

    The model reads the instruction and its completion is the answer: the
    worker writes it to ``answer_file`` and submits. Families built for small
    models (``wordplay``) are judged on that file.

    Args:
        generate: prompt text -> :class:`Generation` (sampling or greedy, chosen when it was built).
        policy_id: the model's name.
        policy_version: the checkpoint it runs.
        answer_file: where the completion goes.
    """

    def __init__(
        self,
        generate: Callable[[str], Generation],
        *,
        policy_id: str,
        policy_version: str,
        answer_file: str = "answer.txt",
        sampling: dict[str, Any] | None = None,
    ) -> None:
        self.generate = generate
        self.policy_id, self.policy_version = policy_id, policy_version
        self.answer_file = answer_file
        self.sampling = dict(sampling or {})
        self._prompt = ""
        self._answered = False

    def begin(self, task: Task) -> None:
        """Take the instruction as the prompt."""
        self._prompt = task.spec.instruction.strip() + "\n"
        self._answered = False

    def step(self, observation: str | None) -> PolicyStep:
        """First: generate and write the answer; then: submit."""
        if self._answered:
            return PolicyStep(ToolAction("submit"))
        start = time.monotonic()
        g = self.generate(self._prompt)
        self._answered = True
        call = ModelCall(
            completion=g.completion,
            messages=[{"role": "user", "content": self._prompt}],
            prompt_token_ids=g.prompt_token_ids,
            completion_token_ids=g.completion_token_ids,
            completion_logprobs=g.completion_logprobs,
            finish_reason=g.finish_reason,
            latency_s=time.monotonic() - start,
            model=self.policy_id,
        )
        return PolicyStep(ToolAction("write_file", {"path": self.answer_file, "content": g.completion}), call)
