"""The learner's own model served in-process to rollout workers, from a checkpoint on disk."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from learners.checkpoints import load_checkpoint
from learners.tokenizer import CharTokenizer


@dataclass
class Completion:
    """One generated completion and the ids and behaviour log-probabilities a learner needs."""

    text: str
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    finish_reason: str


class CheckpointGenerator:
    """Generates completions with a checkpoint's model (torch or JAX), on CPU unless told otherwise.

    Args:
        path: checkpoint directory.
        backend: ``torch`` or ``jax`` (either loads any checkpoint).
        greedy: argmax decoding (evaluation) instead of sampling.
        temperature: sampling temperature (training rollouts use 1.0, so behaviour log-probs are the model's).
        seed: sampling seed.
        max_new_tokens: completion length limit.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        backend: str = "torch",
        greedy: bool = False,
        temperature: float = 1.0,
        seed: int | None = None,
        max_new_tokens: int = 24,
        device: str = "cpu",
    ) -> None:
        self.info, self.cfg, weights = load_checkpoint(path)
        self.tok = CharTokenizer()
        self.hf_tok: Any = None
        """The Hugging Face checkpoint's own tokenizer (``None``: trajlake's character ids)."""
        self.backend = backend
        self.greedy = greedy
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens
        if self.info.hf_dir is not None and backend != "torch":
            from learners.errors import LearnerConfigError

            raise LearnerConfigError(f"{path} is a Hugging Face checkpoint: serve it with the torch backend")
        if backend == "torch":
            import torch

            from learners.torch_model import TinyLM, select_device

            torch.set_num_threads(1)
            self._device = select_device(device)
            self.model: torch.nn.Module
            if self.info.hf_dir is not None:
                from learners.hf_model import HFPolicyModel, has_tokenizer, load_causal_lm

                # the model's own tokenizer and chat template when its directory has them; a model
                # trained on trajlake's character ids has none and keeps them
                if has_tokenizer(self.info.hf_dir):
                    from transformers import AutoTokenizer

                    self.hf_tok = AutoTokenizer.from_pretrained(str(self.info.hf_dir), local_files_only=True)
                # in fp32, with the master weights when the hf/ copy is narrower: what the learner scores
                self.model = HFPolicyModel(
                    load_causal_lm(self.info.hf_dir, device=self._device, dtype=torch.float32)
                )
                if weights:
                    self.model.load_state_dict(
                        {k: torch.from_numpy(np.asarray(v)) for k, v in weights.items()}
                    )
            else:
                self.model = TinyLM(self.cfg).to(self._device)
                self.model.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in weights.items()})
            self.model.eval()
            self._gen = torch.Generator(device=self._device)
            if seed is not None:
                self._gen.manual_seed(seed)
            else:
                self._gen.seed()
        elif backend == "jax":
            from learners.jax_model import params_from_numpy

            self.params = params_from_numpy(weights)
            self._rng = np.random.default_rng(seed)
        else:
            from learners.errors import LearnerConfigError

            raise LearnerConfigError(f"unknown learner backend {backend!r}: torch or jax")

    @property
    def checkpoint_id(self) -> str:
        """The checkpoint served (the policy version episodes record)."""
        return self.info.checkpoint_id

    def prompt_ids(self, prompt: str) -> list[int]:
        """``prompt`` as the model reads it: a user turn of its chat template, or plain ids."""
        if self.hf_tok is None:
            return [CharTokenizer.BOS, *self.tok.encode(prompt)]
        if self.hf_tok.chat_template:
            out: Any = self.hf_tok.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=True, add_generation_prompt=True
            )
            if hasattr(out, "keys"):  # newer transformers return a BatchEncoding
                out = out["input_ids"]
            return [int(i) for i in out]
        return [int(i) for i in self.hf_tok(prompt)["input_ids"]]

    def __call__(self, prompt: str) -> Completion:
        """Complete ``prompt``."""
        prompt_ids = self.prompt_ids(prompt)
        eos = CharTokenizer.EOS if self.hf_tok is None else self.hf_tok.eos_token_id
        kwargs: dict[str, Any] = {
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "greedy": self.greedy,
            "eos_id": eos,
        }
        if self.backend == "torch":
            from learners.torch_model import generate

            ids, logprobs = generate(self.model, prompt_ids, generator=self._gen, **kwargs)
        else:
            from learners.jax_model import generate as jgenerate

            ids, logprobs = jgenerate(self.params, prompt_ids, cfg=self.cfg, rng=self._rng, **kwargs)
        finished = bool(ids) and ids[-1] == eos
        text = (
            self.tok.decode(ids) if self.hf_tok is None else self.hf_tok.decode(ids, skip_special_tokens=True)
        )
        return Completion(
            text=text,
            prompt_ids=prompt_ids,
            completion_ids=list(ids),
            logprobs=[float(x) for x in logprobs],
            finish_reason="stop" if finished else "length",
        )
