"""``trajlake rejudge``: score recorded episodes again with another judge version."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from trajlake.options import BackendOpt, DeltaVersion, TaskDirs, Workers, judge_spec_option
from trajlake.terminal import ExitCode, console, err_console, fail, settings


def rejudge(
    tasks: TaskDirs,
    judge: Annotated[
        Any, judge_spec_option("the judge of every episode (default: each task's current judge).")
    ] = None,
    family: Annotated[list[str] | None, typer.Option(help="Only these task families.")] = None,
    task: Annotated[list[str] | None, typer.Option(help="Only these task ids.")] = None,
    status: Annotated[
        list[str] | None, typer.Option(help="Statuses to score (default: success, failure, truncated).")
    ] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="At most this many episodes, oldest first.")
    ] = None,
    episodes_version: DeltaVersion = None,
    run_id: Annotated[str | None, typer.Option(help="Resume this run (same event ids, deduped).")] = None,
    force: Annotated[bool, typer.Option(help="Score episodes already scored by the target version.")] = False,
    allow_task_drift: Annotated[
        bool, typer.Option(help="Score episodes that ran an older version of their task.")
    ] = False,
    workers: Workers = 2,
    backend: BackendOpt = None,
    fold: Annotated[bool, typer.Option(help="Fold the new judgements into the lake afterwards.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Score recorded episodes with a (new) judge version; the judgements become events.

    Each episode's final state is rebuilt in a fresh sandbox from the archive its
    rollout left in the blob store; the judgement goes to the judgements topic as a
    `reward` event (source `rejudge`) and is folded beside the old version's rows.
    """
    from ingest.blobs import BlobStore
    from ingest.kafka_broker import require_broker
    from ingest.kafka_sink import KafkaSink, KafkaSinkConfig
    from judges.tasks import find_task_dirs, load_task
    from pipelines.rejudge import RejudgeSelection
    from pipelines.rejudge import rejudge as run_rejudge
    from rollouts.runner import ROLLOUT_SPEC
    from sandboxes.pool import SandboxPool
    from trajlake.loop import fold_log
    from trajlake.preflight import require_backend, require_images, require_lake

    s = settings()
    lake = require_lake(Path(s.lake).resolve(), ["episodes", "rewards", "events"])
    loaded = {}
    for d in find_task_dirs(tasks):
        t = load_task(d)
        loaded[t.id] = t
    if not loaded:
        fail(f"no task.yaml under {', '.join(map(str, tasks))}", ExitCode.USAGE)
    selection = RejudgeSelection(
        families=tuple(family or ()),
        task_ids=tuple(task or ()),
        statuses=tuple(status or ("success", "failure", "truncated")),
        limit=limit,
        versions={"episodes": episodes_version} if episodes_version is not None else None,
    )
    require_broker(s.kafka_bootstrap)
    backend_ = require_backend(s, backend.value if backend else None)
    require_images(backend_, [t.spec.initial_state.image for t in loaded.values()])
    sink = KafkaSink(KafkaSinkConfig(bootstrap_servers=s.kafka_bootstrap, client_id="trajlake-rejudge"))
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
    ) as progress:
        bar = progress.add_task("selecting episodes", total=None)
        try:
            with SandboxPool(backend_, ROLLOUT_SPEC, max_size=max(1, workers)) as pool:
                report = run_rejudge(
                    lake,
                    loaded,
                    pool,
                    sink,
                    BlobStore(s.blobs),
                    topic=s.topic_judgements,
                    run_id=run_id,
                    judge_spec=judge,
                    selection=selection,
                    force=force,
                    allow_task_drift=allow_task_drift,
                    workers=workers,
                    on_selected=lambda n: progress.update(bar, total=n, description="re-judging"),
                    on_item=lambda i: progress.update(
                        bar, advance=1, description=f"{i.task_id}: {i.verdict or i.outcome}"
                    ),
                )
        finally:
            sink.close()
            backend_.close()
        folded = None
        if fold and report.count("judged"):
            progress.update(bar, description="folding the judgements into the lake")
            folded = fold_log(s)
    flips = sorted(report.flips().items())
    if as_json:
        print(
            json.dumps(
                {
                    "run_id": report.run_id,
                    "table_versions": report.table_versions,
                    "judged": report.count("judged"),
                    "skipped": report.count("skipped"),
                    "errors": report.count("error"),
                    "flips": [{"from": a, "to": b, "count": n} for (a, b), n in flips],
                    "items": [i.__dict__ for i in report.items],
                    "folded_records": folded,
                },
                indent=2,
            )
        )
    else:
        _print_report(report, folded)
    if report.count("error"):
        raise typer.Exit(code=ExitCode.FAILED)


def _print_report(report: Any, folded: int | None) -> None:
    versions = sorted({i.judge_version for i in report.items if i.judge_version})
    judged, skipped, errors = report.count("judged"), report.count("skipped"), report.count("error")
    console.print(
        f"run [bold]{report.run_id}[/bold]: {judged} judged, {skipped} skipped, {errors} errors "
        f"in {report.seconds:.1f}s; judge version(s) {', '.join(versions) or '-'}; "
        f"read at {report.table_versions}"
    )
    flips = report.flips()
    if flips:
        table = Table(title="verdicts: previous version -> this run")
        table.add_column("previous")
        for to in ("pass", "fail", "error"):
            table.add_column(to, justify="right")
        for frm in ("pass", "fail", "error"):
            if any(a == frm for a, _ in flips):
                table.add_row(frm, *(str(flips.get((frm, to), 0)) for to in ("pass", "fail", "error")))
        console.print(table)
    for reason, n in report.skip_reasons().most_common():
        console.print(f"[dim]skipped {n}: {reason}[/dim]")
    for i in report.items:
        if i.outcome == "error":
            err_console.print(f"[red]{i.episode_id} ({i.task_id}): {i.reason}[/red]")
    if folded is not None:
        console.print(f"folded {folded} records into the lake")
    if report.count("judged"):
        console.print(f"resume or repeat safely with --run-id {report.run_id}")
