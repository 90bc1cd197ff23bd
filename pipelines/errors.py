"""Errors of the pipelines package."""

from __future__ import annotations

from schemas.errors import TrajlakeError


class PipelineError(TrajlakeError):
    """Root of every error raised by ``pipelines`` (errors of the tables are ``lake.LakeError``)."""
