"""``trajlake doctor``: is this machine ready?"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from trajlake.terminal import ExitCode, console, err_console, settings

if TYPE_CHECKING:
    pass


def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON.")] = False,
) -> None:
    """Check everything trajlake needs on this machine; a fix for each thing that is missing.

    Exits 0 only when everything the demo needs is ready (3 otherwise).
    """
    from trajlake.doctor import as_json as rows_json
    from trajlake.doctor import run_checks

    s = settings()
    if as_json:
        rows = run_checks(s)
        print(json.dumps(rows_json(rows), indent=2))
    else:
        with err_console.status("checking") as spinner:
            rows = run_checks(s, on_row=lambda r: spinner.update(f"checked {r.name}"))
        table = Table(title=f"trajlake doctor (TRAJLAKE_HOME={s.home})")
        for col in ("check", "status", "found", "fix"):
            table.add_column(col, overflow="fold")
        style = {"ok": "[green]ok[/green]", "missing": "[bold red]missing[/bold red]",
                 "optional": "[yellow]optional[/yellow]"}  # fmt: skip
        for r in rows:
            table.add_row(r.name, style[r.status], escape(r.detail), escape(r.fix))
        console.print(table)
    missing = [r.name for r in rows if r.status == "missing"]
    if missing:
        if not as_json:
            err_console.print(f"[bold red]not ready:[/bold red] {', '.join(missing)} (see the fix column)")
        raise typer.Exit(code=ExitCode.NOT_READY)
    if not as_json:
        console.print("[green]ready[/green]: everything `trajlake demo` needs is here")
