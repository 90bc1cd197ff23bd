"""``/`` and ``/static/<name>``: the web page (failure analysis over the JSON endpoints).

No token: the page is only code and holds no data; it asks for the token when the API needs one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter
from fastapi import Path as PathParam
from fastapi.responses import FileResponse

from api.errors import NotFoundError
from api.page import CONTENT_SECURITY_POLICY, INDEX, MEDIA_TYPES, asset

router = APIRouter(tags=["page"])

_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",  # revalidated (ETag) on each load: a new release shows at once
}


def _file(path: Path) -> FileResponse:
    return FileResponse(path, media_type=MEDIA_TYPES[path.suffix], headers=_HEADERS)


@router.get("/", include_in_schema=False)
def index() -> FileResponse:
    """The page (``index.html``)."""
    path = asset(INDEX)
    if path is None:
        raise NotFoundError(f"the page's {INDEX} is missing from the installation")
    return _file(path)


@router.get("/static/{name}", include_in_schema=False)
def static(name: Annotated[str, PathParam(description="A file of the page.")]) -> FileResponse:
    """One file of the page (its script, style sheet, icon)."""
    path = asset(name)
    if path is None:
        raise NotFoundError(f"the page has no file {name!r}")
    return _file(path)
