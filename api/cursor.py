"""Cursor pagination: every page of a list read from the same table versions as the first.

A list answers ``next_cursor`` while items remain. The cursor carries the Delta version of every
table the first page read, the offset of the next page, and a fingerprint of the request's
filters. Given back as ``?cursor=``, it pins those versions, so paging through a list while the
pipeline commits neither skips nor repeats an item, and a cursor used with other filters than
its own is refused (a 422 saying so) instead of paging a different list.

The cursor is opaque to clients but not secret (base64url JSON): everything in it a client
could have asked for with ``offset`` and ``*_version`` parameters.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Annotated, Any

from fastapi import Depends, Query, Request

from api.deps import MAX_COUNT, Offset
from api.errors import InvalidRequestError
from schemas.tables import TABLES

PIN_PARAMS = frozenset({"version", *(f"{t}_version" for t in TABLES)})
"""Query parameters that pin a table's version (not filters: the cursor pins them itself)."""

_NOT_FILTERS = PIN_PARAMS | {"cursor", "offset", "limit"}


def _fingerprint(path: str, params: list[tuple[str, str]]) -> str:
    filters = sorted((k, v) for k, v in params if k not in _NOT_FILTERS)
    return hashlib.sha256(json.dumps([path, filters]).encode()).hexdigest()[:16]


class Page:
    """Where a list's page starts, and the table versions it must read."""

    def __init__(self, offset: int, pins: dict[str, int], fingerprint: str) -> None:
        self.offset = offset
        self.pins = pins
        self.fingerprint = fingerprint

    def pin(self, table: str, version: int | None) -> int | None:
        """The version of ``table`` to read: the one asked for, else the cursor's, else the latest (None).

        Raises:
            InvalidRequestError: a version asked for that differs from the one the cursor pinned.
        """
        pinned = self.pins.get(table)
        if version is not None and pinned is not None and version != pinned:
            raise InvalidRequestError(
                f"the cursor reads {table} at version {pinned}, the request asks for version {version}: "
                "drop the version parameter, or start again without the cursor"
            )
        return version if version is not None else pinned

    def next(self, versions: dict[str, int | None], limit: int, total: int) -> str | None:
        """The cursor of the page after this one, or None when this one is the last."""
        if self.offset + limit >= total:
            return None
        doc = {"v": {k: v for k, v in versions.items() if v is not None}, "o": self.offset + limit,
               "f": self.fingerprint}  # fmt: skip
        return base64.urlsafe_b64encode(json.dumps(doc, separators=(",", ":")).encode()).decode().rstrip("=")


def _decode(cursor: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        doc = json.loads(raw)
        versions, offset, fingerprint = doc["v"], doc["o"], doc["f"]
        ok = (  # the bounds of the parameters a cursor stands for
            isinstance(versions, dict)
            and all(k in TABLES and type(v) is int and 0 <= v <= MAX_COUNT for k, v in versions.items())
            and type(offset) is int
            and 0 <= offset <= MAX_COUNT
            and isinstance(fingerprint, str)
        )
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError):
        ok = False
    if not ok:
        raise InvalidRequestError(
            "cursor: not a cursor this API made; pass the `next_cursor` of a previous page unchanged"
        )
    return dict(doc)


def paging(
    request: Request,
    cursor: Annotated[
        str | None,
        Query(
            max_length=4096,
            description="The `next_cursor` of the previous page: the next page, read from the same "
            "table versions as the first.",
        ),
    ] = None,
    offset: Offset = 0,
) -> Page:
    """The page a list request asks for: from ``offset``, or from where ``cursor`` left off.

    Raises:
        InvalidRequestError: both a cursor and an offset; a malformed cursor; a cursor made for
            another route or other filters.
    """
    route = request.scope.get("route")
    path = getattr(route, "path", request.url.path)
    fingerprint = _fingerprint(path, list(request.query_params.multi_items()))
    if cursor is None:
        return Page(offset, {}, fingerprint)
    if offset:
        raise InvalidRequestError("give either cursor or offset, not both: the cursor holds its offset")
    doc = _decode(cursor)
    if doc["f"] != fingerprint:
        raise InvalidRequestError(
            "cursor: it was made for other filters (or another route) than this request's: "
            "repeat the first page's filters, or start again without the cursor"
        )
    return Page(doc["o"], {k: int(v) for k, v in doc["v"].items()}, fingerprint)


PageDep = Annotated[Page, Depends(paging)]
