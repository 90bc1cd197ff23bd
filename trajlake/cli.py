"""The ``trajlake`` command line: the composition root that wires the packages together."""

from __future__ import annotations

import atexit
import json
import logging
import os
import sys
import threading
import traceback
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from schemas.errors import TrajlakeError
from trajlake import loop_cli, rejudge_cli
from trajlake.api_cli import api_app
from trajlake.judges_cli import judges_app, tasks_app
from trajlake.sandbox_cli import sandbox_app

app = typer.Typer(
    name="trajlake",
    help="Event-sourced data platform for agentic RL: Kafka log -> Beam -> Delta -> learners.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
schemas_app = typer.Typer(help="Event schemas.", no_args_is_help=True)
spool_app = typer.Typer(help="Durable local spools of rollout workers.", no_args_is_help=True)
events_app = typer.Typer(help="Read events back from the log.", no_args_is_help=True)
app.add_typer(schemas_app, name="schemas")
app.add_typer(spool_app, name="spool")
app.add_typer(events_app, name="events")
pipeline_app = typer.Typer(help="Beam pipelines: the log into Delta tables.", no_args_is_help=True)
lake_app = typer.Typer(help="The Delta lake.", no_args_is_help=True)
app.add_typer(pipeline_app, name="pipeline")
app.add_typer(lake_app, name="lake")
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(judges_app, name="judges")
app.add_typer(tasks_app, name="tasks")
app.add_typer(api_app, name="api")
app.command("rollout")(loop_cli.rollout)
app.command("train")(loop_cli.train)
app.command("lineage")(loop_cli.lineage)
app.command("rejudge")(rejudge_cli.rejudge)

console = Console()
err_console = Console(stderr=True)


def _settings() -> Any:
    from trajlake.settings import Settings

    return Settings()


def _broker(progress: bool = True) -> Any:
    from ingest.kafka_broker import EmbeddedKafka

    s = _settings()
    return EmbeddedKafka(
        s.home,
        s.kafka_bootstrap,
        topics=s.topics,
        heap=s.kafka_heap,
        progress=(lambda msg: err_console.print(f"[dim]{msg}[/dim]")) if progress else None,
    )


def _fail(exc: BaseException) -> None:
    err_console.print(f"[bold red]error:[/bold red] {exc}")
    raise typer.Exit(code=1)


def _status_table(status: Any) -> Table:
    table = Table(title=f"Kafka broker {status.bootstrap}", show_lines=False)
    table.add_column("topic")
    table.add_column("partitions", justify="right")
    table.add_column("end offsets", justify="left")
    table.add_column("events", justify="right")
    for topic, parts in status.topics.items():
        table.add_row(
            topic, str(len(parts)), " ".join(f"{p}:{o}" for p, o in parts.items()), str(sum(parts.values()))
        )
    return table


# ------------------------------------------------------------------ broker


@app.command()
def up() -> None:
    """Start the embedded Kafka broker (KRaft) and create the topics. Harmless if running."""
    try:
        status = _broker().start()
    except TrajlakeError as exc:
        _fail(exc)
    console.print(f"[green]broker up[/green] pid {status.pid} on {status.bootstrap}, data {status.data_dir}")
    console.print(_status_table(status))


@app.command()
def down(
    kill: Annotated[bool, typer.Option(help="SIGKILL instead of a clean shutdown.")] = False,
) -> None:
    """Stop the embedded Kafka broker cleanly; its data survives."""
    broker = _broker()
    stopped = broker.kill() if kill else broker.stop()
    console.print("broker stopped" if stopped else "broker was not running")


@app.command()
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show the broker, its topics and partition end offsets."""
    st = _broker(progress=False).status()
    if as_json:
        print(
            json.dumps(
                {
                    "running": st.running,
                    "pid": st.pid,
                    "bootstrap": st.bootstrap,
                    "data_dir": st.data_dir,
                    "topics": {t: {str(p): o for p, o in ps.items()} for t, ps in st.topics.items()},
                }
            )
        )
        return
    if not st.running:
        console.print(f"[yellow]broker not running[/yellow] (bootstrap {st.bootstrap}, data {st.data_dir})")
        raise typer.Exit(code=3)
    console.print(f"[green]broker running[/green] pid {st.pid} on {st.bootstrap}, data {st.data_dir}")
    console.print(_status_table(st))


# ------------------------------------------------------------------ schemas


@schemas_app.command("export")
def schemas_export(directory: Path) -> None:
    """Write one JSON Schema file per event type, plus the envelope, into DIRECTORY."""
    from schemas import export_json_schemas

    for path in export_json_schemas(directory):
        console.print(str(path))


# ------------------------------------------------------------------ import


@app.command("import")
def import_(
    paths: Annotated[list[Path], typer.Argument(help="Trajectory files.")],
    fmt: Annotated[str, typer.Option("--format", help="mini-swe-agent | openhands | auto")] = "auto",
    worker_id: Annotated[str, typer.Option(help="Spool/producer id of the importer.")] = "importer",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON report per file.")] = False,
) -> None:
    """Import other agents' trajectories as trajlake events (through the recorder)."""
    from ingest import EpisodeRecorder
    from ingest.importers import detect_format, import_file

    s = _settings()
    failed = 0
    try:
        recorder = EpisodeRecorder.open(
            bootstrap=s.kafka_bootstrap, home=s.home, worker_id=worker_id, topic=s.topic_episodes
        )
    except TrajlakeError as exc:
        _fail(exc)
    with recorder:
        for path in paths:
            try:
                name = detect_format(path) if fmt == "auto" else fmt
                report = import_file(path, recorder, format=name)
            except (TrajlakeError, OSError) as exc:
                failed += 1
                err_console.print(f"[red]{path}: {exc}[/red]")
                continue
            if as_json:
                print(json.dumps(vars(report), default=str))
            else:
                console.print(report.summary())
        try:
            recorder.flush(timeout=120)
        except TrajlakeError as exc:
            _fail(exc)
    if failed:
        raise typer.Exit(code=1)


# ------------------------------------------------------------------ spool


@spool_app.command("status")
def spool_status() -> None:
    """Show each worker spool: segments and bytes waiting for Kafka."""
    s = _settings()
    table = Table(title=f"spools under {s.spool}")
    for col in ("worker", "segments", "bytes"):
        table.add_column(col)
    if s.spool.exists():
        for d in sorted(p for p in s.spool.iterdir() if p.is_dir()):
            segs = list(d.glob("seg-*.log"))
            table.add_row(d.name, str(len(segs)), str(sum(p.stat().st_size for p in segs)))
    console.print(table)


@spool_app.command("drain")
def spool_drain(
    timeout: Annotated[float, typer.Option(help="Seconds to wait per spool.")] = 120.0,
) -> None:
    """Re-send what dead workers left in their spools (spools of live workers are skipped)."""
    from ingest import EpisodeRecorder, SpoolLockedError

    s = _settings()
    if not s.spool.exists():
        console.print("no spools")
        return
    for d in sorted(p for p in s.spool.iterdir() if p.is_dir()):
        try:
            rec = EpisodeRecorder.open(
                bootstrap=s.kafka_bootstrap, home=s.home, worker_id=d.name, topic=s.topic_episodes
            )
        except SpoolLockedError:
            console.print(f"{d.name}: owned by a live worker, skipped")
            continue
        n = rec.delivery.stats.recovered
        try:
            rec.flush(timeout)
        except TrajlakeError as exc:
            err_console.print(f"[red]{d.name}: {exc}[/red]")
        finally:
            rec.close()
        console.print(f"{d.name}: re-sent {n} records")


# ------------------------------------------------------------------ events


@events_app.command("read")
def events_read(
    episode: Annotated[str | None, typer.Option(help="Only this episode.")] = None,
    topic: Annotated[str | None, typer.Option(help="Topic (default: the episodes topic).")] = None,
    limit: Annotated[int, typer.Option(help="At most this many events.")] = 100,
) -> None:
    """Print events read back from the log, parsed and validated."""
    from ingest.log_reader import read_events

    s = _settings()
    n = 0
    for rec in read_events(s.kafka_bootstrap, topic or s.topic_episodes, episode_id=episode):
        print(rec.event.model_dump_json() if rec.event else json.dumps({"error": rec.error}))
        n += 1
        if n >= limit:
            break


# ------------------------------------------------------------------ pipelines


def _pipeline_config(lake: Path | None, workers: int, max_batch: int, beam_args: list[str] | None) -> Any:
    from pipelines import PipelineConfig

    s = _settings()
    return PipelineConfig(
        bootstrap=s.kafka_bootstrap,
        lake_root=str(Path(lake or s.lake).resolve()),
        topics=(s.topic_episodes, s.topic_judgements),
        num_workers=workers,
        max_batch_per_partition=max_batch,
        beam_args=list(beam_args or []),
        worker_log=str(s.home / "logs" / "beam-workers.log"),
    )


def _batch_printer(progress: Any = None, task: Any = None) -> Any:
    def show(res: Any) -> None:
        c = res.counters
        line = (
            f"batch: {res.records} records in {res.seconds:.1f}s -> "
            f"events +{c.get('WriteDelta.events', 0)}, quarantine +{c.get('WriteDelta.quarantine', 0)}, "
            f"episodes {c.get('WriteDelta.episodes', 0)}, steps {c.get('WriteDelta.steps', 0)}, "
            f"rewards {c.get('WriteDelta.rewards', 0)}, failures {c.get('WriteDelta.failures', 0)}"
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
    interval: Annotated[float, typer.Option(help="Seconds between micro-batches with --follow.")] = 2.0,
    lake: Annotated[Path | None, typer.Option(help="Lake directory (default: $TRAJLAKE_HOME/lake).")] = None,
    workers: Annotated[int, typer.Option(help="FnApiRunner workers (SDK worker processes).")] = 2,
    max_batch: Annotated[int, typer.Option(help="Records per partition per micro-batch.")] = 200_000,
    beam_arg: Annotated[
        list[str] | None, typer.Option(help="Extra Beam option, e.g. --runner=FlinkRunner.")
    ] = None,
) -> None:
    """Fold trajlake.episodes and trajlake.judgements into the Delta tables, exactly once."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from pipelines import backlog, run_follow, run_once

    if once == follow:
        _fail(ValueError("give exactly one of --once or --follow"))
    cfg = _pipeline_config(lake, workers, max_batch, beam_arg)
    try:
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
            console.print(
                f"following the log into {cfg.lake_root} (Ctrl-C to stop after the batch in flight)"
            )
            n = run_follow(cfg, interval_s=interval, on_batch=_batch_printer())
            console.print(f"stopped after {n} batches")
    except TrajlakeError as exc:
        _fail(exc)


@app.command("replay")
def replay_cmd(
    into: Annotated[Path, typer.Option(help="The lake directory to rebuild into.")],
    from_time: Annotated[
        str | None, typer.Option(help="ISO time: replay from the first offset at or after it.")
    ] = None,
    workers: Annotated[int, typer.Option(help="FnApiRunner workers.")] = 2,
) -> None:
    """Rebuild every table from the Kafka log into another lake directory."""
    import datetime as dt

    from pipelines import replay

    cfg = _pipeline_config(into, workers, 200_000, None)
    when = None
    if from_time:
        when = dt.datetime.fromisoformat(from_time.replace("Z", "+00:00"))
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
    try:
        results = replay(cfg, from_time=when, on_batch=_batch_printer())
    except TrajlakeError as exc:
        _fail(exc)
    console.print(f"[green]replayed[/green] {sum(r.records for r in results)} records into {into}")


@lake_app.command("diff")
def lake_diff(a: Path, b: Path) -> None:
    """Compare two lakes table by table (row sets); exit 1 if they differ."""
    from pipelines import Lake, diff_lakes

    diffs = diff_lakes(Lake(a), Lake(b))
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
            console.print(f"[red]{d.table} only in A:[/red] {row}")
        for row in d.only_b:
            console.print(f"[red]{d.table} only in B:[/red] {row}")
    if differing or not diffs:
        raise typer.Exit(code=1)


@lake_app.command("show")
def lake_show(
    table: str,
    version: Annotated[int | None, typer.Option(help="Delta version (time travel).")] = None,
    where: Annotated[str | None, typer.Option(help="SQL predicate.")] = None,
    limit: Annotated[int, typer.Option(help="Rows to print.")] = 20,
    lake: Annotated[Path | None, typer.Option(help="Lake directory.")] = None,
) -> None:
    """Print rows of a table as JSON lines (at a Delta version with --version)."""
    from pipelines import Lake

    try:
        rows = Lake(lake or _settings().lake).read(table, version=version, where=where).slice(0, limit)
    except TrajlakeError as exc:
        _fail(exc)
    for row in rows.to_pylist():
        print(json.dumps(row, default=str))


@lake_app.command("versions")
def lake_versions(lake: Annotated[Path | None, typer.Option(help="Lake directory.")] = None) -> None:
    """Current Delta version and row count of every table."""
    from pipelines import Lake
    from trajlake.lake_view import lake_versions_table

    lk = Lake(lake or _settings().lake)
    console.print(lake_versions_table(lk, f"lake {lk.root}"))


@lake_app.command("maintain")
def lake_maintain(
    table: Annotated[list[str] | None, typer.Option(help="Only these tables (default: all).")] = None,
    vacuum: Annotated[bool, typer.Option(help="VACUUM after OPTIMIZE.")] = True,
    retain_hours: Annotated[
        float, typer.Option(help="VACUUM keeps files versions this recent still need (Delta: 168).")
    ] = 168.0,
    allow_short_retention: Annotated[
        bool,
        typer.Option(help="Allow --retain-hours under 168 (no pipeline writing, no pinned reader)."),
    ] = False,
    lake: Annotated[Path | None, typer.Option(help="Lake directory.")] = None,
) -> None:
    """OPTIMIZE (Z-ordered by episode where reads go by episode) and VACUUM the tables, with Spark."""
    from pipelines.spark_lake import SparkLake

    root = lake or _settings().lake
    results = []
    with (
        SparkLake(root, progress=lambda m: err_console.print(f"[dim]{m}[/dim]")) as sl,
        err_console.status("maintaining") as status,
    ):
        try:
            for r in sl.maintain(
                table, vacuum=vacuum, retain_hours=retain_hours, allow_short_retention=allow_short_retention,
                on_table=lambda r: status.update(f"{r.table} done; next..."),
            ):  # fmt: skip
                results.append(r)
        except TrajlakeError as exc:
            _fail(exc)
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
    limit: Annotated[int, typer.Option(help="Rows to print.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="JSON lines instead of a table.")] = False,
    lake: Annotated[Path | None, typer.Option(help="Lake directory.")] = None,
) -> None:
    """Run a SQL query over the lake's tables with Spark."""
    from pipelines import LakeError
    from pipelines.spark_lake import SparkLake

    with SparkLake(lake or _settings().lake, progress=lambda m: err_console.print(f"[dim]{m}[/dim]")) as sl:
        try:
            df = sl.sql(query)
            try:
                rows = [r.asDict(recursive=True) for r in df.limit(limit).collect()]
            except Exception as exc:  # noqa: BLE001 - execution errors come through py4j untyped
                raise LakeError(f"query failed: {str(exc).strip().splitlines()[0][:500]}") from exc
            columns = list(df.columns)
        except TrajlakeError as exc:
            _fail(exc)
    if as_json:
        for row in rows:
            print(json.dumps(row, default=str))
        return
    out = Table()
    for col in columns:
        out.add_column(col)
    for row in rows:
        out.add_row(*(str(row[c]) for c in columns))
    console.print(out)


# ------------------------------------------------------------------ demo


@app.command()
def demo(
    iterations: Annotated[int, typer.Option(help="RL iterations (rollouts -> pipeline -> learner).")] = 5,
    group_size: Annotated[int, typer.Option(help="Attempts per training task and iteration (G).")] = 4,
    workers: Annotated[int, typer.Option(help="Rollout worker processes.")] = 2,
) -> None:
    """The closed loop end to end on the embedded default.

    Brings up the broker, admits the wordplay task family, warm-starts the
    in-repo transformer briefly on synthetic strings, then iterates: rollouts in
    sandboxes (events to Kafka) -> Beam -> Delta -> policy-gradient learner ->
    new checkpoint, evaluating on held-out tasks each time; prints a summary and
    writes a learning-curve PNG.
    """
    from trajlake.demo import run_demo

    try:
        ok = run_demo(
            _settings(),
            _broker(),
            iterations=iterations,
            group_size=group_size,
            workers=workers,
            console=console,
        )
    except TrajlakeError as exc:
        _fail(exc)
    if not ok:
        raise typer.Exit(code=1)


def main() -> None:
    """Entry point of the ``trajlake`` console script."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # kafka-python logs every reconnect attempt; the spool and our own messages say what matters.
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    # Beam probes optional Google Cloud clients at import and says so on the root logger.
    logging.getLogger().addFilter(lambda record: "apitools not found" not in record.getMessage())
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    try:
        app()
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # noqa: BLE001 - an uncaught error is printed as Python would, then we leave
        traceback.print_exc()
        code = 1
    _leave(code)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _leave(code: int) -> None:
    """Exit like the interpreter does, less the native teardown.

    Every command has written, flushed and closed what it produced by the time it returns. The
    interpreter's own exit would then destroy the native thread pools of the libraries a command
    used (Arrow's under the Delta reader, the Delta runtime, gRPC under the Beam runner) and, now
    and then, one of them is still joinable: ``std::terminate`` aborts a finished command with
    SIGABRT (seen on ``trajlake lineage`` and on the demo). So: wait for non-daemon threads and run
    the ``atexit`` hooks as a normal exit would, flush, and leave with ``os._exit``.
    """
    threading_shutdown = getattr(threading, "_shutdown", None)
    if threading_shutdown is not None:
        threading_shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            # output was lost (a full disk, a closed pipe): never report success then; 120 is
            # what the interpreter itself exits with when it cannot flush at exit
            code = code or 120
    os._exit(code)
