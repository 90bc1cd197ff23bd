"""Errors of the query API: what a request got wrong, each with its HTTP status.

Routes and the lake reader raise these; one exception handler (registered by
:func:`api.app.create_app`) turns every one into a JSON body
``{"error": <code>, "detail": <message>}`` with the error's status, so no
route deals with HTTP status codes itself.
"""

from __future__ import annotations

from schemas.errors import TrajlakeError


class ApiError(TrajlakeError):
    """Root of every error raised by ``api``.

    Attributes:
        status_code: the HTTP status the error is answered with.
        code: a short machine-readable name of the error.
    """

    status_code = 500
    code = "internal_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFoundError(ApiError):
    """The thing asked for (an episode, a checkpoint, a judge) does not exist."""

    status_code = 404
    code = "not_found"


class VersionNotFoundError(NotFoundError):
    """A Delta version beyond a table's latest (or of a table that does not exist yet)."""

    code = "version_not_found"


class InvalidRequestError(ApiError):
    """The request is well-formed but asks for something that cannot be answered."""

    status_code = 422
    code = "invalid_request"


class UnauthorizedError(ApiError):
    """The API requires a bearer token and the request has none or a wrong one."""

    status_code = 401
    code = "unauthorized"


class ForbiddenError(ApiError):
    """The request is authenticated but may not do this here."""

    status_code = 403
    code = "forbidden"


class LogUnavailableError(ApiError):
    """The broker the service writes to did not acknowledge (or none is configured)."""

    status_code = 503
    code = "log_unavailable"


class LakeUnavailableError(ApiError):
    """A table exists but could not be read (a damaged or unreachable lake)."""

    status_code = 503
    code = "lake_unavailable"
