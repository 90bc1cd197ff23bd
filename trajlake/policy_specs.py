"""Policy specs (``--policy``) -> policies; the composition root where rollouts meet learners.

- ``scripted:reference``: apply each task's reference solution, then submit (a smoke policy).
- ``scripted:FILE.yaml``: per-task action lists ``{task_id: [actions...]}`` (``*`` for any task).
- ``openai:BASE_URL#MODEL``: an OpenAI-compatible chat server (vLLM, SGLang, ...).
- ``local:CHECKPOINT_DIR[?greedy=1&temperature=1.0&seed=7&backend=torch]``: the learner's model, in-process.

:func:`check_policy_spec` validates a spec in the parent process (the CLI
calls it while parsing arguments), so a worker process never starts with a
spec it cannot build.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import yaml

from rollouts import Generation, GeneratorPolicy, OpenAIChatPolicy, Policy, PolicySpecError, ScriptedPolicy

LOCAL_OPTIONS = ("backend", "greedy", "temperature", "seed")
"""Query keys a ``local:`` spec may carry."""


@dataclass(frozen=True)
class ParsedSpec:
    """A policy spec, split into its kind and parts and checked."""

    kind: str
    """``scripted``, ``openai`` or ``local``."""
    target: str
    """``reference``, the YAML file, the base URL or the checkpoint directory."""
    model: str = ""
    """The model name of an ``openai`` spec."""
    options: dict[str, str] = field(default_factory=dict)
    """The query options of a ``local`` spec."""
    script: dict[str, Any] = field(default_factory=dict)
    """The action table of a ``scripted:FILE`` spec."""


OPENAI_OPTIONS = {
    "server": "vllm, sglang or openai (any other OpenAI-compatible server)",
    "tools": "1: offer the tools as functions (native tool calls)",
    "temperature": "the sampling temperature (0.7)",
    "top_p": "nucleus mass (1: off)", "top_k": "top-k (-1: off)", "min_p": "min-p (0: off)",
    "seed": "a sampling seed (each worker adds its index)",
    "logprobs": "what the server's log-probs are of: processed, scaled, raw (else it is asked)",
    "tokenizer": "the served model's tokenizer directory: token in/out (prompts sent as ids)",
    "weights": "the checkpoint id the server serves",
    "weights_file": "a file holding it, rewritten when weights are pushed",
}  # fmt: skip
"""The query options of an ``openai`` spec."""


def check_policy_spec(spec: str) -> ParsedSpec:
    """Parse and check a spec without loading a model or contacting a server.

    Raises:
        PolicySpecError: an unknown kind, a malformed spec, or a file or checkpoint that is not there.
    """
    kind, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise PolicySpecError(
            f"policy {spec!r} is not KIND:TARGET; use scripted:reference, scripted:FILE.yaml, "
            "openai:URL#MODEL or local:CHECKPOINT_DIR"
        )
    if kind == "scripted":
        if rest == "reference":
            return ParsedSpec(kind, rest)
        path = Path(rest)
        if not path.is_file():
            raise PolicySpecError(f"scripted policy file {rest} does not exist")
        try:
            table = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise PolicySpecError(f"scripted policy file {rest} is not readable YAML: {exc}") from exc
        if not isinstance(table, dict) or not all(isinstance(v, list) for v in table.values()):
            raise PolicySpecError(
                f"scripted policy file {rest} must map task ids (or '*') to lists of actions"
            )
        return ParsedSpec(kind, rest, script=table)
    if kind == "openai":
        base, _, model_q = rest.partition("#")
        model, _, query = model_q.partition("?")
        url = urlparse(base)
        if url.scheme not in ("http", "https") or not url.netloc or not model:
            raise PolicySpecError(
                f"openai policy {spec!r} must be openai:http(s)://HOST[:PORT]/v1#MODEL[?server=vllm|sglang|openai&tools=1]"
            )
        options = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
        unknown = sorted(set(options) - set(OPENAI_OPTIONS))
        if unknown:
            raise PolicySpecError(
                f"unknown option(s) {', '.join(unknown)} in {spec!r}; known: {', '.join(OPENAI_OPTIONS)}"
            )
        if options.get("server", "vllm") not in ("vllm", "sglang", "openai") or options.get(
            "tools", "0"
        ) not in ("0", "1"):
            raise PolicySpecError(f"{spec!r}: server is vllm, sglang or openai, tools is 0 or 1")
        if options.get("logprobs", "processed") not in ("processed", "scaled", "raw"):
            raise PolicySpecError(
                f"{spec!r}: logprobs is processed, scaled or raw (what the server's log-probs are of)"
            )
        for name in ("temperature", "top_p", "min_p", "top_k", "seed"):
            try:
                float(options[name]) if name in options else None
            except ValueError as exc:
                raise PolicySpecError(f"{spec!r}: {name} must be a number") from exc
        return ParsedSpec(kind, base, model=model, options=options)
    if kind == "local":
        path_text, _, query = rest.partition("?")
        options = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
        unknown = sorted(set(options) - set(LOCAL_OPTIONS))
        if unknown:
            raise PolicySpecError(
                f"unknown option(s) {', '.join(unknown)} in {spec!r}; known: {', '.join(LOCAL_OPTIONS)}"
            )
        if options.get("backend", "torch") not in ("torch", "jax"):
            raise PolicySpecError(f"backend={options['backend']} in {spec!r}: use torch or jax")
        try:
            float(options.get("temperature", "1.0"))
            int(options.get("seed", "0"))
        except ValueError as exc:
            raise PolicySpecError(f"{spec!r}: temperature must be a number and seed an integer") from exc
        ckpt = Path(path_text)
        if not (ckpt / "meta.json").is_file() or not (
            (ckpt / "weights.npz").is_file() or (ckpt / "hf" / "config.json").is_file()
        ):
            raise PolicySpecError(
                f"{path_text} is not a checkpoint directory (no meta.json and weights.npz or hf/); "
                "`trajlake lineage latest` lists the checkpoints"
            )
        return ParsedSpec(kind, path_text, options=options)
    raise PolicySpecError(f"unknown policy kind {kind!r} in {spec!r}: use scripted:, openai: or local:")


def make_policy(spec: str, *, worker_index: int = 0) -> Policy:
    """Build the policy a spec string names (called inside each worker process).

    ``worker_index`` offsets a sampling seed, so that parallel workers with the
    same spec draw different samples.

    Raises:
        PolicySpecError: an unknown kind or a malformed spec.
    """
    p = check_policy_spec(spec)
    if p.kind == "scripted":
        if p.target == "reference":
            return ScriptedPolicy(["apply_reference"], policy_id="scripted-reference")
        table = p.script
        return ScriptedPolicy(
            lambda task: table.get(task.id, table.get("*", [])), policy_id=f"scripted-{Path(p.target).stem}"
        )
    if p.kind == "openai":
        o = p.options
        tuning: dict[str, float | int] = {
            k: (int(o[k]) if k == "top_k" else float(o[k])) for k in ("top_p", "top_k", "min_p") if k in o
        }
        return OpenAIChatPolicy(
            p.target, p.model, api_key=os.environ.get("OPENAI_API_KEY"), server=o.get("server", "vllm"),
            native_tools=o.get("tools", "0") == "1", temperature=float(o.get("temperature", "0.7")),
            sampling=tuning, seed=int(o["seed"]) + worker_index if "seed" in o else None,
            logprob_semantics=o.get("logprobs"), weights_file=o.get("weights_file"),
            policy_version=o.get("weights"), tokenizer=o.get("tokenizer"),
        )  # fmt: skip
    from learners.serving import CheckpointGenerator

    q = p.options
    gen = CheckpointGenerator(
        p.target,
        backend=q.get("backend", "torch"),
        greedy=q.get("greedy", "0") in ("1", "true"),
        temperature=float(q.get("temperature", "1.0")),
        seed=int(q["seed"]) + 7919 * worker_index if "seed" in q else None,
    )

    def generate(prompt: str) -> Generation:
        c = gen(prompt)
        return Generation(c.text, c.prompt_ids, c.completion_ids, c.logprobs, c.finish_reason)

    sampling = {"temperature": gen.temperature, "max_tokens": gen.max_new_tokens,
                "extra": {"greedy": gen.greedy, "backend": gen.backend}}  # fmt: skip
    return GeneratorPolicy(
        generate, policy_id=gen.info.policy_id, policy_version=gen.checkpoint_id, sampling=sampling
    )
