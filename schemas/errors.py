"""The error root of trajlake and the schema errors.

Every error trajlake raises derives from :class:`TrajlakeError`; each package
derives its own root from it (``IngestError``, ``SandboxError``, ...). The root
lives here because ``schemas`` is the package every other one depends on.
"""

from __future__ import annotations


class TrajlakeError(Exception):
    """Root of every error raised by trajlake."""


class InfraError(TrajlakeError):
    """Marker for failures of the infrastructure, never of the policy.

    An episode that ends because one of these was raised is recorded with status
    ``infra_error`` and must never be learned from as a low reward.
    """


class UnavailableError(TrajlakeError):
    """Marker for a resource a command needs that is missing or not running.

    A broker that does not answer, a base image not built yet, a Docker engine
    that is not started, a lake with no tables: nothing is wrong with the input,
    the machine is not ready. The message says what is missing and names the
    command that prepares it; the CLI exits with status 3 on these.
    """


class SchemaError(TrajlakeError):
    """An event or payload does not satisfy its schema.

    Attributes:
        errors: one ``(field path, message)`` pair per violation.
    """

    def __init__(self, message: str, errors: list[tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.errors: list[tuple[str, str]] = errors or []

    @property
    def fields(self) -> list[str]:
        """The dotted paths of the offending fields."""
        return [path for path, _ in self.errors]
