"""Policies behind one interface: scripted, OpenAI-compatible chat servers, and in-process models.

A policy is asked for one step at a time with the observation of the previous
step; it returns the tool action it wants and, when it called a model, what
the model saw and said (the ``model_call`` event), including token ids and
behaviour log-probabilities when the model reports them. Every episode
records the policy's id and version.
"""

from __future__ import annotations

import json
import math
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judges.tasks import Task
from rollouts.actions import TOOLS, ToolAction, parse_action
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
    tool_calls: list[dict[str, Any]] | None = None
    """The native tool calls of the completion, as the server sent them."""
    served_by: dict[str, Any] | None = None
    """What sampled it (``kind``, ``version``, ``logprob_semantics``, ``weights_version``)."""
    sampling: dict[str, Any] | None = None
    """Every sampling parameter the request set."""
    history_break: bool = False
    reasoning: str | None = None
    """The completion's reasoning, apart from its answer (``completion``)."""

    def event_fields(self) -> dict[str, Any]:
        """Keyword arguments of ``Episode.model_call``."""
        return {
            "messages": self.messages,
            "completion": self.completion,
            "prompt_token_ids": self.prompt_token_ids,
            "completion_token_ids": self.completion_token_ids,
            "completion_logprobs": self.completion_logprobs,
            "finish_reason": self.finish_reason,
            "tool_calls": self.tool_calls,
            "latency_s": round(self.latency_s, 6),
            "prompt_tokens": len(self.prompt_token_ids) if self.prompt_token_ids is not None else None,
            "completion_tokens": len(self.completion_token_ids)
            if self.completion_token_ids is not None
            else None,
            "model": self.model,
            "served_by": self.served_by,
            "sampling": self.sampling,
            "history_break": self.history_break,
            "reasoning": self.reasoning,
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

    def sync(self) -> None:  # noqa: B027 - optional hook
        """Learn what the policy serves now (its weights' version) before an episode is recorded."""

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


def _function(name: str, description: str, **params: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {p: {"type": "string", "description": d} for p, d in params.items()},
                "required": list(params),
            },
        },
    }


TOOL_SCHEMAS: list[dict[str, Any]] = [
    _function("bash", "Run a shell command in /workspace.", command="the command"),
    _function("read_file", "Read a file of the workspace.", path="its path"),
    _function("write_file", "Write a whole file of the workspace.", path="its path", content="its content"),
    _function("submit", "Say the task is done."),
]
"""The tools as OpenAI function schemas (native tool calling, as vLLM and SGLang agent setups serve it)."""


@dataclass
class ChatReply:
    """What one chat completion says, with the token data a learner needs when the server gives it."""

    text: str
    tool_calls: list[dict[str, Any]]
    """The message's ``tool_calls`` as the server sent them (``[]``: none)."""
    prompt_token_ids: list[int] | None
    completion_token_ids: list[int] | None
    completion_logprobs: list[float] | None
    finish_reason: str | None
    model: str | None
    reasoning: str | None = None
    """The reasoning the server's reasoning parser split off the answer (``None``: none)."""


def _token_id(entry: dict[str, Any]) -> int | None:
    """The id of a ``logprobs.content`` entry whose ``token`` is vLLM's ``token_id:<id>`` form."""
    token = entry.get("token")
    if isinstance(token, str) and token.startswith("token_id:") and token[9:].isdigit():
        return int(token[9:])
    return None


def parse_chat_reply(reply: dict[str, Any]) -> ChatReply:
    """Read one ``/v1/chat/completions`` response (OpenAI's shape, with vLLM's extensions when present).

    Token ids are taken only from what the server returned, never by
    tokenising text again: the choice's ``token_ids`` and the response's
    ``prompt_token_ids`` (vLLM >= 0.10.2 with ``return_token_ids``), or the
    ``token_id:<id>`` strings of ``logprobs.content`` (vLLM's
    ``return_tokens_as_token_ids``). Log-probabilities come from
    ``logprobs.content[].logprob``. Where a server returns no ids (OpenAI
    itself), they are ``None`` and the learner leaves the sample out, counted.
    The reasoning a server's reasoning parser split off is the message's
    ``reasoning_content`` (SGLang, older vLLM) or ``reasoning`` (newer vLLM).

    Raises:
        PolicyUnavailableError: the response holds no choice.
    """
    try:
        choice = reply["choices"][0]
        message = choice.get("message") or {}
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise PolicyUnavailableError(f"the policy server sent no choice: {str(reply)[:300]}") from exc
    content = (choice.get("logprobs") or {}).get("content") or None
    logprobs = [float(t["logprob"]) for t in content] if content else None
    ids: list[int] | None = None
    if isinstance(choice.get("token_ids"), list):
        ids = [int(i) for i in choice["token_ids"]]
    elif content:
        found = [_token_id(t) for t in content]
        ids = [i for i in found if i is not None] if all(i is not None for i in found) else None
    if ids is not None and logprobs is not None and len(ids) != len(logprobs):
        ids = logprobs = None  # the two do not describe the same tokens: keep neither
    prompt = reply.get("prompt_token_ids")
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    return ChatReply(
        text=message.get("content") or "",
        tool_calls=list(message.get("tool_calls") or []),
        prompt_token_ids=[int(i) for i in prompt] if isinstance(prompt, list) else None,
        completion_token_ids=ids,
        completion_logprobs=logprobs,
        finish_reason=choice.get("finish_reason"),
        model=reply.get("model"),
        reasoning=reasoning if isinstance(reasoning, str) and reasoning else None,
    )


