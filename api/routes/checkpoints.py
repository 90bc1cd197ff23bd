"""``/checkpoints``: learner checkpoints and their lineage."""

from __future__ import annotations

from typing import Annotated, Any

import pyarrow as pa
from fastapi import APIRouter, Path

from api.analysis import lineage, parse_json
from api.cursor import PageDep
from api.deps import CheckpointsVersion, Limit, ReaderDep
from api.lake_reader import versions_of
from api.models import CheckpointPublic, CheckpointsPublic, LineagePublic

router = APIRouter(prefix="/checkpoints", tags=["checkpoints"])

_JSON_COLUMNS = ("table_versions", "offsets", "metrics")


def _public(row: dict[str, Any]) -> CheckpointPublic:
    return CheckpointPublic(**{k: parse_json(v) if k in _JSON_COLUMNS else v for k, v in row.items()})


def _by_id(table: pa.Table) -> dict[str, dict[str, Any]]:
    return {r["checkpoint_id"]: r for r in table.to_pylist()}


@router.get("")
def list_checkpoints(
    reader: ReaderDep, page: PageDep, limit: Limit = 50, version: CheckpointsVersion = None
) -> CheckpointsPublic:
    """Checkpoints, newest first, with the table versions, judge version and samples that produced them."""
    snap = reader.snapshot("checkpoints", page.pin("checkpoints", version))
    ordered = reader.derived(
        snap,
        "newest_first",
        lambda t: t.sort_by([("created_at", "descending"), ("checkpoint_id", "descending")]),
    )
    versions = versions_of(snap)
    return CheckpointsPublic(
        versions=versions,
        total=ordered.num_rows,
        next_cursor=page.next(versions, limit, ordered.num_rows),
        items=[_public(r) for r in ordered.slice(page.offset, limit).to_pylist()],
    )


@router.get("/{checkpoint_id}/lineage", responses={404: {"description": "No such checkpoint."}})
def checkpoint_lineage(
    reader: ReaderDep,
    checkpoint_id: Annotated[str, Path(description="The checkpoint.")],
    version: CheckpointsVersion = None,
) -> LineagePublic:
    """The checkpoint and its ancestors (parent, grandparent, ...), newest first."""
    snap = reader.snapshot("checkpoints", version)
    chain, broken_at = lineage(reader.derived(snap, "by_id", _by_id), checkpoint_id)
    return LineagePublic(
        versions=versions_of(snap),
        checkpoint_id=checkpoint_id,
        chain=[_public(r) for r in chain],
        broken_at=broken_at,
    )
