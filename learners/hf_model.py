"""Hugging Face causal language models, loaded from a local path, as policies (:class:`HFPolicyModel`).

Nothing is ever downloaded: :func:`load_causal_lm` reads a directory written by ``save_pretrained``.
:class:`HFPolicyModel` wraps such a model so that :func:`learners.torch_model.sequence_logprobs` and
:func:`learners.torch_model.generate` work with it exactly as with :class:`learners.torch_model.TinyLM`.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import torch
import transformers
from packaging.version import Version
from torch import nn

from schemas.errors import TrajlakeError

_DTYPE_KWARG = "dtype" if Version(transformers.__version__) >= Version("4.56") else "torch_dtype"


class ModelLoadError(TrajlakeError, OSError):
    """A local path holds no loadable Hugging Face causal language model."""


def load_causal_lm(
    path: str | Path, *, device: torch.device | None = None, dtype: torch.dtype | None = None
) -> nn.Module:
    """Loads a causal LM saved with ``save_pretrained`` from a local directory (never from the hub).

    Args:
        path: the directory holding ``config.json`` and the weights.
        device: where to put the model (stays on cpu when None).
        dtype: the parameters' dtype (the checkpoint's / the library's default when None).

    Returns:
        The model, in eval mode.

    Raises:
        ModelLoadError: if the path is not a directory with a ``config.json``, or loading fails.
    """
    from transformers import AutoModelForCausalLM

    path = Path(path)
    if not path.is_dir():
        raise ModelLoadError(f"no model directory at {path}")
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"{path} has no config.json: not a saved Hugging Face model")
    kwargs: dict[str, object] = {"local_files_only": True}
    if dtype is not None:
        kwargs[_DTYPE_KWARG] = dtype
    try:
        model: nn.Module = AutoModelForCausalLM.from_pretrained(str(path), **kwargs)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"could not load a causal LM from {path}: {exc}") from exc
    if device is not None:
        model = model.to(device)
    model.eval()
    return model


def _max_positions(model: nn.Module) -> int:
    config = getattr(model, "config", None)
    for name in ("max_position_embeddings", "n_positions", "n_ctx"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    raise ValueError(f"{type(model).__name__}.config gives no max_position_embeddings / n_positions")


def _disable_dropout(model: nn.Module) -> None:
    for module in model.modules():
        if isinstance(module, nn.modules.dropout._DropoutNd):
            module.p = 0.0
        # attention implementations that read a float rate instead of a Dropout module
        if isinstance(getattr(module, "attention_dropout", None), float):
            setattr(module, "attention_dropout", 0.0)  # noqa: B010


class HFPolicyModel(nn.Module):
    """Adapts a Hugging Face causal LM to the policy interface of :class:`learners.torch_model.TinyLM`.

    ``forward`` maps ids ``[B, T]`` to float32 logits ``[B, T, V]``. No attention mask is passed:
    sequences are right-padded and attention is causal, so padding never influences a real position,
    and id 0 (trajlake's PAD) is an ordinary token in many Hugging Face vocabularies.

    Dropout is switched off by default (like :class:`learners.torch_model.TinyLM`, which has none):
    otherwise the log-probabilities of a training-mode forward would be noisy, and the importance ratio
    of the policy loss would not be 1 for on-policy samples. The adapter starts in the wrapped
    model's train/eval mode.

    Attributes:
        model: the wrapped model (its parameters appear under ``model.`` in ``state_dict()``).
        max_len: the longest sequence it accepts, from ``config.max_position_embeddings`` / ``n_positions``.
    """

    def __init__(self, model: nn.Module, *, disable_dropout: bool = True) -> None:
        """Wraps ``model``.

        Args:
            model: a Hugging Face causal LM (e.g. from :func:`load_causal_lm`).
            disable_dropout: set every dropout probability in ``model`` to 0 (in place).

        Raises:
            ValueError: if the model's config gives no maximum number of positions.
        """
        super().__init__()
        self.model = model
        self.max_len: int = _max_positions(model)
        self.split_head: bool = _plain_output_layer(model)
        """Whether logits are exactly ``head(hidden(ids))`` (a base model and an output embedding, no
        logit scaling or soft-capping), so :func:`learners.torch_model.sequence_logprobs` can score
        completion positions only, chunk by chunk."""
        if disable_dropout:
            _disable_dropout(model)
        self.train(model.training)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Computes next-token logits.

        Args:
            ids: ``[B, T]`` long token ids, ``T <= max_len``.

        Returns:
            ``[B, T, V]`` float32 logits.

        Raises:
            ValueError: if ``T > max_len``.
        """
        if ids.shape[-1] > self.max_len:
            raise ValueError(f"sequence length {ids.shape[-1]} exceeds max_len {self.max_len}")
        out = self.model(input_ids=ids, use_cache=False)
        logits: torch.Tensor = out.logits if hasattr(out, "logits") else out[0]
        return logits.float()

    def hidden(self, ids: torch.Tensor) -> torch.Tensor:
        """The base model's last hidden states ``[B, T, D]`` (final norm applied), without the output layer.

        Raises:
            ValueError: if ``T > max_len``, or the model's logits are not ``head(hidden)``.
        """
        if not self.split_head:
            raise ValueError(f"{type(self.model).__name__} scales its logits; use forward()")
        if ids.shape[-1] > self.max_len:
            raise ValueError(f"sequence length {ids.shape[-1]} exceeds max_len {self.max_len}")
        base = cast(nn.Module, self.model.base_model)
        out = base(input_ids=ids, use_cache=False)
        h: torch.Tensor = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
        return h

    def head(self, h: torch.Tensor) -> torch.Tensor:
        """Float32 logits ``[..., V]`` of hidden states ``[..., D]`` (the model's output embedding)."""
        head = cast(nn.Module, cast(Any, self.model).get_output_embeddings())
        logits: torch.Tensor = head(h)
        return logits.float()


_LOGIT_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "logits_scaling", "output_logit_scale")
"""Config fields of architectures whose logits are more than ``lm_head(hidden)`` (Gemma 2/3, Cohere,
Granite, ...): such models are scored through their own forward."""


