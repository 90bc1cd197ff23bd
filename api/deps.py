"""Dependencies the routes share, as ``Annotated`` aliases.

``ReaderDep`` hands a route the app's :class:`~api.lake_reader.LakeReader`;
``require_token`` guards a router when the app has a token; the version and
paging aliases give every route the same query parameters with the same
bounds and descriptions.
"""

from __future__ import annotations

import hmac
from typing import Annotated, Any

from fastapi import Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.errors import UnauthorizedError
from api.lake_reader import LakeReader

MAX_LIMIT = 500
"""Most items one page of a list may hold."""


def get_reader(request: Request) -> LakeReader:
    """The lake reader of the app serving ``request``."""
    reader: LakeReader = request.app.state.reader
    return reader


ReaderDep = Annotated[LakeReader, Depends(get_reader)]

_bearer = HTTPBearer(auto_error=False, description="The token the service was started with.")


def require_token(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """Let the request through if the app has no token, or the request bears it.

    Raises:
        UnauthorizedError: the app has a token and the request has none or another.
    """
    token: str | None = request.app.state.token
    if token is None:
        return
    if credentials is None:
        raise UnauthorizedError("this API requires a token: send `Authorization: Bearer <token>`")
    if not hmac.compare_digest(credentials.credentials.encode(), token.encode()):
        raise UnauthorizedError("the bearer token is not valid for this API")


def version_query(table: str) -> Any:
    """The query parameter pinning the Delta version (time travel) of ``table``."""
    return Query(ge=0, description=f"Delta version of the `{table}` table to read (default: its latest).")


EpisodesVersion = Annotated[int | None, version_query("episodes")]
StepsVersion = Annotated[int | None, version_query("steps")]
RewardsVersion = Annotated[int | None, version_query("rewards")]
FailuresVersion = Annotated[int | None, version_query("failures")]
CheckpointsVersion = Annotated[int | None, version_query("checkpoints")]

Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"Items per page (at most {MAX_LIMIT}).")]
Offset = Annotated[int, Query(ge=0, description="Items to skip.")]
JudgeName = Annotated[
    str | None, Query(description="Judge name (default: the only judge that scored episodes).")
]
JudgeVersion = Annotated[
    str | None, Query(description="Judge version (default: the latest seen: newest first reward).")
]