def tool_call_action(tool_calls: list[dict[str, Any]]) -> ToolAction | None:
    """The action of the first native tool call the worker knows (``None``: none, or bad arguments)."""
    acted = acted_call(tool_calls)
    return acted[1] if acted else None


def acted_call(tool_calls: list[dict[str, Any]]) -> tuple[int, ToolAction] | None:
    """``(index, action)`` of the first native tool call the worker knows.

    ``None``: no call of a known tool, or its arguments are not a JSON object.
    """
    for i, call in enumerate(tool_calls):
        fn = call.get("function") or {}
        name = fn.get("name")
        if name not in TOOLS:
            continue
        raw = fn.get("arguments") or "{}"
        try:
            args = json.loads(raw) if isinstance(raw, str) else dict(raw)
        except (ValueError, TypeError, RecursionError):
            return None
        return (i, ToolAction(str(name), args)) if isinstance(args, dict) else None
    return None


TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)
"""A Hermes tool-call block (Qwen, Hermes, ...), closed or cut at the end: vLLM's ``hermes`` parser's."""
_NAME = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')


def parse_tool_call_blocks(text: str, first_id: int = 0) -> tuple[str, list[dict[str, Any]]]:
    """``(content, tool_calls)`` of a generated text whose tool calls are Hermes ``<tool_call>`` blocks.

    As vLLM's ``hermes`` tool parser reads them: each block holds
    ``{"name": ..., "arguments": {...}}``; the content is the text before the
    first block. The calls come back in OpenAI's shape (arguments as a JSON
    string), with ids ``call-<n>`` counted from ``first_id``. A block that is
    not such an object is kept as a call whose ``arguments`` is the block as
    written (its name, when one can be read), as a server would send a native
    call with malformed arguments: :func:`tool_call_action` takes no action
    from it, and the record shows what the model wrote.
    """
    blocks = [a or b for a, b in TOOL_CALL_BLOCK.findall(text)]
    if not blocks:
        return text, []
    calls = []
    for n, block in enumerate(blocks, start=first_id):
        try:
            obj = json.loads(block)
        except (ValueError, RecursionError):  # no JSON at all (cut, or broken): its name where readable
            found = _NAME.search(block)
            name, arguments = (found.group(1) if found else ""), block.strip()
        else:
            name, args = _call_of(obj)
            # kept as written; a well-formed object of the wrong shape is no call of a known tool
            arguments = block.strip() if name is None else args
        calls.append(
            {"id": f"call-{n}", "type": "function", "function": {"name": name or "", "arguments": arguments}}
        )
    return text[: text.find("<tool_call>")], calls


