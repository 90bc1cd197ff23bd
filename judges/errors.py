"""Errors of the judges package (judges, task specs, admission)."""

from __future__ import annotations

from schemas.errors import TrajlakeError


class JudgeError(TrajlakeError):
    """Root of every error raised by ``judges``."""


class JudgeConfigError(JudgeError, ValueError):
    """A judge was asked for with an unknown name or an invalid configuration."""


class TaskSpecError(JudgeError, ValueError):
    """A task spec is missing, malformed, or refers to files that are not there.

    Attributes:
        path: the task's directory or spec file.
    """

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class GoldenSetError(JudgeError):
    """A golden case is malformed or refers to an unknown task."""


class TaskSetupError(JudgeError):
    """A task's setup command failed in the sandbox: its initial state does not build."""


class AdmissionError(JudgeError):
    """Tasks a job needs were not admitted (the message gives the distinct reasons and counts)."""


class WorkspaceUnjudgeable(JudgeError):  # noqa: N818 - a finding about the agent's state, not a fault
    """The agent left a workspace the judge cannot read within its limits: a ``fail``, never ``error``.

    Attributes:
        kind: the flag the verdict carries (``workspace_unjudgeable``, or a more precise one such as
            ``links_out_of_workspace``).
    """

    def __init__(self, message: str, *, kind: str = "workspace_unjudgeable") -> None:
        super().__init__(message)
        self.kind = kind
