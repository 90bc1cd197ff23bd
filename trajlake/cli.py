"""The ``trajlake`` command line: the composition root that wires the packages together.

Every command fails the same way (:mod:`trajlake.terminal`): one sentence on
stderr naming what is wrong and the fix, and an exit status from
:class:`~trajlake.terminal.ExitCode`; arguments are validated by the parser
(:mod:`trajlake.options`); prerequisites are checked before work starts
(:mod:`trajlake.preflight`).
"""

from __future__ import annotations

import atexit
import json
import logging
import sys
import threading
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from trajlake import __version__, drift_cli, eval_cli, loop_cli, rejudge_cli, retract_cli
from trajlake.api_cli import api_app
from trajlake.failures_cli import failures_app
from trajlake.judges_cli import judges_app, tasks_app
from trajlake.options import DeltaVersion, LakeOpt, Runner, RunnerOpt, SchedulerOpt, TrajectoryFormat, Workers
from trajlake.review_cli import review_app
from trajlake.sandbox_cli import sandbox_app
from trajlake.terminal import ExitCode, console, describe, err_console, fail, note, set_debug, settings

if TYPE_CHECKING:
    from pipelines import PipelineConfig

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
app.add_typer(failures_app, name="failures")
app.add_typer(review_app, name="review")
app.command("rollout")(loop_cli.rollout)
app.command("train")(loop_cli.train)
app.command("lineage")(loop_cli.lineage)
app.command("publish-checkpoint")(loop_cli.publish_checkpoint)
app.command("export")(loop_cli.export)
app.command("rejudge")(rejudge_cli.rejudge)
app.command("eval")(eval_cli.evaluate)
app.command("drift")(drift_cli.drift)
app.command("retract")(retract_cli.retract)


def _show_version(value: bool) -> None:
    if value:
        console.print(f"trajlake {__version__} (Python {sys.version.split()[0]})")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version.")
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="Print tracebacks with errors (anywhere; or TRAJLAKE_DEBUG=1).")
    ] = False,
) -> None:
    """Event-sourced data platform for agentic RL: Kafka log -> Beam -> Delta -> learners."""
    set_debug(debug)


def _broker(progress: bool = True) -> Any:
    from ingest.kafka_broker import EmbeddedKafka

    s = settings()
    return EmbeddedKafka(
        s.home,
        s.kafka_bootstrap,
        topics=s.topics,
        heap=s.kafka_heap,
        progress=note if progress else None,
    )


def _kafka(*, brokers: int | None = None, progress: bool = True) -> Any:
    """The home's Kafka: its cluster (``--brokers N``, or one it has), else the single embedded broker."""
    from ingest.kafka_cluster import KafkaCluster, cluster_state

    s = settings()
    state = cluster_state(s.home)
    if (brokers is not None and brokers > 1) or state is not None:
        n = brokers if brokers is not None else len(state["nodes"]) if state else 3
        return KafkaCluster(s.home, s.kafka_bootstrap.split(",")[0], brokers=n, topics=s.topics,
                            progress=note if progress else None)  # fmt: skip
    return _broker(progress)


def _brokers_table(status: Any) -> Table:
    table = Table(title=f"brokers (active controller: {status.controller or '-'})")
    for col in ("id", "port", "pid", "alive"):
        table.add_column(col)
    for b in status.brokers:
        table.add_row(str(b.id), str(b.port), str(b.pid or "-"),
                      "[green]yes[/green]" if b.alive else "[red]no[/red]")  # fmt: skip
    return table


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
def up(
    brokers: Annotated[
        int | None,
        typer.Option(min=1, help="Brokers of a loopback cluster (3: replication 3, min.insync.replicas 2)."),
    ] = None,
) -> None:
    """Start the embedded Kafka broker (KRaft) or a cluster of them, with the topics; harmless if up."""
    kafka = _kafka(brokers=brokers)
    status = kafka.start()
    if hasattr(status, "brokers"):
        console.print(f"[green]cluster up[/green]: {len(status.brokers)} brokers on {status.bootstrap}, "
                      f"data {status.data_dir}")  # fmt: skip
        console.print(_brokers_table(status))
    else:
        console.print(
            f"[green]broker up[/green] pid {status.pid} on {status.bootstrap}, data {status.data_dir}"
        )
    console.print(_status_table(status))


