"""Dependencies the routes share, as ``Annotated`` aliases.

``ReaderDep`` hands a route the app's :class:`~api.lake_reader.LakeReader`;
``require_token`` guards a router when the app has a token; the version and
paging aliases give every route the same query parameters with the same
bounds and descriptions.
"""

from __future__ import annotations

import hmac
import types
import typing
from typing import Annotated, Any

from fastapi import Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.errors import ForbiddenError, InvalidRequestError, UnauthorizedError
from api.lake_reader import LakeReader
from schemas import fixes

MAX_LIMIT = 500
"""Most items one page of a list may hold."""

MAX_COUNT = 2**53
"""Bound of every count, offset and version a query may give (Arrow computes in 64 bits; larger
numbers are refused with a 422 instead of overflowing into a 500)."""


def get_reader(request: Request) -> LakeReader:
    """The lake reader of the app serving ``request``."""
    reader: LakeReader = request.app.state.reader
    return reader


ReaderDep = Annotated[LakeReader, Depends(get_reader)]

_QUERY_NAMES: dict[int, tuple[frozenset[str], frozenset[str]]] = {}


def _is_sequence(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, set, frozenset):
        return True
    unions = (typing.Union, types.UnionType)
    return origin in unions and any(_is_sequence(a) for a in typing.get_args(annotation))


def _query_names(route: Any) -> tuple[frozenset[str], frozenset[str]]:
    """The query parameters ``route`` takes, and those of them that take several values."""
    key = id(route)
    names = _QUERY_NAMES.get(key)
    if names is None:
        found: set[str] = set()
        several: set[str] = set()
        pending = [getattr(route, "dependant", None)]
        while pending:  # the route's own parameters and those of every dependency it has
            dependant = pending.pop()
            if dependant is None:
                continue
            for p in getattr(dependant, "query_params", ()):
                found.add(p.alias)
                if _is_sequence(getattr(getattr(p, "field_info", None), "annotation", None)):
                    several.add(p.alias)
            pending.extend(getattr(dependant, "dependencies", ()))
        names = (frozenset(found), frozenset(several))
        _QUERY_NAMES[key] = names
    return names


def reject_unknown_params(request: Request) -> None:
    """Refuse a query parameter the route does not take.

    A misspelt ``rewards_versoin`` would otherwise be ignored silently, and the answer read from
    another version than the one meant.

    Raises:
        InvalidRequestError: a parameter the route does not declare; the message lists those it does.
    """
    taken, several = _query_names(request.scope.get("route"))
    unknown = sorted(set(request.query_params) - taken)
    if unknown:
        listed = ", ".join(sorted(taken)) or "none"
        raise InvalidRequestError(
            f"unknown query parameter{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}: "
            f"{request.url.path} takes {listed}"
        )
    # a parameter of one value given twice: the last would win silently, as a typo would
    repeated = sorted(
        {k for k in request.query_params if k not in several and len(request.query_params.getlist(k)) > 1}
    )
    if repeated:
        raise InvalidRequestError(f"{', '.join(repeated)}: give each of these once (it takes one value)")


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
    if hmac.compare_digest(credentials.credentials.encode(), token.encode()):
        return
    if _reviewer_of(request, credentials.credentials) is None:  # a reviewer reads what they review
        raise UnauthorizedError("the bearer token is not valid for this API")


def _reviewer_of(request: Request, presented: str) -> str | None:
    found = None
    for name, token in (request.app.state.reviewers or {}).items():
        if hmac.compare_digest(presented.encode(), token.encode()):  # every one compared: no early exit
            found = name
    return found


def require_reviewer(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    """The reviewer whose token the request bears (a verdict is recorded under that name).

    Raises:
        UnauthorizedError: no token, or one that is no reviewer's.
        ForbiddenError: the service has no reviewers.
    """
    if not request.app.state.reviewers:
        raise ForbiddenError(
            f"this service takes no verdicts: it has no reviewers; {fixes.API_REVIEWERS.render()}"
        )
    if credentials is None:
        raise UnauthorizedError("a verdict needs a reviewer's token: send `Authorization: Bearer <token>`")
    name = _reviewer_of(request, credentials.credentials)
    if name is None:
        raise UnauthorizedError(
            "the bearer token is no reviewer's: verdicts are recorded under a reviewer's name"
        )
    return name


ReviewerDep = Annotated[str, Depends(require_reviewer)]


def version_query(table: str) -> Any:
    """The query parameter pinning the Delta version (time travel) of ``table``."""
    return Query(
        ge=0, le=MAX_COUNT, description=f"Delta version of the `{table}` table to read (default: its latest)."
    )


EpisodesVersion = Annotated[int | None, version_query("episodes")]
StepsVersion = Annotated[int | None, version_query("steps")]
RewardsVersion = Annotated[int | None, version_query("rewards")]
FailuresVersion = Annotated[int | None, version_query("failures")]
CheckpointsVersion = Annotated[int | None, version_query("checkpoints")]

Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"Items per page (at most {MAX_LIMIT}).")]
Offset = Annotated[int, Query(ge=0, le=MAX_COUNT, description="Items to skip.")]
MinSize = Annotated[int, Query(ge=1, le=MAX_COUNT, description="Smallest cluster returned.")]
JudgeName = Annotated[
    str | None, Query(description="Judge name (default: the only judge that scored episodes).")
]
JudgeVersion = Annotated[
    str | None, Query(description="Judge version (default: the latest seen: newest first reward).")
]
