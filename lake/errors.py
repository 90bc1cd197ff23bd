"""Errors of the lake package."""

from __future__ import annotations

from schemas.errors import TrajlakeError, UnavailableError


class LakeError(TrajlakeError):
    """A Delta table could not be created, opened, read or committed to."""


class TableMissingError(LakeError, UnavailableError):
    """A table (or the whole lake) does not exist yet; the pipeline creates it."""


class VersionNotFoundError(LakeError, ValueError):
    """A Delta version asked for does not exist (the message names the range that does)."""


class LakeDamagedError(LakeError):
    """A table's log or files are damaged; the message names the table, the version and the fix."""
