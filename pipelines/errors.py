"""Errors of the pipelines package."""

from __future__ import annotations

from schemas.errors import TrajlakeError


class PipelineError(TrajlakeError):
    """Root of every error raised by ``pipelines``."""


class LakeError(PipelineError):
    """A Delta table could not be created, opened, read or committed to."""
