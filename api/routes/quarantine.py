"""``/quarantine``: records of the log that failed to parse or validate, each with the reason."""

from __future__ import annotations

from typing import Annotated, Any

import pyarrow as pa
from fastapi import APIRouter, Query

from api.analysis import truncate
from api.cursor import PageDep
from api.deps import Limit, ReaderDep, version_query
from api.lake_reader import versions_of
from api.models import QuarantinePagePublic, QuarantinePublic

router = APIRouter(prefix="/quarantine", tags=["quarantine"])

QuarantineVersion = Annotated[int | None, version_query("quarantine")]


def newest_first(table: pa.Table) -> pa.Table:
    """Quarantined records by Kafka time, newest first (then by their place in the log, last first)."""
    return table.sort_by(
        [
            ("kafka_ts", "descending"),
            ("topic", "ascending"),
            ("partition", "ascending"),
            ("offset", "descending"),
        ]
    )


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", errors="replace")


def _public(row: dict[str, Any], max_text: int) -> QuarantinePublic:
    raw, cut = truncate(_text(row["raw"]), max_text)
    return QuarantinePublic(
        topic=row["topic"],
        partition=row["partition"],
        offset=row["offset"],
        key=_text(row["key"]),
        raw=raw,
        raw_bytes=None if row["raw"] is None else len(row["raw"]),
        raw_truncated=cut,
        error=row["error"],
        error_fields=row["error_fields"],
        kafka_ts=row["kafka_ts"],
    )


@router.get("")
def list_quarantine(
    reader: ReaderDep,
    page: PageDep,
    max_text: Annotated[
        int, Query(ge=0, le=1_000_000, description="Characters kept of each record's raw text.")
    ] = 2000,
    limit: Limit = 50,
    version: QuarantineVersion = None,
) -> QuarantinePagePublic:
    """Records the pipeline could not parse or validate, newest first, each with why and where it is.

    A quarantined record never reaches the ``events`` table: fix its producer, and
    the raw bytes here say what it sent.
    """
    snap = reader.snapshot("quarantine", page.pin("quarantine", version))
    ordered = reader.derived(snap, "newest_first", newest_first)
    versions = versions_of(snap)
    return QuarantinePagePublic(
        versions=versions,
        total=ordered.num_rows,
        limit=limit,
        offset=page.offset,
        next_cursor=page.next(versions, limit, ordered.num_rows),
        items=[_public(r, max_text) for r in ordered.slice(page.offset, limit).to_pylist()],
    )
