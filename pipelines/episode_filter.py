"""The SQL predicate over ``episodes`` that the jobs re-running recorded episodes select with."""

from __future__ import annotations

from collections.abc import Sequence

from lake import sql_literal


def complete_episodes(
    *, families: Sequence[str] = (), task_ids: Sequence[str] = (), episode_ids: Sequence[str] = (),
    statuses: Sequence[str] = (),
) -> str:  # fmt: skip
    """Complete episodes of these families, tasks, ids and statuses (an empty filter: any)."""
    where = ["completeness = 'complete'"]
    for col, values in (
        ("task_family", families),
        ("task_id", task_ids),
        ("episode_id", episode_ids),
        ("status", statuses),
    ):
        if values:
            where.append(f"{col} IN ({', '.join(sql_literal(v) for v in values)})")
    return " AND ".join(where)
