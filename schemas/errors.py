"""The error root of trajlake and the schema errors.

Every error trajlake raises derives from :class:`TrajlakeError`; each package
derives its own root from it (``IngestError``, ``SandboxError``, ...). The root
lives here because ``schemas`` is the package every other one depends on.
"""

from __future__ import annotations

from dataclasses import dataclass

PROGRAM = "trajlake"


@dataclass(frozen=True)
class Fix:
    """How to fix an error, as data: a sentence and the command (if any) it names.

    Lower packages never write a command line into a message: they attach a ``Fix`` (the
    shared ones are in :mod:`schemas.fixes`), and whoever shows the error renders it: the CLI
    as ``message; fix`` with the command quoted, a test by checking ``fix.command``.

    Attributes:
        text: the sentence; ``{command}`` marks where the command goes.
        command: the command's words after the program name (empty: a fix with no command).
    """

    text: str
    command: tuple[str, ...] = ()

    def render(self, program: str = PROGRAM) -> str:
        """The sentence with the command written out (backquoted)."""
        if not self.command:
            return self.text
        return self.text.replace("{command}", f"`{program} {' '.join(self.command)}`")

    def __str__(self) -> str:
        return self.render()


class TrajlakeError(Exception):
    """Root of every error raised by trajlake.

    Attributes:
        fix: how to fix it, when there is a known way (rendered by the CLI after the message).
    """

    fix: Fix | None = None

    def __init__(self, *args: object, fix: Fix | None = None) -> None:
        super().__init__(*args)
        if fix is not None:
            self.fix = fix

    def explained(self) -> str:
        """The message and, when there is one, the fix: what a person is shown."""
        text = str(self)
        return f"{text}; {self.fix.render()}" if self.fix is not None else text


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

    def __init__(
        self, message: str, errors: list[tuple[str, str]] | None = None, *, fix: Fix | None = None
    ) -> None:
        super().__init__(message, fix=fix)
        self.errors: list[tuple[str, str]] = errors or []

    @property
    def fields(self) -> list[str]:
        """The dotted paths of the offending fields."""
        return [path for path, _ in self.errors]
