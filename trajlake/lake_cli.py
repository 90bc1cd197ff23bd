"""``trajlake pipeline run``, ``replay`` and ``lake ...``: the log folded into Delta tables, and them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from trajlake.options import DeltaVersion, LakeOpt, Runner, RunnerOpt, SchedulerOpt, Workers
from trajlake.terminal import ExitCode, console, err_console, fail, note, settings

if TYPE_CHECKING:
    from pipelines import PipelineConfig

pipeline_app = typer.Typer(help="Beam pipelines: the log into Delta tables.", no_args_is_help=True)
lake_app = typer.Typer(help="The Delta lake.", no_args_is_help=True)


def _pipeline_config(
    lake: Path | None,
    workers: int,
    max_batch: int,
    beam_args: list[str] | None,
    runner: Runner = Runner.local,
    scheduler: str | None = None,
) -> PipelineConfig:
    if scheduler is not None and runner != Runner.dask:
        fail("--scheduler is the Dask scheduler's address: give it with --runner dask", ExitCode.USAGE)
    return settings().pipeline_config(
        lake,
        workers=workers,
        max_batch=max_batch,
        beam_args=beam_args,
        runner=runner.value,
        scheduler=scheduler,
    )


def _batch_printer(progress: Any = None, task: Any = None) -> Any:
    from schemas.control import CONTROL_TABLES

    def show(res: Any) -> None:
        c = res.counters
        if not c:  # Beam's DaskRunner reports no metrics
            line = f"batch: {res.records} records in {res.seconds:.1f}s (this runner reports no row counts)"
            if progress is not None:
                progress.console.print(line)
                progress.advance(task, res.records)
            else:
                console.print(line)
            return
        line = (
            f"batch: {res.records} records in {res.seconds:.1f}s -> "
            f"events +{c.get('WriteDelta.events', 0)}, quarantine +{c.get('WriteDelta.quarantine', 0)}, "
            f"episodes {c.get('WriteDelta.episodes', 0)}, steps {c.get('WriteDelta.steps', 0)}, "
            f"rewards {c.get('WriteDelta.rewards', 0)}, failures {c.get('WriteDelta.failures', 0)}"
            + "".join(f", {t} {c[f'WriteDelta.{t}']}" for t in CONTROL_TABLES if c.get(f"WriteDelta.{t}"))
        )
        if progress is not None:
            progress.console.print(line)
            progress.advance(task, res.records)
        else:
            console.print(line)

    return show


@pipeline_app.command("run")
def pipeline_run(
    once: Annotated[bool, typer.Option("--once", help="Process what is in the log now, then exit.")] = False,
    follow: Annotated[bool, typer.Option("--follow", help="Run micro-batches until SIGINT/SIGTERM.")] = False,
    interval: Annotated[
        float, typer.Option(min=0.0, help="With --follow, seconds between looks at a log with nothing new.")
    ] = 0.5,
    lake: LakeOpt = None,
    workers: Annotated[int, typer.Option(min=1, help="FnApiRunner workers (SDK worker processes).")] = 2,
    max_batch: Annotated[int, typer.Option(min=1, help="Records per partition per micro-batch.")] = 200_000,
    beam_arg: Annotated[
        list[str] | None, typer.Option(help="Extra Beam option, e.g. --runner=FlinkRunner.")
    ] = None,
    runner: RunnerOpt = Runner.local,
    scheduler: SchedulerOpt = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=0, max=65535, help="Serve Prometheus metrics (lag, batches, quarantine) on this port."
        ),
    ] = None,
    metrics_host: Annotated[str, typer.Option(help="Address the metrics port binds.")] = "127.0.0.1",
) -> None:
    """Fold trajlake.episodes and trajlake.judgements into the Delta tables, exactly once."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ingest.kafka_broker import require_broker
    from pipelines import backlog, run_follow, run_once

    if once == follow:
        fail("give exactly one of --once or --follow", ExitCode.USAGE)
    cfg = _pipeline_config(lake, workers, max_batch, beam_arg, runner, scheduler)
    require_broker(cfg.bootstrap)
    if metrics_port is not None:
        from infra.metrics import serve_metrics

        bound = serve_metrics(metrics_port, metrics_host)
        console.print(f"metrics on http://{metrics_host}:{bound}/metrics")
    if once:
        total = backlog(cfg)
        with Progress(
            TextColumn("[bold]pipeline"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            task = progress.add_task("records", total=total)
            results = run_once(cfg, on_batch=_batch_printer(progress, task))
        console.print(
            f"[green]done[/green]: {len(results)} batches, "
            f"{sum(r.records for r in results)} records; lake at {cfg.lake_root}"
        )
    else:
        console.print(f"following the log into {cfg.lake_root} (Ctrl-C to stop after the batch in flight)")
        n = run_follow(cfg, interval_s=interval, on_batch=_batch_printer())
        console.print(f"stopped after {n} batches")


def replay_cmd(
    into: Annotated[Path, typer.Option(file_okay=False, help="The lake directory to rebuild into.")],
    from_time: Annotated[
        str | None, typer.Option(help="ISO time: replay from the first offset at or after it.")
    ] = None,
    workers: Workers = 2,
    resume: Annotated[
        bool, typer.Option(help="Continue an interrupted replay into the same directory.")
    ] = False,
    runner: RunnerOpt = Runner.local,
    scheduler: SchedulerOpt = None,
) -> None:
    """Rebuild every table from the Kafka log into a new lake directory."""
    import datetime as dt

    from ingest.kafka_broker import require_broker
    from pipelines import replay
    from schemas.tables import TABLES

    if not resume and any((into / t / "_delta_log").is_dir() for t in TABLES):
        fail(
            f"{into} already holds tables: replay rebuilds a lake in a new directory (give another --into), "
            "or --resume continues a replay into it that was interrupted",
            ExitCode.USAGE,
        )
    cfg = _pipeline_config(into, workers, 200_000, None, runner, scheduler)
    when = None
    if from_time:
        try:
            when = dt.datetime.fromisoformat(from_time.replace("Z", "+00:00"))
        except ValueError:
            fail(f"--from-time {from_time!r} is not an ISO time (e.g. 2026-12-01T08:00:00Z)", ExitCode.USAGE)
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
    require_broker(cfg.bootstrap)
    results = replay(cfg, from_time=when, on_batch=_batch_printer())
    console.print(f"[green]replayed[/green] {sum(r.records for r in results)} records into {into}")


@lake_app.command("diff")
def lake_diff(
    a: Annotated[Path, typer.Argument(exists=True, file_okay=False, help="Lake A.")],
    b: Annotated[Path, typer.Argument(exists=True, file_okay=False, help="Lake B.")],
) -> None:
    """Compare two lakes table by table (row sets); exit 1 if they differ."""
    from lake import diff_lakes
    from trajlake.preflight import require_lake

    diffs = diff_lakes(require_lake(a), require_lake(b))
    table = Table(title=f"{a}  vs  {b}")
    for col in ("table", "rows A", "rows B", "only in A", "only in B", "equal"):
        table.add_column(col)
    for d in diffs:
        table.add_row(
            d.table,
            str(d.rows_a),
            str(d.rows_b),
            str(len(d.only_a)),
            str(len(d.only_b)),
            "[green]yes[/green]"
            if d.equal
            else f"[red]no[/red]{' (missing in ' + d.missing + ')' if d.missing else ''}",
        )
    console.print(table)
    differing = [d for d in diffs if not d.equal]
    for d in differing:
        for row in d.only_a:
            console.print(f"[red]{d.table} only in A:[/red] {escape(str(row))}")
        for row in d.only_b:
            console.print(f"[red]{d.table} only in B:[/red] {escape(str(row))}")
    if differing:
        fail(f"the lakes differ in {', '.join(d.table for d in differing)}")


@lake_app.command("check")
def lake_check(lake: LakeOpt = None) -> None:
    """Verify every table's log and files, and that the pipeline tables agree on the log.

    A log must have no gap and its newest commits must parse, every file it names must exist, and
    the pipeline tables must have committed the same Kafka offsets. Exits 1 naming the damage.
    """
    from lake import Lake
    from lake.check import check_lake, damage_summary

    root = lake or settings().lake
    checks = check_lake(Lake(str(root)))
    table = Table(title=f"lake {root}")
    for col in ("table", "exists", "version", "files", "problems"):
        table.add_column(col, overflow="fold")
    for c in checks:
        found = "[green]ok[/green]" if c.ok else f"[red]{escape('; '.join(c.problems))}[/red]"
        if c.warnings:
            found += f" [yellow]{escape('; '.join(c.warnings))}[/yellow]"
        version = "-" if c.version is None else str(c.version)
        table.add_row(c.table, "yes" if c.exists else "-", version, str(c.files), found)
    console.print(table)
    if not any(c.exists for c in checks):
        fail(f"no lake at {root} (no Delta tables there)", ExitCode.NOT_READY)
    summary = damage_summary(checks)
    if summary:
        fail(summary)
    console.print("[green]intact[/green]: every log reads and every file it names is there")


@lake_app.command("show")
def lake_show(
    table: Annotated[str, typer.Argument(help="Table name.")],
    version: DeltaVersion = None,
    where: Annotated[str | None, typer.Option(help="SQL predicate.")] = None,
    limit: Annotated[int, typer.Option(min=0, help="Rows to print.")] = 20,
    lake: LakeOpt = None,
) -> None:
    """Print rows of a table as JSON lines (at a Delta version with --version)."""
    from schemas.tables import TABLES
    from trajlake.preflight import require_lake

    if table not in TABLES:
        fail(f"there is no table {table!r}; the tables are {', '.join(TABLES)}", ExitCode.USAGE)
    lk = require_lake(lake or settings().lake, [table])
    rows = lk.read(table, version=version, where=where).slice(0, limit)
    for row in rows.to_pylist():
        print(json.dumps(row, default=str))


@lake_app.command("versions")
def lake_versions(lake: LakeOpt = None) -> None:
    """Current Delta version and row count of every table."""
    from trajlake.lake_view import lake_versions_table
    from trajlake.preflight import require_lake

    lk = require_lake(lake or settings().lake)
    console.print(lake_versions_table(lk, f"lake {lk.root}"))


@lake_app.command("maintain")
def lake_maintain(
    table: Annotated[list[str] | None, typer.Option(help="Only these tables (default: all).")] = None,
    vacuum: Annotated[bool, typer.Option(help="VACUUM after OPTIMIZE.")] = True,
    retain_hours: Annotated[
        float, typer.Option(min=0.0, help="VACUUM keeps files versions this recent still need (Delta: 168).")
    ] = 168.0,
    allow_short_retention: Annotated[
        bool,
        typer.Option(help="Allow --retain-hours under 168 (no pipeline writing, no pinned reader)."),
    ] = False,
    lake: LakeOpt = None,
) -> None:
    """OPTIMIZE (Z-ordered by episode where reads go by episode) and VACUUM the tables, with Spark."""
    from pipelines.spark_lake import DEFAULT_RETENTION_HOURS, SparkLake
    from trajlake.preflight import require_lake

    if vacuum and retain_hours < DEFAULT_RETENTION_HOURS and not allow_short_retention:
        fail(
            f"--retain-hours {retain_hours:g} is under Delta's safety bound of {DEFAULT_RETENTION_HOURS:g} h "
            "(files of pinned versions and of commits in flight could be deleted); stop the writers and "
            "add --allow-short-retention",
            ExitCode.USAGE,
        )
    s = settings()
    root = str(lake) if lake else s.lake_root()
    require_lake(root, table or (), storage_options=s.storage_options(root))
    results = []
    with (
        SparkLake(root, storage_options=s.storage_options(root), progress=note) as sl,
        err_console.status("maintaining") as status,
    ):
        for r in sl.maintain(
            table, vacuum=vacuum, retain_hours=retain_hours, allow_short_retention=allow_short_retention,
            on_table=lambda r: status.update(f"{r.table} done; next..."),
        ):  # fmt: skip
            results.append(r)
    out = Table(title=f"maintenance of {root}")
    for col in ("table", "files before", "files after", "z-order", "vacuumed", "versions", "seconds"):
        out.add_column(col)
    for r in results:
        out.add_row(
            r.table, str(r.files_before), str(r.files_after), ", ".join(r.zorder_by) or "-",
            str(r.vacuumed_files), f"{r.version_before} -> {r.version_after}", f"{r.seconds:.1f}",
        )  # fmt: skip
    console.print(out)


@lake_app.command("sql")
def lake_sql(
    query: Annotated[str, typer.Argument(help="Spark SQL; every table is a view of its name.")],
    limit: Annotated[int, typer.Option(min=0, help="Rows to print.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="JSON lines instead of a table.")] = False,
    lake: LakeOpt = None,
) -> None:
    """Run a SQL query over the lake's tables with Spark."""
    from lake import LakeError
    from pipelines.spark_lake import SparkLake
    from trajlake.preflight import require_lake

    s = settings()
    root = str(lake) if lake else s.lake_root()
    require_lake(root, storage_options=s.storage_options(root))
    with SparkLake(root, storage_options=s.storage_options(root), progress=note) as sl:
        df = sl.sql(query)
        try:
            rows = [r.asDict(recursive=True) for r in df.limit(limit).collect()]
        except Exception as exc:  # noqa: BLE001 - execution errors come through py4j untyped
            raise LakeError(f"query failed: {str(exc).strip().splitlines()[0][:500]}") from exc
        columns = list(df.columns)
    if as_json:
        for row in rows:
            print(json.dumps(row, default=str))
        return
    out = Table()
    for col in columns:
        out.add_column(col)
    for row in rows:
        out.add_row(*(escape(str(row[c])) for c in columns))
    console.print(out)


# ------------------------------------------------------------------ demo