@app.command()
def down(
    kill: Annotated[bool, typer.Option(help="SIGKILL instead of a clean shutdown.")] = False,
    broker: Annotated[
        int | None, typer.Option(min=1, help="Only this broker of the cluster (its id in `trajlake status`).")
    ] = None,
) -> None:
    """Stop the embedded Kafka broker (or cluster, or one broker of it) cleanly; the data survives."""
    kafka = _kafka()
    if broker is not None:
        if not hasattr(kafka, "nodes") or broker not in kafka.nodes:
            fail(f"no broker {broker} here: `trajlake status` lists the brokers", ExitCode.USAGE)
        node = kafka.nodes[broker]
        stopped = node.kill() if kill else node.stop()
        console.print(f"broker {broker} {'stopped' if stopped else 'was not running'}")
        return
    stopped = kafka.kill() if kill else kafka.stop()
    console.print("broker stopped" if stopped else "broker was not running")


@app.command()
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show the broker(s), the controller, under-replicated partitions and end offsets (exit 3 when down)."""
    from ingest.kafka_broker import parse_bootstrap

    st = _kafka(progress=False).status()
    if hasattr(st, "brokers"):
        brokers = [{"id": b.id, "port": b.port, "pid": b.pid, "alive": b.alive} for b in st.brokers]
        controller, under = st.controller, st.under_replicated
    else:
        port = parse_bootstrap(st.bootstrap)[1]
        brokers = [{"id": 1, "port": port, "pid": st.pid, "alive": st.running}]
        controller, under = (1 if st.running else None), []
    if as_json:
        print(
            json.dumps(
                {
                    "running": st.running,
                    "pid": st.pid,
                    "bootstrap": st.bootstrap,
                    "data_dir": st.data_dir,
                    "brokers": brokers,
                    "controller": controller,
                    "under_replicated": under,
                    "topics": {t: {str(p): o for p, o in ps.items()} for t, ps in st.topics.items()},
                }
            )
        )
    elif st.running:
        console.print(f"[green]Kafka running[/green] on {st.bootstrap}, data {st.data_dir}")
        if hasattr(st, "brokers"):
            console.print(_brokers_table(st))
            console.print("under-replicated partitions: " + (", ".join(under) or "none"))
        console.print(_status_table(st))
    else:
        console.print(
            f"[yellow]broker not running[/yellow] (bootstrap {st.bootstrap}, data {st.data_dir}); "
            "start it with `trajlake up`"
        )
    if not st.running:
        raise typer.Exit(code=ExitCode.NOT_READY)


@app.command("topics")
def topics_ensure(
    replication: Annotated[int, typer.Option(min=1, help="Replicas of each partition (3 on a cluster).")] = 3,
) -> None:
    """Create the topics on a running cluster (TRAJLAKE_KAFKA_BOOTSTRAP) that do not exist yet."""
    from ingest.kafka_broker import EmbeddedKafka, Quorum, require_broker

    s = settings()
    require_broker(s.kafka_bootstrap)
    quorum = Quorum({i: 0 for i in range(1, replication + 1)}, "", replication=replication)
    EmbeddedKafka(s.home, s.kafka_bootstrap, topics=s.topics, quorum=quorum, progress=note).ensure_topics()
    console.print(f"topics on {s.kafka_bootstrap}: {', '.join(s.topics)} (replication {replication}, "
                  f"min.insync.replicas {quorum.min_insync})")  # fmt: skip


@app.command()
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


# ------------------------------------------------------------------ schemas


@schemas_app.command("export")
def schemas_export(
    directory: Annotated[Path, typer.Argument(file_okay=False, help="Where the schema files go.")],
) -> None:
    """Write one JSON Schema file per event type, plus the envelope, into DIRECTORY."""
    from schemas import export_json_schemas

    for path in export_json_schemas(directory):
        console.print(str(path))


# ------------------------------------------------------------------ import


@app.command("import")
def import_(
    paths: Annotated[list[Path], typer.Argument(exists=True, dir_okay=False, help="Trajectory files.")],
    fmt: Annotated[TrajectoryFormat, typer.Option("--format", help="The files' format.")] = (
        TrajectoryFormat.auto
    ),
    worker_id: Annotated[str, typer.Option(help="Spool/producer id of the importer.")] = "importer",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON report per file.")] = False,
) -> None:
    """Import other agents' trajectories as trajlake events (through the recorder).

    Every file is checked first; the good ones are recorded even when others are not
    (exit 1 then, naming each bad file).
    """
    from ingest import EpisodeRecorder
    from ingest.importers import check_file, import_file
    from ingest.kafka_broker import require_broker
    from schemas.errors import TrajlakeError

    s = settings()
    todo: list[tuple[Path, str]] = []
    failed = 0
    for path in paths:
        try:
            todo.append((path, check_file(path, None if fmt is TrajectoryFormat.auto else fmt.value)))
        except TrajlakeError as exc:
            failed += 1
            err_console.print(f"[red]{escape(str(exc))}[/red]", highlight=False)
    if todo:
        require_broker(s.kafka_bootstrap)
        with EpisodeRecorder.open(
            bootstrap=s.kafka_bootstrap, home=s.home, worker_id=worker_id, topic=s.topic_episodes
        ) as recorder:
            for path, name in todo:
                try:
                    report = import_file(path, recorder, format=name)
                except TrajlakeError as exc:
                    failed += 1
                    err_console.print(f"[red]{escape(str(exc))}[/red]", highlight=False)
                    continue
                if as_json:
                    print(json.dumps(vars(report), default=str))
                else:
                    console.print(report.summary())
            recorder.flush(timeout=120)
    if failed:
        fail(f"{failed} of {len(paths)} files were not imported")


# ------------------------------------------------------------------ spool


def _spool_table(reports: list[Any], title: str) -> Table:
    table = Table(title=title)
    for col in (
        "worker",
        "owner",
        "segments",
        "bytes",
        "records left",
        "damaged (quarantined)",
        "last error",
    ):
        table.add_column(col)
    for r in reports:
        owner = "worker" if r.worker_alive else ("shipper" if r.shipper_alive else "-")
        dmg = ", ".join(f"{q['kind']} {q['file']} ({q['bytes']} B)" for q in r.damaged) or "-"
        table.add_row(r.name, owner, str(r.segments), str(r.bytes), str(r.records_left), escape(dmg),
                      escape((r.shipper_error or "-")[:80]))  # fmt: skip
    return table


@spool_app.command("status")
def spool_status() -> None:
    """Each worker spool: what is left for Kafka and what was found damaged (exit 1 if anything is)."""
    from ingest.spool_report import inspect_spool, spool_dirs

    s = settings()
    reports = [inspect_spool(d) for d in spool_dirs(s.spool)]
    console.print(_spool_table(reports, f"spools under {s.spool}"))
    left = sum(r.records_left for r in reports)
    damaged = [q for r in reports for q in r.damaged]
    if left or damaged:
        fail(
            f"{left} records not yet in Kafka; {len(damaged)} damaged ranges (see the table); "
            "`trajlake spool drain` sends what workers that are gone left and keeps the damage in quarantine"
        )


@spool_app.command("drain")
def spool_drain(
    timeout: Annotated[float, typer.Option(min=0.1, help="Seconds to wait per spool.")] = 120.0,
) -> None:
    """Send what dead workers left in their spools (spools of live workers are skipped).

    Every intact record is delivered; damaged bytes are kept in the spool's quarantine and named.
    Exits 1 when a record is left undelivered or damage was found.
    """
    from ingest import EpisodeRecorder, SpoolLockedError
    from ingest.kafka_broker import require_broker
    from ingest.spool import quarantined
    from ingest.spool_report import inspect_spool, spool_dirs
    from schemas.errors import TrajlakeError

    s = settings()
    dirs = spool_dirs(s.spool)
    if not dirs:
        console.print(f"no spools under {s.spool}")
        return
    require_broker(s.kafka_bootstrap)
    problems: list[str] = []
    for d in dirs:
        known = {(q.get("segment"), q.get("start"), q.get("end")) for q in quarantined(d)}
        left = 0
        try:
            # inline: this process sends what the spool holds and counts Kafka's acknowledgements
            # itself (no shipper, no progress file to write: a drain works on a full disk)
            rec = EpisodeRecorder.open(
                bootstrap=s.kafka_bootstrap, home=s.home, worker_id=d.name, topic=s.topic_episodes,
                delivery="inline",
            )  # fmt: skip
        except SpoolLockedError:
            console.print(f"{d.name}: owned by a live worker, skipped")
            continue
        except (TrajlakeError, OSError) as exc:
            problems.append(f"{d.name}: cannot open the spool: {exc}")
            continue
        found = rec.delivery.stats.recovered
        try:
            rec.flush(timeout)
        except TrajlakeError as exc:
            problems.append(f"{d.name}: {exc}")
        finally:
            left = rec.delivery.pending
            rec.close()
        rep = inspect_spool(d)
        new = [q for q in rep.damaged if (q.get("segment"), q.get("start"), q.get("end")) not in known]
        console.print(
            f"{d.name}: {max(0, found - left)} of {found} records delivered, {left} left, "
            f"{len(rep.damaged)} damaged ranges ({len(new)} found now)"
        )
        for q in new:
            where = d / "quarantine" / str(q["file"]) if q.get("file") else "nowhere (nothing to keep)"
            what = (
                f"segment {q['segment']} is gone although its records were never acknowledged"
                if q["kind"] == "missing"
                else f"segment {q['segment']} ends before its seal at byte {q['start']} (the records after "
                "the cut are gone)"
                if q["kind"] == "truncated"
                else f"{q['kind']} bytes {q['start']}..{q['end']} of segment {q['segment']} (at least "
                f"{q['records_at_least']} record(s))"
            )
            problems.append(f"{d.name}: {what}; kept in {where}")
        if left:
            problems.append(f"{d.name}: {left} records still not acknowledged by Kafka")
    if problems:
        for p in problems:
            err_console.print(f"[red]{escape(p)}[/red]", highlight=False)
        fail(f"the drain left {len(problems)} problem(s); see above")


# ------------------------------------------------------------------ events


@events_app.command("read")
def events_read(
    episode: Annotated[str | None, typer.Option(help="Only this episode.")] = None,
    topic: Annotated[str | None, typer.Option(help="Topic (default: the episodes topic).")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many events.")] = 100,
) -> None:
    """Print events read back from the log, parsed and validated (JSON lines)."""
    from ingest.kafka_broker import require_broker
    from ingest.log_reader import read_events

    s = settings()
    require_broker(s.kafka_bootstrap)
    name = topic or s.topic_episodes
    n = 0
    for rec in read_events(s.kafka_bootstrap, name, episode_id=episode, missing_ok=False):
        print(rec.event.model_dump_json() if rec.event else json.dumps({"error": rec.error}))
        n += 1
        if n >= limit:
            break
    if n == 0:
        what = f"of episode {episode!r} " if episode else ""
        fail(f"no events {what}in {name} at {s.kafka_bootstrap}")


# ------------------------------------------------------------------ pipelines


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
) -> None:
    """Fold trajlake.episodes and trajlake.judgements into the Delta tables, exactly once."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ingest.kafka_broker import require_broker
    from pipelines import backlog, run_follow, run_once

    if once == follow:
        fail("give exactly one of --once or --follow", ExitCode.USAGE)
    cfg = _pipeline_config(lake, workers, max_batch, beam_arg, runner, scheduler)
    require_broker(cfg.bootstrap)
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


