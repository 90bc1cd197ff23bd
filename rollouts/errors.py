"""Errors of the rollouts package."""

from __future__ import annotations

from schemas.errors import InfraError, TrajlakeError


class RolloutError(TrajlakeError):
    """Root of every error raised by ``rollouts``."""


class PolicySpecError(RolloutError, ValueError):
    """A policy spec string or configuration is invalid."""


class PolicyUnavailableError(RolloutError, InfraError):
    """The policy's server or model cannot be reached or loaded (infrastructure, not the policy)."""


class RolloutWorkerError(RolloutError):
    """A rollout worker process failed outside any episode (its policy did not load, it died)."""
