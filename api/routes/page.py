"""``/``: the web page (breakdown chart, clusters, episode drill-down) over the JSON endpoints."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from api.page import INDEX_HTML

router = APIRouter(tags=["page"])


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def index() -> HTMLResponse:
    """The self-contained page; it holds no data, and asks for the token when the API needs one."""
    return HTMLResponse(INDEX_HTML)