def _call_of(obj: Any) -> tuple[str | None, str]:
    """``(name, arguments as JSON text)`` of a Hermes block's object; ``(None, "")`` for another shape."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None, ""
    args = obj.get("arguments", {})
    if isinstance(args, str):
        return obj["name"], args
    if isinstance(args, dict):
        return obj["name"], json.dumps(args, ensure_ascii=False)
    return None, ""


def split_reasoning(text: str) -> tuple[str | None, str]:
    """``(reasoning, answer)`` of a generated text with a ``<think>...</think>`` block (Qwen3, DeepSeek-R1).

    As vLLM's reasoning parsers split it: the reasoning is what comes before
    ``</think>`` (after a ``<think>``, when there is one: a prompt may have
    opened the block), the answer what follows. A text that opens a block it never closes
    (cut by the length limit) is all reasoning; one with neither tag is all answer.
    """
    _, opened, rest = text.partition("<think>")
    body = rest if opened else text  # (text before an opening tag is dropped, as vLLM drops it)
    if "</think>" in body:
        reasoning, _, answer = body.partition("</think>")
        return reasoning, answer
    if opened:
        return body, ""
    return None, text


SERVER_KINDS = ("vllm", "sglang", "openai")
"""The servers the chat policy knows: vLLM and SGLang take every sampling parameter; ``openai``
is any other OpenAI-compatible server (OpenAI's own fields only)."""
NEUTRAL_SAMPLING: dict[str, float | int] = {
    "top_p": 1.0, "top_k": -1, "min_p": 0.0, "presence_penalty": 0.0, "frequency_penalty": 0.0,
    "repetition_penalty": 1.0,
}  # fmt: skip
"""What the chat policy sends unless told otherwise: no truncation and no penalty, so that a
model's ``generation_config.json`` defaults (vLLM and SGLang apply them to whatever a request
leaves out) never change the distribution unseen."""
OPENAI_FIELDS = ("temperature", "top_p", "presence_penalty", "frequency_penalty", "seed", "max_tokens")
CHECKPOINT_ID = re.compile(r"[A-Za-z0-9_.]+(?:-[A-Za-z0-9_.]+)*-\d{8}T\d{6}-[0-9a-f]{6}")
"""A trajlake checkpoint id (``{policy}-{YYYYmmddTHHMMSS}-{6 hex}``) inside a served model's path."""


def _top_logprobs(reply: dict[str, Any]) -> dict[str, float]:
    """The first completion token's ``top_logprobs`` of a chat reply, by token."""
    try:
        entry = reply["choices"][0]["logprobs"]["content"][0]
        return {str(t["token"]): float(t["logprob"]) for t in entry.get("top_logprobs") or []}
    except (KeyError, IndexError, TypeError, ValueError):
        return {}


def classify_logprobs(
    plain: dict[str, float], cooler: dict[str, float], truncated: dict[str, float]
) -> str | None:
    """What a server's log-probs are of, from three one-token replies to the same prompt.

    ``plain``: temperature 1, nothing truncated; ``cooler``: temperature 0.5; ``truncated``:
    temperature 1 and top-k 2. Raw log-probs do not move with the temperature; processed ones
    are renormalised over the two tokens top-k keeps (their probabilities sum to 1); scaled ones
    move with the temperature but are not renormalised. ``None``: the replies cannot tell (a
    model that puts nearly all its mass on one token, or a reply without top log-probs).
    """
    common = sorted(set(plain) & set(cooler))
    if not common or max(plain.values()) > -0.01:
        return None
    if all(abs(plain[t] - cooler[t]) < 1e-4 for t in common):
        return "raw"
    top2 = sorted(truncated.values(), reverse=True)[:2]
    if len(top2) < 2:
        return None
    mass = math.exp(top2[0]) + math.exp(top2[1])
    if abs(mass - 1.0) < 1e-3:
        kept = sorted(plain.values(), reverse=True)[:2]
        # renormalised only if top-k changed the numbers (the model's own top two may hold it all)
        return "processed" if math.exp(kept[0]) + math.exp(kept[1]) < 0.999 else "scaled"
    return "scaled"


class ChatTokens:
    """A model's chat template as token ids, each message rendered once (token in/out).

    ``turn`` gives what follows a completion: the end of the assistant's turn
    (the end-of-turn token if the completion was cut before it, then what the
    template puts after it), the new messages, and the generation prompt. It is
    read off the template by rendering a fixed conversation with and without
    the new messages, so it holds for any template that extends a conversation
    by appending (one that rewrites earlier turns, e.g. drops their reasoning,
    is exactly why the history is kept as ids).

    With ``tools`` (OpenAI function schemas) every rendering passes them to the
    template (``apply_chat_template(..., tools=...)``: most put them in the
    system turn), and the fixed conversation's assistant turn makes a tool
    call, so that a ``tool`` message follows it as in a real episode. A
    template that renders no tools, or no ``tool`` message, is refused here.

    Raises:
        PolicySpecError: no tokenizer with a chat template at ``path``, or (with
            ``tools``) a template that renders no tools or no tool messages.
    """

    _BASE = ({"role": "system", "content": "s"}, {"role": "user", "content": "u"},
             {"role": "assistant", "content": "a"})  # fmt: skip
    _CALL = {"id": "call-0", "type": "function", "function": {"name": "bash", "arguments": {"command": "ls"}}}
    _MARK = "trajlake-tool-output"

    def __init__(self, path: str | Path, *, tools: list[dict[str, Any]] | None = None) -> None:
        try:
            import jinja2
            from transformers import AutoTokenizer

            self.tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        except (OSError, ValueError, ImportError) as exc:
            raise PolicySpecError(f"no tokenizer with a chat template at {path}: {exc}") from exc
        self.tools = tools
        self.eos = self.tok.eos_token_id
        template = self.tok.chat_template if isinstance(self.tok.chat_template, str) else ""
        self.thinks = "</think>" in template
        """The template knows ``<think>`` blocks: a completion's reasoning is split off its answer."""
        self.base: list[dict[str, Any]] = [dict(m) for m in self._BASE]
        if tools:
            self.base[-1]["tool_calls"] = [self._CALL]
            tool = {"role": "tool", "content": self._MARK, "tool_call_id": "call-0"}
            try:
                bare = self.tok.apply_chat_template(self.base[:2], tokenize=False, add_generation_prompt=True)
                offered = self.text(self.base[:2], add_generation_prompt=True)
                answered = self.text([*self.base, tool], add_generation_prompt=True)
            except (jinja2.TemplateError, TypeError, ValueError, KeyError) as exc:
                raise PolicySpecError(
                    f"the chat template at {path} cannot render tool calls and tool messages ({exc}): "
                    "tools=1 with token in/out needs one that does (e.g. Qwen's or Hermes')"
                ) from exc
            if bare == offered or self._MARK not in answered:
                missing = "tools" if bare == offered else "tool messages"
                raise PolicySpecError(
                    f"the chat template at {path} renders no {missing}: tools=1 with token in/out needs "
                    "a template that takes `tools` and `tool` messages (e.g. Qwen's or Hermes')"
                )
        try:
            self._closed, self._after_eos = self._closed_turn()
        except (jinja2.TemplateError, TypeError, ValueError, KeyError) as exc:
            raise PolicySpecError(f"the chat template at {path} cannot render a conversation: {exc}") from exc

    def _closed_turn(self) -> tuple[list[int], list[int]]:
        """The base conversation's ids through its assistant turn's end, as drawn when a turn follows it.

        Templates draw a conversation's last assistant turn apart (Qwen3's opens an empty ``<think>``
        block in it), so the turn is read off a rendering where another follows: through the last
        end-of-turn token before the following turn's content (where two renderings with different
        contents part). Templates with no end-of-turn token there: the base rendered alone, and what
        follows its last end-of-turn token.
        """
        a, b = (self.render([*self.base, {"role": "user", "content": c}], add_generation_prompt=False)
                for c in ("x", "y"))  # fmt: skip
        apart = next((i for i, (u, v) in enumerate(zip(a, b, strict=False)) if u != v), min(len(a), len(b)))
        opened = len(
            self.render(self.base[:2], add_generation_prompt=True)
        )  # where the assistant turn starts
        ends = [i for i in range(opened, apart) if a[i] == self.eos]
        if ends:
            return a[: ends[-1] + 1], []
        alone = self.render(self.base, add_generation_prompt=False)
        last = [i for i, t in enumerate(alone) if t == self.eos]
        return alone, alone[last[-1] + 1 :] if last else []

    def text(self, messages: list[dict[str, Any]], *, add_generation_prompt: bool) -> str:
        """``messages`` through the chat template (with the tools, if any), as text."""
        tools: Any = self.tools
        out: Any = self.tok.apply_chat_template(
            messages, tools=tools, tokenize=False, add_generation_prompt=add_generation_prompt
        )
        return str(out)

    def render(self, messages: list[dict[str, Any]], *, add_generation_prompt: bool) -> list[int]:
        """``messages`` through the chat template, as ids."""
        tools: Any = self.tools
        out: Any = self.tok.apply_chat_template(
            messages, tools=tools, tokenize=True, add_generation_prompt=add_generation_prompt
        )
        if hasattr(out, "keys"):  # newer transformers return a BatchEncoding
            out = out["input_ids"]
        return [int(i) for i in out]

    def prompt(self, messages: list[dict[str, Any]]) -> list[int]:
        """The first prompt of a conversation."""
        return self.render(messages, add_generation_prompt=True)

    def turn(self, completion: list[int], added: list[dict[str, Any]]) -> list[int]:
        """What follows ``completion`` in the history: its turn's end, ``added``, the generation prompt."""
        close = ([] if completion and completion[-1] == self.eos else [self.eos]) + self._after_eos
        extended = self.render([*self.base, *added], add_generation_prompt=True)
        if extended[: len(self._closed)] != self._closed:
            raise PolicyUnavailableError(
                "the chat template renders earlier turns differently once a message is added: "
                "token in/out cannot continue its histories"
            )
        return close + extended[len(self._closed) :]


def parse_completion_reply(reply: dict[str, Any]) -> ChatReply:
    """Read one vLLM ``/v1/completions`` response (ids and log-probs as the server returned them)."""
    try:
        choice = reply["choices"][0]
    except (KeyError, IndexError, TypeError) as exc:
        raise PolicyUnavailableError(f"the policy server sent no choice: {str(reply)[:300]}") from exc
    lp = choice.get("logprobs") or {}
    logprobs = [float(x) for x in lp.get("token_logprobs") or []] or None
    ids: list[int] | None = None
    if isinstance(choice.get("token_ids"), list):
        ids = [int(i) for i in choice["token_ids"]]
    elif lp.get("tokens"):
        found = [_token_id({"token": t}) for t in lp["tokens"]]
        ids = [i for i in found if i is not None] if all(i is not None for i in found) else None
    if ids is not None and logprobs is not None and len(ids) != len(logprobs):
        ids = logprobs = None
    prompt = choice.get("prompt_token_ids", reply.get("prompt_token_ids"))
    return ChatReply(
        text=choice.get("text") or "", tool_calls=[],
        prompt_token_ids=[int(i) for i in prompt] if isinstance(prompt, list) else None,
        completion_token_ids=ids, completion_logprobs=logprobs, finish_reason=choice.get("finish_reason"),
        model=reply.get("model"),
    )  # fmt: skip


def parse_sglang_reply(reply: dict[str, Any], prompt: list[int]) -> ChatReply:
    """Read one SGLang native ``/generate`` response (``meta_info.output_token_logprobs``: log-prob, id)."""
    meta = reply.get("meta_info") if isinstance(reply, dict) else None
    if not isinstance(meta, dict):
        raise PolicyUnavailableError(f"the SGLang server sent no meta_info: {str(reply)[:300]}")
    entries = meta.get("output_token_logprobs") or []
    try:
        logprobs = [float(e[0]) for e in entries]
        ids = [int(e[1]) for e in entries]
    except (TypeError, ValueError, IndexError):
        logprobs, ids = [], []
    if isinstance(reply.get("output_ids"), list) and [int(i) for i in reply["output_ids"]] != ids:
        ids, logprobs = [], []  # the two do not describe the same tokens: keep neither
    finish = meta.get("finish_reason")
    return ChatReply(
        text=reply.get("text") or "", tool_calls=[], prompt_token_ids=None,
        completion_token_ids=ids or None, completion_logprobs=logprobs or None,
        finish_reason=finish.get("type") if isinstance(finish, dict) else finish, model=None,
    )  # fmt: skip


class OpenAIChatPolicy(Policy):
    """A model behind an OpenAI-compatible ``/v1/chat/completions`` endpoint (vLLM, SGLang, ...).

    Every sampling parameter is sent explicitly (the neutral values of
    :data:`NEUTRAL_SAMPLING` unless told otherwise), so no server default
    applies unseen; each ``model_call`` records them as sent, and what sampled
    it (``served_by``): the server's kind and version, what its log-probs are
    of, and the weights it had loaded. The log-prob semantics come from
    ``logprob_semantics`` when given (``processed``: vLLM started with
    ``--logprobs-mode processed_logprobs``; ``raw``: vLLM's default;
    ``scaled``: SGLang's), else from the server itself: three one-token
    requests (:func:`classify_logprobs`) on the first episode. Where neither
    settles it they stay unknown, and the learner leaves the samples out,
    counted. The weights' version is ``weights_version`` when given, else the
    content of ``weights_file`` (rewritten by whoever pushes new weights), else
    the trajlake checkpoint id in the served model's path (``/v1/models``).

    With ``tokenizer`` (the served model's tokenizer directory) the policy
    keeps the exact token history of the conversation and sends prompts as
    ids: the first prompt rendered with the model's chat template, then each
    turn's history (previous prompt and completion, as the server returned
    them) followed by the tokens the template puts after an assistant turn for
    the new messages (:class:`ChatTokens`), over vLLM's ``/v1/completions`` or
    SGLang's ``/generate``. A history then never breaks on re-tokenisation.
    Without it, a server prompt that does not continue the last history is
    recorded as ``history_break``.

    Requests log-probabilities, and on vLLM the token ids too
    (``return_token_ids``, ``return_tokens_as_token_ids``). With
    ``native_tools`` the tools are offered as functions and the reply's
    ``tool_calls`` is the action; a reply without one falls back to the action
    written in its text. Token in/out with ``native_tools`` does what the
    server's tool parser would: the tool schemas go through the chat template
    (``tools=``), the completion's Hermes ``<tool_call>`` blocks are its tool
    calls (:func:`parse_tool_call_blocks`, vLLM's ``hermes`` format; a template
    of another tool-call format is not read), and the tool's output is a
    ``tool`` message rendered after the exact completion ids. A reply's
    reasoning (the server's reasoning parser; token in/out: the ``<think>``
    block, when the template has one) is recorded apart from its answer and
    sent back with the assistant message (``reasoning_content``; not to
    ``server=openai``).

    Args:
        base_url: the server's ``.../v1``.
        model: the served model name.
        api_key: sent as a bearer token.
        server: ``vllm``, ``sglang`` or ``openai`` (any other OpenAI-compatible server).
        native_tools: offer the tools as functions.
        sampling: sampling parameters beyond the temperature (``top_p``, ``top_k``, ``min_p``,
            penalties), replacing the neutral ones.
        seed: the sampling seed sent with every request.
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
        policy_version: str | None = None,
        server: str = "vllm",
        native_tools: bool = False,
        sampling: dict[str, float | int] | None = None,
        seed: int | None = None,
        logprob_semantics: str | None = None,
        weights_file: str | None = None,
        tokenizer: str | None = None,
    ) -> None:
        import httpx

        if server not in SERVER_KINDS:
            raise PolicySpecError(f"unknown server kind {server!r}: one of {', '.join(SERVER_KINDS)}")
        if logprob_semantics not in (None, "processed", "scaled", "raw"):
            raise PolicySpecError(f"logprobs={logprob_semantics}: processed, scaled or raw")
        unknown = sorted(set(sampling or {}) - set(NEUTRAL_SAMPLING))
        if unknown:
            raise PolicySpecError(
                f"unknown sampling parameter(s) {', '.join(unknown)}: {', '.join(NEUTRAL_SAMPLING)}"
            )
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.model = model
        self.timeout_s = timeout_s
        self.system_prompt = system_prompt
        self.server = server
        self.native_tools = native_tools
        self.weights_file = weights_file
        self._fixed_version = policy_version
        self.policy_id, self.policy_version = model, policy_version or "0"
        sent: dict[str, Any] = {"temperature": temperature, **NEUTRAL_SAMPLING, **(sampling or {}),
                                "max_tokens": max_tokens}  # fmt: skip
        if seed is not None:
            sent["seed"] = seed
        if server == "openai":
            sent = {k: v for k, v in sent.items() if k in OPENAI_FIELDS}
        self.request_sampling = sent
        """The sampling fields of every request, as sent."""
        extra = {k: v for k, v in sent.items() if k not in ("temperature", "top_p", "max_tokens", "seed")}
        self.sampling = {"temperature": temperature, "top_p": sent.get("top_p"), "max_tokens": max_tokens,
                         "seed": seed, "extra": {**extra, "server": server}}  # fmt: skip
        self.served_by: dict[str, Any] = {
            "kind": server,
            "logprob_semantics": logprob_semantics,
            "semantics_source": "configured" if logprob_semantics else None,
        }
        self.messages: list[dict[str, Any]] = []
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        if tokenizer and server == "openai":
            raise PolicySpecError(
                "token in/out (tokenizer=DIR) needs server=vllm or sglang: they take prompt ids"
            )
        self.tokens = (
            ChatTokens(tokenizer, tools=TOOL_SCHEMAS if native_tools else None) if tokenizer else None
        )
        """Token in/out: the model's tokenizer and chat template, rendering each message once."""
        self._client = httpx.Client(timeout=timeout_s, headers=headers)
        self._probed = False
        self.history_ids: list[int] | None = None
        """The exact token history of the conversation so far (prompt and completions, as ids)."""
        self._last_completion: list[int] = []
        self._calls_made = 0

    @property
    def root_url(self) -> str:
        """The server's root (``base_url`` without its ``/v1``)."""
        return self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url

    def _get(self, url: str) -> Any:
        import httpx

        try:
            resp = self._client.get(url, timeout=min(self.timeout_s, 10.0))
            return resp.json() if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None

    def _weights_version(self) -> str | None:
        if self._fixed_version:
            return self._fixed_version
        if self.weights_file:
            try:
                text = Path(self.weights_file).read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as exc:
                why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
                raise PolicyUnavailableError(
                    f"the served weights' file {self.weights_file} cannot be read ({why}): "
                    "write the checkpoint id there when weights are pushed"
                ) from exc
            return text or None
        models = self._get(self.base_url + "/models")
        for entry in (models or {}).get("data") or [] if isinstance(models, dict) else []:
            if isinstance(entry, dict) and entry.get("id") == self.model:
                where = str(entry.get("root") or entry.get("id"))
                found = CHECKPOINT_ID.findall(where)
                return found[-1] if found else where
        return None

    def probe_logprob_semantics(self) -> str | None:
        """What the server's log-probs are of, asked of the server itself (see :func:`classify_logprobs`)."""
        if self.server == "openai":
            return None  # top-k cannot be sent: processed and scaled cannot be told apart
        replies = []
        for temperature, top_k in ((1.0, -1), (0.5, -1), (1.0, 2)):
            sampling = {k: v for k, v in self.request_sampling.items() if k != "seed"}
            body = {**sampling, "model": self.model, "messages": [{"role": "user", "content": "Say a word."}],
                    "max_tokens": 1, "logprobs": True, "top_logprobs": 5,
                    "temperature": temperature, "top_k": top_k, "top_p": 1.0, "min_p": 0.0}  # fmt: skip
            try:
                resp = self._client.post(self.url, json=body)
                replies.append(_top_logprobs(resp.json()) if resp.status_code == 200 else {})
            except Exception:  # noqa: BLE001 - any failure leaves the semantics unknown
                return None
        return classify_logprobs(*replies)

    def sync(self) -> None:
        """Ask the server its version and log-prob semantics (once) and its weights (each time)."""
        if not self._probed:
            self._probed = True
            info = self._get(self.root_url + "/version") or self._get(self.root_url + "/get_server_info")
            if isinstance(info, dict) and info.get("version"):
                self.served_by["version"] = str(info["version"])
            if self.served_by["logprob_semantics"] is None:
                found = self.probe_logprob_semantics()
                if found is not None:
                    self.served_by |= {"logprob_semantics": found, "semantics_source": "probed"}
        version = self._weights_version()
        self.policy_version = version or "0"
        self.served_by["weights_version"] = version

    def begin(self, task: Task) -> None:
        """Start the conversation with the task's instruction."""
        self.messages = [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": task.spec.instruction},
        ]
        self.history_ids = None
        self._calls_made = 0

    def request_body(self) -> dict[str, Any]:
        """The JSON body of the next chat request."""
        messages = self.messages
        if self.server == "openai":  # OpenAI's own fields only: the reasoning stays in the record
            messages = [{k: v for k, v in m.items() if k != "reasoning_content"} for m in messages]
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "logprobs": True,
            **self.request_sampling,
        }
        if self.server == "vllm":
            body |= {"return_token_ids": True, "return_tokens_as_token_ids": True}
        if self.native_tools:
            body |= {"tools": TOOL_SCHEMAS, "tool_choice": "auto"}
        return body

    def _post(self, url: str, body: dict[str, Any]) -> tuple[Any, float]:
        import httpx

        start = time.monotonic()
        try:
            resp = self._client.post(url, json=body)
        except httpx.HTTPError as exc:
            raise PolicyUnavailableError(f"policy server {url} failed: {exc}") from exc
        if resp.status_code >= 400:
            hint = " (a server other than vLLM refuses vLLM's fields: use server=openai)" if (
                resp.status_code in (400, 422) and self.server == "vllm") else ""  # fmt: skip
            raise PolicyUnavailableError(
                f"policy server {url} answered {resp.status_code}: {resp.text.strip()[:300]}{hint}"
            )
        try:
            return resp.json(), time.monotonic() - start
        except ValueError as exc:
            raise PolicyUnavailableError(f"policy server {url} sent no JSON: {resp.text[:200]!r}") from exc

    def step(self, observation: str | None) -> PolicyStep:
        """Send the conversation (token in/out: its exact token history), read one action from the reply."""
        added: list[dict[str, Any]] = []
        if observation is not None:
            role = "tool" if self.messages and self.messages[-1].get("tool_calls") else "user"
            turn: dict[str, Any] = {"role": role, "content": observation}
            if role == "tool":
                turn["tool_call_id"] = self.messages[-1]["tool_calls"][0].get("id", "call-0")
            self.messages.append(turn)
            added.append(turn)
        if self.tokens is not None:
            return self._step_tokens(added)
        raw, latency = self._post(self.url, self.request_body())
        reply = parse_chat_reply(raw)
        # the server rendered the conversation again: did its prompt continue the last history?
        broke = bool(
            self.history_ids is not None
            and reply.prompt_token_ids is not None
            and reply.prompt_token_ids[: len(self.history_ids)] != self.history_ids
        )
        if reply.prompt_token_ids is not None and reply.completion_token_ids is not None:
            self.history_ids = reply.prompt_token_ids + reply.completion_token_ids
        call = self._call(reply, latency, broke)
        return PolicyStep(self._answered(reply), call)

    def _answered(self, reply: ChatReply) -> ToolAction | None:
        """Add the reply to the conversation (its answer, reasoning and the tool call acted on); its action.

        Of several calls the one acted on stays (the next tool turn answers it); where none is
        (a malformed call), the first, which the worker's complaint answers.
        """
        acted = acted_call(reply.tool_calls)
        assistant: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if reply.tool_calls:
            i = acted[0] if acted else 0
            assistant["tool_calls"] = reply.tool_calls[i : i + 1]
        if reply.reasoning:
            assistant["reasoning_content"] = reply.reasoning
        self.messages.append(assistant)
        return acted[1] if acted else parse_action(reply.text)

    def _call(self, reply: ChatReply, latency: float, broke: bool) -> ModelCall:
        return ModelCall(
            completion=reply.text,
            messages=[dict(m) for m in self.messages],
            prompt_token_ids=reply.prompt_token_ids,
            completion_token_ids=reply.completion_token_ids,
            completion_logprobs=reply.completion_logprobs,
            finish_reason=reply.finish_reason,
            latency_s=latency,
            model=reply.model or self.model,
            tool_calls=reply.tool_calls or None,
            served_by=dict(self.served_by),
            sampling=dict(self.request_sampling),
            history_break=broke,
            reasoning=reply.reasoning,
        )

    def _step_tokens(self, added: list[dict[str, Any]]) -> PolicyStep:
        """Token in/out: send the prompt as ids (the history, then what the turn added); keep the reply's."""
        assert self.tokens is not None
        if self.history_ids is None:
            prompt = self.tokens.prompt(self.messages)
        else:
            prompt = self.history_ids + self.tokens.turn(self._last_completion, added)
        if self.server == "sglang":
            params = {k: v for k, v in self.request_sampling.items() if k not in ("max_tokens", "seed")}
            params["max_new_tokens"] = self.request_sampling["max_tokens"]
            if "seed" in self.request_sampling:
                params["sampling_seed"] = self.request_sampling["seed"]
            if self.native_tools:  # a model's tool-call tags may be special tokens: keep them in the text
                params["skip_special_tokens"] = False
            native = {"input_ids": prompt, "sampling_params": params, "return_logprob": True}
            raw, latency = self._post(self.root_url + "/generate", native)
            reply = parse_sglang_reply(raw, prompt)
        else:
            body = {"model": self.model, "prompt": prompt, "logprobs": 1, **self.request_sampling,
                    "return_token_ids": True, "return_tokens_as_token_ids": True}  # fmt: skip
            if self.native_tools:  # as vLLM's hermes parser asks of a chat request with tools
                body["skip_special_tokens"] = False
            raw, latency = self._post(self.base_url + "/completions", body)
            reply = parse_completion_reply(raw)
        # the server answers for the ids it was sent; any other prompt is a break, never papered over
        broke = reply.prompt_token_ids is not None and reply.prompt_token_ids != prompt
        reply.prompt_token_ids = prompt
        if reply.completion_token_ids is None:
            raise PolicyUnavailableError(
                f"policy server {self.base_url} returned no completion token ids: token in/out needs them"
            )
        self.history_ids = prompt + reply.completion_token_ids
        self._last_completion = reply.completion_token_ids
        if self.tokens.thinks:
            reply.reasoning, reply.text = split_reasoning(reply.text)
        if self.native_tools:
            reply.text, reply.tool_calls = parse_tool_call_blocks(reply.text, self._calls_made)
            self._calls_made += len(reply.tool_calls)
        call = self._call(reply, latency, broke)
        return PolicyStep(self._answered(reply), call)

    def close(self) -> None:
        """Release the HTTP connections."""
        self._client.close()


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
            # the sampler here is ours: its log-probs are of the distribution each token was drawn from
            served_by={"kind": "in_process", "logprob_semantics": "processed", "semantics_source": "sampler",
                       "weights_version": self.policy_version},
            sampling=dict(self.sampling) or None,
        )  # fmt: skip
        return PolicyStep(ToolAction("write_file", {"path": self.answer_file, "content": g.completion}), call)
