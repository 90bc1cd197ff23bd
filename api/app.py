"""The FastAPI application: routers, the token guard, and the one error handler."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.deps import reject_unknown_params, require_token
from api.errors import ApiError
from api.lake_reader import LakeReader
from api.metrics import ApiMetrics, MetricsAndHead
from api.models import ErrorPublic
from api.routes import blobs as blob_routes
from api.routes import (
    checkpoints,
    episodes,
    failures,
    health,
    judges,
    page,
    platform,
    quarantine,
    review,
    search,
    tables,
    training,
)
from api.text_index import TextIndex
from lake import Lake
from schemas.events import SDK_VERSION

_ERRORS: dict[int | str, dict[str, object]] = {
    401: {"model": ErrorPublic, "description": "No token, or a wrong one (when the service has a token)."},
    404: {
        "model": ErrorPublic,
        "description": "No such thing, or a Delta version beyond the table's latest.",
    },
    422: {"model": ErrorPublic, "description": "A parameter is out of range or cannot be answered."},
}


def _error(status: int, code: str, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    body = ErrorPublic(error=code, detail=detail).model_dump()
    return JSONResponse(status_code=status, content=body, headers=headers)


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
    return _error(exc.status_code, exc.code, exc.message, headers)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    # FastAPI's own parameter checks (a bad `by`, a limit out of range) answer in
    # the same shape as the domain errors: one sentence per offending parameter.
    assert isinstance(exc, RequestValidationError)
    parts = []
    for err in exc.errors():
        where = ".".join(str(x) for x in err.get("loc", ()) if x not in ("query", "path"))
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return _error(422, "invalid_request", "; ".join(parts) or "invalid request")


_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    # Starlette's own answers (no such route, a method the route does not take) in the same shape
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 404:
        detail = f"no route {request.url.path}: the routes are listed at /docs"
    elif exc.status_code == 405:
        detail = f"{request.method} is not allowed on {request.url.path}"
    else:
        detail = str(exc.detail)
    headers = dict(exc.headers or {})
    return _error(exc.status_code, _HTTP_CODES.get(exc.status_code, "http_error"), detail, headers or None)


def create_app(
    lake_root: str | Path,
    *,
    token: str | None = None,
    storage_options: dict[str, str] | None = None,
    cache_entries: int = 32,
    cache_bytes: int = 1 << 30,
    reviewers: dict[str, str] | None = None,
    publish: Callable[[list[Any]], None] | None = None,
    review_topic: str = "trajlake.curation",
    prometheus_url: str | None = None,
    blobs: Callable[[str], bytes] | None = None,
    search_index: str | Path | None = None,
) -> FastAPI:
    """The query API over the lake at ``lake_root``.

    Args:
        lake_root: the lake directory (or delta-rs URI).
        token: when set, every route but ``/health`` and the page shell requires
            ``Authorization: Bearer <token>``.
        storage_options: delta-rs storage options (object stores).
        cache_entries: most whole-table snapshots kept in memory (0: no caching).
        cache_bytes: most bytes of Arrow data the snapshots keep in memory.
        reviewers: reviewer name -> token; a verdict (``POST /review/...``) needs one of these
            tokens and is recorded under its name (they may also read, like ``token``).
        publish: writes events to the log and returns once they are acknowledged (the
            composition root passes one; the API imports no producer). None: verdicts answer 503.
        review_topic: the topic ``publish`` writes the ``review:`` control streams to (reported).
        prometheus_url: the deployment's Prometheus, whose view ``GET /platform`` adds to the lake's.
        blobs: reads a blob's bytes by its sha256 (``KeyError``: not held), for ``GET /blobs/...``;
            None: that route answers 503.
        search_index: a local directory for the text index of ``steps`` (:mod:`api.text_index`),
            filled in the background as searches meet data files it lacks; None: every search
            scans the text.

    Returns:
        The application (serve it with uvicorn, or call it with a test client).
    """
    app = FastAPI(
        title="trajlake query API",
        summary="Failure analysis over the trajlake Delta tables (read-only).",
        version=SDK_VERSION,
        responses=_ERRORS,
    )
    app.state.reader = LakeReader(
        Lake(lake_root, storage_options), cache_entries=cache_entries, cache_bytes=cache_bytes
    )
    if search_index is not None:
        app.state.reader.text_index = TextIndex(Path(search_index))
    app.state.token = token
    app.state.reviewers = dict(reviewers or {})
    app.state.publish = publish
    app.state.review_topic = review_topic
    app.state.prometheus_url = prometheus_url
    app.state.blobs = blobs
    metrics = ApiMetrics(app.state.reader)
    app.state.metrics = metrics
    strict = [Depends(reject_unknown_params)]
    guarded = [Depends(require_token), *strict]
    app.include_router(health.router, dependencies=strict)
    app.include_router(page.router)
    for module in (tables, episodes, failures, judges, checkpoints, review, quarantine, search, platform):
        app.include_router(module.router, dependencies=guarded)
    app.include_router(training.router, dependencies=guarded)  # /episodes/{id}/training
    app.include_router(blob_routes.router, dependencies=guarded)

    @app.get("/metrics", include_in_schema=False)
    def prometheus_metrics() -> Response:
        """The API's metrics in Prometheus' text format (no token: counts and latencies, no rows)."""
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_middleware(MetricsAndHead, metrics=metrics)
    return app