@app.command("replay")
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


@app.command()
def demo(
    iterations: Annotated[
        int, typer.Option(min=1, help="RL iterations (rollouts -> pipeline -> learner).")
    ] = 4,
    group_size: Annotated[int, typer.Option(min=2, help="Attempts per training task and iteration (G).")] = 8,
    workers: Annotated[int, typer.Option(min=1, help="Rollout worker processes.")] = 2,
    held_out: Annotated[int, typer.Option(min=1, help="Held-out tasks evaluated each iteration.")] = 200,
    seed: Annotated[int, typer.Option(min=0, help="Seeds the tasks, the warm start and the samplers.")] = 0,
) -> None:
    """The closed loop end to end on the embedded default, as a measurement.

    Brings up the broker, builds the base image if this machine has none,
    generates and admits the reverse task family, warm-starts the in-repo
    transformer on mostly shorter synthetic strings, then iterates: rollouts in
    sandboxes (events to Kafka) -> Beam -> Delta -> policy-gradient learner ->
    new checkpoint, evaluating every held-out task greedily and sampled each
    time. Writes demo_summary.json (95% intervals) and a learning-curve PNG, and
    exits 0 only when the interval of the greedy final-minus-first difference
    lies above 0.
    """
    from trajlake.demo import run_demo

    ok = run_demo(
        settings(),
        _broker(),
        iterations=iterations,
        group_size=group_size,
        workers=workers,
        held_out=held_out,
        seed=seed,
        console=console,
    )
    if not ok:
        raise typer.Exit(code=ExitCode.FAILED)


