"""Compare two lakes table by table, as row sets (Delta-internal metadata ignored)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lake.store import PIPELINE_TABLES, Lake


@dataclass
class TableDiff:
    """How one table differs between lake A and lake B."""

    table: str
    rows_a: int
    rows_b: int
    only_a: list[dict[str, Any]] = field(default_factory=list)
    """Up to a few rows in A and not in B."""
    only_b: list[dict[str, Any]] = field(default_factory=list)
    """Up to a few rows in B and not in A."""
    missing: str | None = None
    """Set when the table exists in only one lake."""

    @property
    def equal(self) -> bool:
        """Whether the row multisets are identical."""
        return self.missing is None and not self.only_a and not self.only_b and self.rows_a == self.rows_b


def _canon(table: pa.Table) -> Counter[str]:
    out: Counter[str] = Counter()
    for row in table.to_pylist():
        out[json.dumps(row, sort_keys=True, default=str)] += 1
    return out


def diff_lakes(
    a: Lake,
    b: Lake,
    tables: tuple[str, ...] = PIPELINE_TABLES,
    *,
    version_a: dict[str, int] | None = None,
    sample: int = 3,
) -> list[TableDiff]:
    """Table-by-table comparison of the row multisets of two lakes."""
    out = []
    for name in tables:
        ea, eb = a.exists(name), b.exists(name)
        if not (ea and eb):
            if ea or eb:
                out.append(TableDiff(name, 0, 0, missing="A" if not ea else "B"))
            continue
        ra = _canon(a.read(name, version=(version_a or {}).get(name)))
        rb = _canon(b.read(name))
        only_a = list((ra - rb).elements())
        only_b = list((rb - ra).elements())
        out.append(
            TableDiff(
                name,
                sum(ra.values()),
                sum(rb.values()),
                only_a=[json.loads(r) for r in only_a[:sample]]
                + ([{"...": len(only_a) - sample}] if len(only_a) > sample else []),
                only_b=[json.loads(r) for r in only_b[:sample]]
                + ([{"...": len(only_b) - sample}] if len(only_b) > sample else []),
            )
        )
    return out
