"""``/health``: the service is up (the one route that needs no token)."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import ReaderDep
from api.models import HealthPublic
from schemas.tables import TABLES

router = APIRouter(tags=["health"])


@router.get("/health")
def health(reader: ReaderDep) -> HealthPublic:
    """Whether the service answers, and how many tables the lake has now."""
    return HealthPublic(tables=sum(1 for name in TABLES if reader.latest(name) is not None))