# ------------------------------------------------------------------ entry point


def _take_debug_flag(argv: list[str]) -> tuple[list[str], bool]:
    """``argv`` without ``--debug`` (wherever it stands before a ``--``), and whether it was there."""
    end = argv.index("--") if "--" in argv else len(argv)
    head = [a for a in argv[:end] if a != "--debug"]
    return head + argv[end:], len(head) != end


def main() -> None:
    """Entry point of the ``trajlake`` console script."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # kafka-python logs every reconnect attempt; the spool and our own messages say what matters.
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    # Beam probes optional Google Cloud clients at import and says so on the root logger.
    logging.getLogger().addFilter(lambda record: "apitools not found" not in record.getMessage())
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    args, debug_flag = _take_debug_flag(sys.argv[1:])
    set_debug(debug_flag)
    try:
        app(args=args, prog_name="trajlake")
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
        if code == ExitCode.INTERRUPTED:
            err_console.print("interrupted")
    except BaseException as exc:  # noqa: BLE001 - every failure leaves as one sentence and a status
        code = _report(exc)
    _leave(code)


def _report(exc: BaseException) -> int:
    from trajlake.terminal import debug

    message, code = describe(exc)
    if debug():
        traceback.print_exception(exc)
    err_console.print(
        f"[bold red]error:[/bold red] {escape(message)}" if code != ExitCode.INTERRUPTED else "interrupted",
        highlight=False,
    )
    return int(code)


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
    import os

    threading_shutdown = getattr(threading, "_shutdown", None)
    if threading_shutdown is not None:
        try:
            threading_shutdown()
        except KeyboardInterrupt:
            code = code or ExitCode.INTERRUPTED
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            # output was lost (a full disk, a closed pipe): never report success then; 120 is
            # what the interpreter itself exits with when it cannot flush at exit
            code = code or ExitCode.OUTPUT_LOST
    os._exit(code)
