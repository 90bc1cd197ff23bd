"""The log, in and out: ``schemas export``, ``import``, ``spool status|drain`` and ``events read``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from trajlake.options import TrajectoryFormat
from trajlake.terminal import console, err_console, fail, settings

if TYPE_CHECKING:
    pass

schemas_app = typer.Typer(help="Event schemas.", no_args_is_help=True)
spool_app = typer.Typer(help="Durable local spools of rollout workers.", no_args_is_help=True)
events_app = typer.Typer(help="Read events back from the log.", no_args_is_help=True)


@schemas_app.command("export")
def schemas_export(
    directory: Annotated[Path, typer.Argument(file_okay=False, help="Where the schema files go.")],
) -> None:
    """Write one JSON Schema file per event type, plus the envelope, into DIRECTORY."""
    from schemas import export_json_schemas

    for path in export_json_schemas(directory):
        console.print(str(path))


# ------------------------------------------------------------------ import


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
