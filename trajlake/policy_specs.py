"""Policy specs (``--policy``) -> policies; the composition root where rollouts meet learners.

- ``scripted:reference``: apply each task's reference solution, then submit (a smoke policy).
- ``scripted:FILE.yaml``: per-task action lists ``{task_id: [actions...]}`` (``*`` for any task).
- ``openai:BASE_URL#MODEL``: an OpenAI-compatible chat server (vLLM, SGLang, ...).
- ``local:CHECKPOINT_DIR[?greedy=1&temperature=1.0&seed=7&backend=torch]``: the learner's model, in-process.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs

import yaml

from rollouts import Generation, GeneratorPolicy, OpenAIChatPolicy, Policy, PolicySpecError, ScriptedPolicy


def make_policy(spec: str, *, worker_index: int = 0) -> Policy:
    """Build the policy a spec string names (called inside each worker process).

    ``worker_index`` offsets a sampling seed, so that parallel workers with the
    same spec draw different samples.

    Raises:
        PolicySpecError: an unknown kind or a malformed spec.
    """
    kind, _, rest = spec.partition(":")
    if kind == "scripted":
        if rest == "reference":
            return ScriptedPolicy(["apply_reference"], policy_id="scripted-reference")
        path = Path(rest)
        if not path.is_file():
            raise PolicySpecError(f"scripted policy file {rest!r} not found")
        table = yaml.safe_load(path.read_text()) or {}
        return ScriptedPolicy(
            lambda task: table.get(task.id, table.get("*", [])), policy_id=f"scripted-{path.stem}"
        )
    if kind == "openai":
        base, _, model = rest.partition("#")
        if not base or not model:
            raise PolicySpecError("openai policy spec is openai:BASE_URL#MODEL")
        return OpenAIChatPolicy(base, model, api_key=os.environ.get("OPENAI_API_KEY"))
    if kind == "local":
        from learners.serving import CheckpointGenerator

        path_text, _, query = rest.partition("?")
        q = {k: v[-1] for k, v in parse_qs(query).items()}
        gen = CheckpointGenerator(
            path_text,
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
    raise PolicySpecError(f"unknown policy kind {kind!r}: use scripted:, openai: or local:")