def _plain_output_layer(model: nn.Module) -> bool:
    base = getattr(model, "base_model", None)
    get_head = getattr(model, "get_output_embeddings", None)
    if base is None or base is model or get_head is None or not isinstance(get_head(), nn.Linear):
        return False
    cfg = getattr(model, "config", None)
    return not any(getattr(cfg, name, None) not in (None, 1, 1.0) for name in _LOGIT_TRANSFORMS)


def hf_config(path: str | Path) -> dict[str, int]:
    """The sizes a trajlake checkpoint records of a local Hugging Face model (vocabulary, positions)."""
    import json

    try:
        config = json.loads((Path(path) / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{path} has no readable config.json: not a saved Hugging Face model") from exc
    positions = next(
        (config[k] for k in ("max_position_embeddings", "n_positions", "n_ctx") if k in config), 0
    )
    vocab = config.get("vocab_size", 0)
    if not (isinstance(positions, int) and positions > 0 and isinstance(vocab, int) and vocab > 0):
        raise ModelLoadError(
            f"{path}/config.json gives no vocab_size and max_position_embeddings / n_positions"
        )
    return {"vocab_size": vocab, "max_len": positions}


def save_hf(source: str | Path, weights: Mapping[str, Any], out: str | Path) -> str:
    """Write the model at ``source`` with trained ``weights`` (``HFPolicyModel`` names) to ``out``.

    Through ``save_pretrained``, so ``out`` is a complete Hugging Face directory (config,
    safetensors, tied weights handled by the library) that :func:`load_causal_lm` and
    inference servers open, in ``source``'s own dtype (the weights are cast to it).
    Returns that dtype's name (``float32``, ``bfloat16``, ...).
    """
    import numpy as np

    model = load_causal_lm(source)
    prefix = "model."
    state = {
        k[len(prefix) :]: torch.from_numpy(np.asarray(v)) for k, v in weights.items() if k.startswith(prefix)
    }
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise ModelLoadError(f"trained weights do not fit the model at {source}: {exc}") from exc
    cast(Any, model).save_pretrained(str(out))
    for pattern in TOKENIZER_FILES:  # the model's own tokenizer and chat template travel with it
        for f in Path(source).glob(pattern):
            if f.is_file() and not (Path(out) / f.name).exists():
                shutil.copyfile(f, Path(out) / f.name)
    return str(next(model.parameters()).dtype).removeprefix("torch.")


TOKENIZER_FILES = ("tokenizer*", "special_tokens_map.json", "added_tokens.json", "vocab.*", "merges.txt",
                   "chat_template.*", "*.tiktoken", "spiece.model")  # fmt: skip
"""What ``save_pretrained`` of a tokenizer writes, copied from the source into each checkpoint's ``hf/``."""


def has_tokenizer(path: str | Path) -> bool:
    """Whether a Hugging Face directory holds its own tokenizer."""
    return (Path(path) / "tokenizer_config.json").is_file() or (Path(path) / "tokenizer.json").is_file()
