"""The query API: failure analysis over the lake's Delta tables, as JSON and a web page.

Public API: :func:`create_app` (the FastAPI application), :class:`LakeReader`
(cached, versioned reads of the tables) and the error family rooted at
:class:`ApiError`.
"""

from api.app import create_app
from api.errors import (
    ApiError,
    InvalidRequestError,
    LakeUnavailableError,
    NotFoundError,
    UnauthorizedError,
    VersionNotFoundError,
)
from api.lake_reader import LakeReader, Snapshot

__all__ = [
    "ApiError",
    "InvalidRequestError",
    "LakeReader",
    "LakeUnavailableError",
    "NotFoundError",
    "Snapshot",
    "UnauthorizedError",
    "VersionNotFoundError",
    "create_app",
]
