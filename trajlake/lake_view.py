"""Rich rendering of a lake, shared by the CLI and the demo."""

from __future__ import annotations

from rich.table import Table

from lake import Lake


def lake_versions_table(lake: Lake, title: str) -> Table:
    """Every table of ``lake`` with its current Delta version and row count."""
    table = Table(title=title)
    for col in ("table", "Delta version", "rows"):
        table.add_column(col)
    for name, version in lake.versions().items():
        table.add_row(name, str(version), str(lake.row_count(name)))
    return table
