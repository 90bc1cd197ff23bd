"""Errors of the sandboxes package.

A command that fails inside a sandbox is data (an :class:`~sandboxes.interface.ExecResult`
with a non-zero exit code); these errors are for a sandbox that itself cannot do its
job. Every one of them that comes from the infrastructure derives from
:class:`~schemas.errors.InfraError`, so an episode that ends on one is recorded as
``infra_error`` and never learned from as a low reward.
"""

from __future__ import annotations

from schemas.errors import InfraError, TrajlakeError, UnavailableError


class SandboxError(TrajlakeError):
    """Root of every error raised by ``sandboxes``."""


class SandboxUnavailableError(SandboxError, InfraError, UnavailableError):
    """The backend cannot run here (missing tool, no engine, not permitted, no image)."""


class ImageNotBuiltError(SandboxUnavailableError):
    """No image of that name or digest is recorded in the image store (``trajlake sandbox build-image``)."""


class SandboxCrashedError(SandboxError, InfraError):
    """The sandbox died or stopped answering; it must be replaced."""


class SandboxQuotaError(SandboxError, InfraError):
    """A resource bound of the sandbox itself was reached (workspace full, snapshot depth)."""


class SandboxClosedError(SandboxError):
    """The sandbox was used after ``close()``."""


class SandboxPathError(SandboxError, ValueError):
    """A path given to ``read_file``/``write_file`` is outside the workspace or unsafe."""


class SnapshotNotFoundError(SandboxError, KeyError):
    """``restore`` was given a reference this sandbox does not hold (any more)."""


class PoolTimeoutError(SandboxError, InfraError):
    """No sandbox became free within the acquire timeout."""


class PoolClosedError(SandboxError):
    """The pool was used after ``close()``."""


class ImageError(SandboxError):
    """A base image could not be built, found, or does not match its pinned digest."""


class ImageDriftError(ImageError, InfraError):
    """The image under a pinned name no longer has the recorded digest."""
