"""``/health``: the service is up (the one route that needs no token)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from api.deps import ReaderDep
from api.models import HealthPublic
from schemas.tables import TABLES

router = APIRouter(tags=["health"])


@router.get("/health", responses={503: {"model": HealthPublic, "description": "The lake is damaged."}})
def health(reader: ReaderDep, response: Response) -> HealthPublic:
    """Whether the service answers, how many tables the lake has, and which are damaged (503)."""
    from lake.check import REBUILD

    damaged = [name for name in TABLES if reader.problems(name)]
    if damaged:
        response.status_code = 503
        return HealthPublic(status="damaged", tables=len(TABLES), damaged=damaged, fix=REBUILD.render())
    return HealthPublic(tables=sum(1 for name in TABLES if reader.latest(name) is not None))
