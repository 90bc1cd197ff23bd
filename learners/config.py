"""The sizes of the policy language model (:class:`ModelConfig`), shared by the PyTorch and JAX models."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from learners.errors import LearnerConfigError


@dataclass(frozen=True)
class ModelConfig:
    """Sizes of the decoder-only transformer (hashable, so JAX can use it as a static argument)."""

    vocab_size: int = 98
    """Number of token ids (98 for :class:`learners.tokenizer.CharTokenizer`)."""
    d_model: int = 64
    """Width of the residual stream (embedding size)."""
    n_layers: int = 2
    """Number of transformer blocks."""
    n_heads: int = 4
    """Number of attention heads; must divide ``d_model``."""
    d_ff: int = 256
    """Hidden width of each block's MLP."""
    max_len: int = 96
    """Longest sequence (prompt + completion) the model accepts: the size of the position embedding."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise LearnerConfigError(f"ModelConfig.{f.name} must be a positive int, got {value!r}")
        if self.d_model % self.n_heads != 0:
            raise LearnerConfigError(f"n_heads ({self.n_heads}) must divide d_model ({self.d_model})")

    def to_dict(self) -> dict[str, int]:
        """Returns the fields as a plain dict (JSON-serialisable).

        Returns:
            ``{field name: value}`` for every field.
        """
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ModelConfig:
        """Builds a config from a dict such as :meth:`to_dict` returns.

        Args:
            d: field values; missing fields take their defaults.

        Returns:
            The config.

        Raises:
            ValueError: if ``d`` names a field ModelConfig does not have, or a value is not a positive int.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise LearnerConfigError(f"unknown ModelConfig fields: {unknown}")
        return cls(**{k: int(v) for k, v in d.items()})
