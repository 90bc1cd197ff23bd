"""``trajlake drift``: re-execute recorded episodes in today's environment; report what diverges."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from trajlake.options import BackendOpt, Workers
from trajlake.terminal import ExitCode, console, err_console, fail, settings

_RELATIVE = re.compile(r"(\d+)\s*([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def _since(text: str | None) -> dt.datetime | None:
    """Parser callback: an ISO 8601 time (UTC unless it says) or an age such as ``30m``, ``2h``, ``7d``."""
    if text is None:
        return None
    m = _RELATIVE.fullmatch(text.strip())
    if m:
        return dt.datetime.now(dt.UTC) - dt.timedelta(seconds=int(m[1]) * _UNITS[m[2]])
    try:
        t = dt.datetime.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(
            f"{text!r} is neither an ISO 8601 time nor an age like 30m, 2h or 7d"
        ) from None
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


def drift(
    tasks: Annotated[
        list[Path] | None,
        typer.Option("--tasks", exists=True, help="Task directories, or folders of them (default: ./tasks)."),
    ] = None,
    family: Annotated[list[str] | None, typer.Option(help="Only episodes of these task families.")] = None,
    task: Annotated[list[str] | None, typer.Option(help="Only episodes of these tasks.")] = None,
    episode: Annotated[list[str] | None, typer.Option(help="Only these episodes.")] = None,
    since: Annotated[
        Any,
        typer.Option(
            parser=str,
            callback=_since,
            metavar="TIME",
            help="Only episodes started since: an ISO 8601 time or an age (30m, 2h, 7d).",
        ),
    ] = None,  # fmt: skip
    limit: Annotated[
        int | None, typer.Option(min=1, help="At most this many episodes, newest first.")
    ] = None,
    workers: Workers = 2,
    backend: BackendOpt = None,
    fold: Annotated[bool, typer.Option(help="Record the results (drift table) through the log.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Re-execute recorded tool calls from each task's initial state; report the first step that diverges.

    Outputs are compared after normalising what changes between runs (times, durations, pids,
    temporary paths, addresses, and the task's `nondeterministic` patterns). Exit 1 when an episode
    no longer reproduces or could not be checked.
    """
    from ingest.blobs import BlobStore
    from judges.tasks import find_task_dirs, load_task
    from pipelines.drift import DriftSelection, new_run_id, run_drift
    from rollouts.runner import ROLLOUT_SPEC
    from sandboxes.pool import SandboxPool
    from trajlake.preflight import require_backend, require_lake

    s = settings()
    if backend is not None:
        s = s.model_copy(update={"sandbox_backend": backend.value})
    dirs = tasks or [Path("tasks")]
    if tasks is None and not dirs[0].is_dir():
        fail("no --tasks given and there is no ./tasks here; name the task directories the episodes ran "
             "(`--tasks DIR`)", ExitCode.USAGE)  # fmt: skip
    loaded = {}
    for d in find_task_dirs(dirs):
        t = load_task(d)
        loaded[t.id] = t
    lake = require_lake(Path(s.lake).resolve(), ["episodes", "steps"])
    if fold:
        from ingest.kafka_broker import require_broker, require_topic

        require_broker(s.kafka_bootstrap)
        require_topic(s.kafka_bootstrap, s.topic_curation)
    backend_ = require_backend(s)
    selection = DriftSelection(families=tuple(family or ()), task_ids=tuple(task or ()),
                               episode_ids=tuple(episode or ()), since=since, limit=limit)  # fmt: skip
    run_id = new_run_id()
    checked_at = dt.datetime.now(dt.UTC)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console) as progress:  # fmt: skip
        bar = progress.add_task("selecting episodes", total=None)
        try:
            with SandboxPool(backend_, ROLLOUT_SPEC, max_size=max(1, workers)) as pool:
                results = run_drift(
                    lake, loaded, pool, BlobStore(s.blobs),
                    selection=selection, workers=workers, timeout_s=ROLLOUT_SPEC.exec_timeout_s,
                    on_selected=lambda n: progress.update(bar, total=n, description="re-executing"),
                    on_result=lambda r: progress.update(
                        bar, advance=1,
                        description=f"{r.task_id}: {_word(r.reproducible)}"),
                )  # fmt: skip
        finally:
            backend_.close()
        if fold and results:
            from schemas.control import DRIFT, control_event
            from trajlake.loop import curate

            progress.update(bar, description="recording the results (drift table)")
            curate(s, [control_event(DRIFT, r.row(run_id, checked_at), "drift") for r in results])
    report = {
        "run_id": run_id,
        "checked": len(results),
        "reproducible": sum(r.reproducible is True for r in results),
        "diverged": sum(r.reproducible is False for r in results),
        "errors": sum(r.reproducible is None for r in results),
        "episodes": [
            {"episode_id": r.episode_id, "reproducible": r.reproducible,
             "first_diverging_seq": r.first_diverging_seq, "task_id": r.task_id,
             "task_version": r.task_version,
             "steps_checked": r.steps_checked, "likely_causes": r.likely_causes, "recorded": r.recorded,
             "replayed": r.replayed, "image_recorded": r.image_recorded, "image_now": r.image_now,
             "error": r.error}
            for r in results
        ],
    }  # fmt: skip
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        _print(report, folded=fold)
    if report["diverged"] or report["errors"]:
        raise typer.Exit(code=ExitCode.FAILED)


def _word(reproducible: bool | None) -> str:
    return {True: "reproducible", False: "diverged"}.get(reproducible, "not checked")  # type: ignore[arg-type]


def _print(report: dict[str, Any], *, folded: bool) -> None:
    table = Table(title=f"drift check {report['run_id']}")
    for col in ("episode", "task", "result", "first diverging step", "steps", "likely cause"):
        table.add_column(col)
    for e in report["episodes"]:
        result = _word(e["reproducible"])
        style = {"reproducible": "green", "diverged": "bold red"}.get(result, "yellow")
        table.add_row(
            e["episode_id"][-12:], f"{e['task_id']}@{e['task_version']}", f"[{style}]{result}[/{style}]",
            "-" if e["first_diverging_seq"] is None else str(e["first_diverging_seq"]),
            str(e["steps_checked"]),
            escape("; ".join(e["likely_causes"]) or (e["error"] or "-")),
        )  # fmt: skip
    console.print(table)
    for e in report["episodes"]:
        if e["reproducible"] is False:
            rec, now = e["recorded"], e["replayed"]
            args = escape(json.dumps(rec["arguments"])[:200])
            console.print(f"[bold]{e['episode_id']}[/bold] step {e['first_diverging_seq']} "
                          f"({escape(rec['tool'])} {args}):")  # fmt: skip
            console.print(f"  recorded: exit {rec['exit_code']}, stdout {escape(rec['stdout'][-300:])!r}")
            console.print(f"  now:      exit {now['exit_code']}, stdout {escape(now['stdout'][-300:])!r}")
    tail = "; recorded in the drift table" if folded else ""
    console.print(f"{report['checked']} episodes: {report['reproducible']} reproducible, "
                  f"{report['diverged']} diverged, {report['errors']} not checked{tail}")  # fmt: skip
