"""Errors of the learners package."""

from __future__ import annotations

from schemas.errors import TrajlakeError, UnavailableError


class LearnerError(TrajlakeError):
    """Root of every error raised by ``learners``."""


class CheckpointNotFoundError(LearnerError, KeyError):
    """A checkpoint (or one of its ancestors) is not in the ``checkpoints`` table."""

    def __str__(self) -> str:
        # KeyError's str() is the repr of its argument; this one is a sentence
        return str(self.args[0]) if self.args else "checkpoint not found"


class DeviceUnavailableError(LearnerError, UnavailableError):
    """The device asked for (e.g. CUDA) is not available here."""


class LearnerConfigError(LearnerError, ValueError):
    """A model configuration, backend or training argument is not valid (the message names it)."""
