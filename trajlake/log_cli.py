"""The log, in and out: ``schemas export``, ``import``, ``spool status|drain`` and ``events read``."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

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
    paths: Annotated[
        list[Path], typer.Argument(exists=True, help="Trajectory files, or directories of them (walked).")
    ],
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="The files' format: mini-swe-agent, openhands, swe-agent, or one another package "
            "registers (default: detected from each file's content).",
            callback=lambda value: _known_format(value),
        ),
    ] = None,
    worker_id: Annotated[str, typer.Option(help="Spool/producer id of the importer.")] = "importer",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON report per file.")] = False,
) -> None:
    """Import other agents' trajectories as trajlake events (through the recorder).

    Every file is checked first; the good ones are recorded even when others are not
    (exit 1 then, naming each bad file). In a directory, files of no known format are
    skipped and counted. A file imports under ids derived from its format and content:
    one imported before (named in this home's import ledger or in the lake) is skipped,
    and a copy that still reaches the log carries the same event ids, which the pipeline
    keeps once.
    """
    from importers import check_file, import_file
    from importers.ledger import ImportLedger
    from importers.report import SourceFile, import_episode_id
    from ingest import EpisodeRecorder
    from ingest.kafka_broker import require_broker
    from schemas.errors import TrajlakeError
    from schemas.events import SDK_VERSION, Producer

    s = settings()
    todo: list[tuple[Path, str, str]] = []
    failed = skipped = 0
    files = _import_files(paths)
    for path, from_directory in files:
        try:
            name = check_file(path, None if fmt in (None, "auto") else fmt)
            todo.append((path, name, import_episode_id(name, SourceFile.read(path).sha256)))
        except TrajlakeError as exc:
            if from_directory:
                skipped += 1
                continue
            failed += 1
            err_console.print(f"[red]{escape(str(exc))}[/red]", highlight=False)
    if skipped:
        err_console.print(f"skipped {skipped} files of no known trajectory format in the directories given")
    ledger = ImportLedger(s.home / "imports" / "ledger.jsonl")
    seen = ledger.known({e for _, _, e in todo}) | _in_lake(s, {e for _, _, e in todo})
    fresh: list[tuple[Path, str, str]] = []
    chosen: set[str] = set()  # (two paths of the same content: imported once)
    for path, name, eid in todo:
        if eid in seen:
            message = f"{path}: already imported as episode {eid}; skipped (the same content imports under "
            message += "the same ids, so importing it again would add nothing)"
            if as_json:
                skip = {"source": str(path), "format": name, "episode_id": eid, "skipped": message}
                print(json.dumps(skip))
            else:
                console.print(escape(message), highlight=False)
        elif eid not in chosen:
            chosen.add(eid)
            fresh.append((path, name, eid))
    if fresh:
        require_broker(s.kafka_bootstrap)
        done = []
        # no pid: an import's envelopes are the same on every run on this host, so a copy that is
        # sent again (where the source has its times) is a re-send the pipeline drops, not a conflict
        producer = Producer(worker_id=worker_id, host=socket.gethostname(), sdk_version=SDK_VERSION)
        with EpisodeRecorder.open(
            bootstrap=s.kafka_bootstrap, home=s.home, worker_id=worker_id, topic=s.topic_episodes,
            producer=producer,
        ) as recorder:  # fmt: skip
            for path, name, _ in fresh:
                try:
                    report = import_file(path, recorder, format=name)
                except TrajlakeError as exc:
                    failed += 1
                    err_console.print(f"[red]{escape(str(exc))}[/red]", highlight=False)
                    continue
                done.append(report)
                if as_json:
                    print(json.dumps(vars(report), default=str))
                else:
                    console.print(report.summary())
            recorder.flush(timeout=120)
        ledger.add(done)
    if failed:
        fail(f"{failed} of {len(files)} files were not imported")


def _known_format(value: str | None) -> str | None:
    from importers import formats

    if value not in (None, "auto") and value not in formats():
        known = ", ".join(sorted(formats()))
        raise typer.BadParameter(f"unknown trajectory format {value!r}; one of {known}")
    return value


def _import_files(paths: list[Path]) -> list[tuple[Path, bool]]:
    """The files to import: each path given, and every file under each directory (sorted), once."""
    out: dict[Path, bool] = {}
    for path in paths:
        if path.is_dir():
            for found in sorted(path.rglob("*")):
                inside = found.relative_to(path).parts
                # hidden files and folders (.git, ...) and links are not walked into
                if found.is_symlink() or any(p.startswith(".") for p in inside) or not found.is_file():
                    continue
                out.setdefault(found.resolve(), True)
        else:
            out[path.resolve()] = False
    return list(out.items())


def _in_lake(s: Any, episode_ids: set[str]) -> set[str]:
    """Which of ``episode_ids`` the lake's ``episodes`` table holds (none: no lake or table yet)."""
    from lake import Lake, LakeError

    if not episode_ids:
        return set()
    root = s.lake_root()
    try:
        lake = Lake(root, s.storage_options(root) or None)
        found: set[str] = set()
        ids = sorted(episode_ids)
        for i in range(0, len(ids), 1000):
            chunk = ", ".join("'" + e.replace("'", "''") + "'" for e in ids[i : i + 1000])
            rows = lake.read("episodes", where=f"episode_id IN ({chunk})", columns=["episode_id"])
            found |= set(rows["episode_id"].to_pylist())
        return found
    except (LakeError, OSError):
        return set()


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
