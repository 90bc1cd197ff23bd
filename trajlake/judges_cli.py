"""``trajlake judges ...`` and ``trajlake tasks ...``: golden-set verification and task admission."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from schemas.errors import TrajlakeError

judges_app = typer.Typer(help="Versioned judges and their golden sets.", no_args_is_help=True)
tasks_app = typer.Typer(help="Task specs and task admission.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)

BackendOpt = Annotated[
    str | None, typer.Option("--backend", "-b", help="Sandbox backend (default: settings).")
]


def _settings() -> Any:
    from trajlake.settings import Settings

    return Settings()


def _fail(exc: BaseException, code: int = 2) -> None:
    err_console.print(f"[bold red]error:[/bold red] {exc}")
    raise typer.Exit(code=code)


def _pool(backend: str | None, size: int) -> Any:
    from judges.admission import ADMISSION_SPEC
    from sandboxes import SandboxPool, get_backend

    s = _settings()
    bk = get_backend(backend or s.sandbox_backend, s.sandbox_config())
    bk.ensure_available()
    return SandboxPool(bk, ADMISSION_SPEC, max_size=size)


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
    )


@judges_app.command("list")
def list_judges() -> None:
    """Registered judges and the version their default configuration has."""
    from judges import build_judge, judge_names

    table = Table(title="judges")
    table.add_column("name")
    table.add_column("version (default config)")
    for name in judge_names():
        try:
            version = build_judge({"name": name}).version
        except TrajlakeError:
            version = "(needs configuration)"
        table.add_row(name, version)
    console.print(table)


@judges_app.command("verify")
def verify(
    golden: Annotated[list[Path] | None, typer.Argument(help="Golden files (default: all shipped).")] = None,
    backend: BackendOpt = None,
    workers: Annotated[int, typer.Option(help="Cases judged at once.")] = 2,
    as_json: Annotated[Path | None, typer.Option("--json", help="Also write the results here.")] = None,
) -> None:
    """Replay every golden trajectory, judge it, and fail on any changed verdict, score or flag."""
    from judges.golden import hack_report, load_golden
    from judges.golden import verify as run_verify

    try:
        cases = load_golden(golden)
        pool = _pool(backend, workers)
    except TrajlakeError as exc:
        _fail(exc)
    with pool, _progress() as progress:
        bar = progress.add_task("golden cases", total=len(cases))
        results = run_verify(cases, pool, workers=workers, on_result=lambda r: progress.advance(bar))
    table = Table(title=f"golden sets: {len(cases)} cases")
    for col in ("set", "case", "verdict", "score", "flags", "judge version", "result"):
        table.add_column(col)
    for r in results:
        j = r.judgement
        table.add_row(
            r.case.set_name,
            r.case.id,
            j.verdict if j else "-",
            f"{j.score:.3f}" if j else "-",
            ", ".join(j.flag_kinds) if j else "-",
            j.judge_version if j else "-",
            "[green]same[/green]" if r.ok else "[bold red]CHANGED[/bold red]",
        )
    console.print(table)
    report = hack_report(results)
    if report["exploits"]:
        console.print(
            f"reward-hacking corpus: {report['detected']}/{report['exploits']} exploits detected "
            f"({len(report['exploit_kinds'])} kinds), {report['false_positives']}/{report['honest']} honest "
            f"solutions flagged"
        )
    flipped = [r for r in results if not r.ok]
    if as_json:
        as_json.write_text(
            json.dumps(
                {
                    "cases": [
                        {"set": r.case.set_name, "id": r.case.id, "ok": r.ok, "problems": r.problems,
                         "judgement": r.judgement.model_dump(mode="json") if r.judgement else None}
                        for r in results
                    ],
                    "hack_report": report,
                },
                indent=2,
            )
        )  # fmt: skip
    if flipped:
        for r in flipped:
            err_console.print(
                f"[bold red]changed[/bold red] {r.case.set_name}/{r.case.id}: {'; '.join(r.problems)}"
            )
        raise typer.Exit(code=1)
    console.print(f"[green]all {len(results)} golden cases unchanged[/green]")


@tasks_app.command("admit")
def admit(
    paths: Annotated[list[Path], typer.Argument(help="Task directories, or directories holding tasks.")],
    backend: BackendOpt = None,
    runs: Annotated[int, typer.Option(help="Times the reference solution is judged (flakiness).")] = 3,
    workers: Annotated[int, typer.Option(help="Tasks admitted at once.")] = 2,
    lake: Annotated[Path | None, typer.Option(help="Lake directory (default: settings).")] = None,
) -> None:
    """Admit tasks: build, judge untouched and reference states, repeat; write the ``tasks`` table."""
    import pyarrow as pa

    from judges.admission import admit_all
    from judges.tasks import find_task_dirs
    from pipelines import Lake
    from schemas.tables import TABLES

    try:
        dirs = find_task_dirs(paths)
        if not dirs:
            raise ValueError(f"no task.yaml under {', '.join(map(str, paths))}")
        pool = _pool(backend, workers)
    except (TrajlakeError, ValueError) as exc:
        _fail(exc)
    with pool, _progress() as progress:
        bar = progress.add_task("admitting tasks", total=len(dirs))
        results = admit_all(dirs, pool, runs=runs, workers=workers, on_result=lambda r: progress.advance(bar))
    lk = Lake(lake or _settings().lake)
    lk.ensure(["tasks"])
    rows = [r.row() for r in results]
    lk.write("tasks", pa.Table.from_pylist(rows, schema=TABLES["tasks"]), mode="upsert")
    table = Table(title=f"task admission ({runs} runs each)")
    for col in ("task", "family", "tier", "admitted", "untouched", "reference", "time", "reasons"):
        table.add_column(col)
    for r in results:
        table.add_row(
            r.task_id,
            r.task.spec.family if r.task else "?",
            r.task.spec.tier if r.task else "?",
            "[green]yes[/green]" if r.admitted else "[bold red]no[/bold red]",
            ",".join(r.verdicts.get("untouched", [])),
            ",".join(r.verdicts.get("reference", [])),
            f"{r.duration_s:.1f}s",
            "; ".join(r.reasons),
        )
    console.print(table)
    admitted = sum(r.admitted for r in results)
    console.print(
        f"{admitted}/{len(results)} admitted; `tasks` table in {lk.root} at version {lk.versions()['tasks']}"
    )
    if admitted < len(results):
        raise typer.Exit(code=1)


@tasks_app.command("list")
def list_tasks(paths: Annotated[list[Path] | None, typer.Argument(help="Where to look.")] = None) -> None:
    """Task specs found under the paths (default: ./tasks), validated."""
    from judges.tasks import find_task_dirs, load_task

    table = Table(title="tasks")
    for col in ("task", "family", "tier", "version", "title"):
        table.add_column(col)
    bad = 0
    for d in find_task_dirs(paths or [Path("tasks")]):
        try:
            t = load_task(d)
            table.add_row(t.id, t.spec.family, t.spec.tier, t.spec.version, t.spec.title)
        except TrajlakeError as exc:
            bad += 1
            table.add_row(str(d), "-", "-", "-", f"[red]{exc}[/red]")
    console.print(table)
    if bad:
        raise typer.Exit(code=1)
