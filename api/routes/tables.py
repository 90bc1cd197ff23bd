"""``/tables``: every table of the lake with its current version and row count."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import ReaderDep
from api.models import TablePublic, TablesPublic
from schemas.tables import TABLES

router = APIRouter(prefix="/tables", tags=["tables"])


@router.get("")
def list_tables(reader: ReaderDep) -> TablesPublic:
    """Each table the lake can hold: whether it exists, its current Delta version and rows."""
    out = []
    for name in TABLES:
        problems = reader.problems(name)
        if problems:
            out.append(TablePublic(name=name, exists=True, version=None, rows=None, problems=problems))
            continue
        version = reader.latest(name)
        rows = None if version is None else reader.row_count(name, version)
        out.append(TablePublic(name=name, exists=version is not None, version=version, rows=rows))
    return TablesPublic(tables=out)
