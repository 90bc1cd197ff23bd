"""``trajlake judges ...`` and ``trajlake tasks ...``: golden-set verification and task admission."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from schemas.errors import TrajlakeError
from trajlake.options import BackendOpt, LakeOpt, judge_spec_option
from trajlake.terminal import ExitCode, console, err_console, fail, settings

judges_app = typer.Typer(help="Versioned judges and their golden sets.", no_args_is_help=True)
tasks_app = typer.Typer(help="Task specs and task admission.", no_args_is_help=True)


def _pool(backend: Any, size: int, images: list[str | None]) -> Any:
    """A pool of admission sandboxes on a backend that runs here, with every image the tasks name."""
    from judges.admission import ADMISSION_SPEC
    from sandboxes import SandboxPool
    from trajlake.preflight import require_backend, require_images

    bk = require_backend(settings(), backend.value if backend else None)
    require_images(bk, images)
    return SandboxPool(bk, ADMISSION_SPEC, max_size=size)


def _images(task_dirs: Any) -> list[str | None]:
    """The images the tasks under ``task_dirs`` run on (tasks that do not load are admission's concern)."""
    from judges.errors import TaskSpecError
    from judges.tasks import load_task

    images: set[str | None] = set()
    for d in task_dirs:
        try:
            images.add(load_task(d).spec.initial_state.image)
        except TaskSpecError:
            continue
    return sorted(images, key=str)


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
    golden: Annotated[
        list[Path] | None,
        typer.Argument(exists=True, dir_okay=False, help="Golden files (default: all shipped)."),
    ] = None,
    backend: BackendOpt = None,
    workers: Annotated[int, typer.Option(min=1, help="Cases judged at once.")] = 2,
    as_json: Annotated[Path | None, typer.Option("--json", help="Also write the results here.")] = None,
) -> None:
    """Replay every golden trajectory, judge it, and fail on any changed verdict, score or flag."""
    from judges.golden import TASKS_DIR, hack_report, load_golden
    from judges.golden import verify as run_verify

    cases = load_golden(golden)
    pool = _pool(backend, workers, _images(TASKS_DIR / t for t in {c.task for c in cases}))
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
        rate = report["detection_rate"] or 0.0
        fp = report["false_positive_rate"] or 0.0
        gain = report["mean_gain"]
        console.print(
            f"reward-hacking corpus: {report['exploits']} exploits of {len(report['exploit_kinds'])} kinds "
            f"on {len(report['tasks'])} tasks: detection rate {rate:.1%} ({report['detected']} of "
            f"{report['exploits'] - report['structural']} with a flag kind; {report['structural']} contained "
            "by structure), "
            f"full passes {report['full_passes']}, errors {report['errors']}, "
            f"above doing nothing {report['gained']}"
            + (f" (mean gain {gain:+.3f})" if gain is not None else "")
            + f"; honest false-positive rate {fp:.1%} ({report['false_positives']}/{report['honest']})"
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
    for cid in report["erroring"]:
        err_console.print(f"[bold red]exploit made the judge fail[/bold red] {cid}: an `error` verdict is "
                          "excluded from training instead of punished")  # fmt: skip
    for cid in report["passed"] + report["gaining"]:
        err_console.print(f"[bold red]exploit rewarded[/bold red] {cid}: the task's own judge gives it "
                          "a pass or more than doing nothing")  # fmt: skip
    if flipped:
        for r in flipped:
            err_console.print(
                f"[bold red]changed[/bold red] {r.case.set_name}/{r.case.id}: {'; '.join(r.problems)}"
            )
    if flipped or report["passed"] or report["gaining"] or report["erroring"]:
        raise typer.Exit(code=ExitCode.FAILED)
    console.print(f"[green]all {len(results)} golden cases unchanged[/green]")


@tasks_app.command("admit")
def admit(
    paths: Annotated[
        list[Path], typer.Argument(exists=True, help="Task directories, or directories holding tasks.")
    ],
    backend: BackendOpt = None,
    runs: Annotated[int, typer.Option(min=1, help="Times the reference solution is judged (flakiness).")] = 3,
    workers: Annotated[int, typer.Option(min=1, help="Tasks admitted at once.")] = 2,
    lake: LakeOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the full rows (reasons whole) as JSON.")
    ] = False,
) -> None:
    """Admit tasks: build, judge untouched and reference states, repeat; record the results in the log.

    The results are events on the tasks topic; the pipeline folds them into the
    ``tasks`` table right after (so a replay rebuilds it). Needs the broker.
    Exits 1 when any task is rejected; every reason is printed whole.
    """
    from judges.tasks import find_task_dirs

    dirs = find_task_dirs(paths)
    if not dirs:
        fail(f"no task.yaml under {', '.join(map(str, paths))}", ExitCode.USAGE)
    _admit_dirs(dirs, backend, runs, workers, lake, as_json)


def _admit_dirs(
    dirs: list[Path], backend: Any, runs: int, workers: int, lake: Path | None, as_json: bool
) -> None:
    """Admit the tasks in ``dirs``, publish the results, fold them, print them; exit 1 on a rejection."""
    from ingest.kafka_broker import require_broker
    from judges.admission import admit_all, publish_admissions, rejection_reasons
    from lake import Lake
    from pipelines import run_once
    from rollouts.sampler import recorded_splits

    s = settings()
    pool = _pool(backend, workers, _images(dirs))
    require_broker(s.kafka_bootstrap)  # before minutes of admission, not after
    with pool, _progress() as progress:
        bar = progress.add_task("admitting tasks", total=len(dirs))
        results = admit_all(dirs, pool, runs=runs, workers=workers, on_result=lambda r: progress.advance(bar))
    cfg = s.pipeline_config(lake)
    events = publish_admissions(
        s.kafka_bootstrap, s.topic_tasks, results, recorded_splits=recorded_splits(cfg.lake_root)
    )
    rows = [e.payload.value for e in events]  # exactly the rows the tasks table gets
    run_once(cfg)
    lk = Lake(cfg.lake_root)
    admitted = sum(r.admitted for r in results)
    if as_json:
        print(json.dumps([{**row, "untouched": r.verdicts.get("untouched", []),
                           "reference": r.verdicts.get("reference", []),
                           "do_nothing_score": r.do_nothing_score, "null_effort_scores": r.null_effort_scores,
                           "notes": r.notes, "seconds": round(r.duration_s, 3)}
                          for r, row in zip(results, rows)], default=str, indent=2))  # fmt: skip
    else:
        table = Table(title=f"task admission ({runs} runs each)")
        for col in ("task", "family", "tier", "admitted", "untouched", "do-nothing", "best null", "reference",
                    "generated", "time"):  # fmt: skip
            table.add_column(col, no_wrap=True)
        for r in results:
            table.add_row(
                r.task_id,
                r.task.spec.family if r.task else "?",
                (r.task.spec.tier if r.task else None) or "?",
                "[green]yes[/green]" if r.admitted else "[bold red]no[/bold red]",
                ",".join(r.verdicts.get("untouched", [])),
                "-" if r.do_nothing_score is None else f"{r.do_nothing_score:.3f}",
                f"{max(r.null_effort_scores.values()):.3f}" if r.null_effort_scores else "-",
                ",".join(r.verdicts.get("reference", [])),
                "-" if r.task is None else ("yes" if r.task.spec.generated else "[yellow]none[/yellow]"),
                f"{r.duration_s:.1f}s",
            )
        console.print(table)
        for r in results:
            for reason in r.reasons:
                console.print(f"[red]{escape(r.task_id)} rejected[/red] {escape(reason)}", soft_wrap=True)
        noted: dict[str, list[str]] = {}
        for r in results:
            for note in r.notes:
                noted.setdefault(note, []).append(r.task_id)
        for note, ids in noted.items():
            shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
            console.print(f"[yellow]note[/yellow] {escape(note)}: {escape(shown)}", soft_wrap=True)
    err_console.print(
        f"{admitted}/{len(results)} admitted; published to {s.topic_tasks} and folded: `tasks` table in "
        f"{lk.root} at version {lk.versions()['tasks']}"
    )
    if admitted < len(results):
        for reason, n in rejection_reasons(results).most_common(10):
            err_console.print(f"[red]{n} task(s):[/red] {escape(reason)}", soft_wrap=True)
        raise typer.Exit(code=ExitCode.FAILED)


@tasks_app.command("derive")
def derive(
    case: Annotated[str, typer.Argument(help="A failure case's name (`trajlake failures curate --name`).")],
    tasks: Annotated[
        list[Path], typer.Option("--tasks", exists=True, help="Where the case's tasks are (repeatable).")
    ],
    out: Annotated[Path, typer.Option("--out", file_okay=False, help="Where the drafts are written.")],
    max_tasks: Annotated[int, typer.Option(min=1, help="Drafts at most (one per task of the case).")] = 5,
    admit: Annotated[
        bool, typer.Option(help="Run the drafts through admission (--no-admit: write only).")
    ] = True,
    backend: BackendOpt = None,
    runs: Annotated[int, typer.Option(min=1, help="Times admission judges each reference.")] = 3,
    workers: Annotated[int, typer.Option(min=1, help="Drafts admitted at once.")] = 2,
    lake: LakeOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the admission rows as JSON.")] = False,
) -> None:
    """Draft tasks targeted at a failure case, then admit them: only admitted drafts join the pool.

    One draft per task of the case (its newest failing episode): the task's family format, starting
    from the state that episode left where the family allows it (files only, a patch reference, a
    failure at the judgement, an archived final state), with a reference patch from there to the
    fix, an instruction that says how the earlier attempt failed, the source's hidden tests and a
    DRAFT.md for the person who edits them. Each draft's spec names the case in ``lineage``.
    """
    from ingest.blobs import BlobStore
    from ingest.kafka_broker import require_broker
    from judges.derive import CaseFailure, derive_task
    from judges.errors import WorkspaceUnjudgeable
    from judges.final_state import read_archive
    from judges.tasks import find_task_dirs, load_task
    from trajlake.failures_cli import failing_observation
    from trajlake.preflight import require_lake

    s = settings()
    lk = require_lake(lake or s.lake, ["failures", "episodes", "events", "steps", "rewards"])
    saved = lk.read("failure_cases").to_pylist() if "failure_cases" in lk.versions() else []
    rows = [r for r in saved if r["case_id"] == case]
    if not rows:
        fail(f"no failure case {case!r} in {lk.root}; `trajlake failures cases` lists clusters and "
             "`trajlake failures curate CLUSTER --name NAME` saves one", ExitCode.USAGE)  # fmt: skip
    row = rows[0]
    if admit:
        require_broker(
            s.kafka_bootstrap
        )  # (before drafting: a draft written and never admitted blocks a rerun)
    sources: dict[str, Any] = {}
    for d in find_task_dirs(tasks):
        try:
            t = load_task(d)
        except TrajlakeError:
            continue
        sources[t.id] = t
    eps = lk.read_episodes_rows(
        "episodes", row["episode_ids"], columns=["episode_id", "task_id", "task_version", "started_at"]
    )
    newest: dict[str, dict[str, Any]] = {}
    for e in sorted(
        eps.to_pylist(), key=lambda e: (e["started_at"] is not None, e["started_at"], e["episode_id"])
    ):
        newest[e["task_id"]] = e
    wanted = [t for t in row["task_ids"] if t in newest]
    skipped = [t for t in wanted if t not in sources]
    drifted = [t for t in wanted if t in sources and sources[t].spec.version != newest[t]["task_version"]]
    if skipped:
        err_console.print(f"[yellow]not under --tasks, no draft:[/yellow] {escape(', '.join(skipped))}")
    for t in drifted:
        err_console.print(f"[yellow]{escape(t)}: the case's episode ran version {newest[t]['task_version']}, "
                          f"--tasks has {sources[t].spec.version}; no draft[/yellow]")  # fmt: skip
    wanted = [t for t in wanted if t not in skipped and t not in drifted][:max_tasks]
    if not wanted:
        fail(
            f"none of case {case}'s tasks ({', '.join(row['task_ids'][:10])}) is under "
            f"{', '.join(map(str, tasks))} at the version its episodes ran; give --tasks the directory "
            "that holds them",
            ExitCode.USAGE,
        )
    ids = [newest[t]["episode_id"] for t in wanted]
    judged_by = (row["judge_name"], row["judge_version"])
    failures = [f for f in lk.read_episodes_rows("failures", ids).to_pylist()
                if (f["judge_name"], f["judge_version"]) == judged_by]  # fmt: skip
    rewards = lk.read_episodes_rows("rewards", ids, columns=["episode_id", "judge_name", "judge_version"])
    judged = {
        r["episode_id"] for r in rewards.to_pylist() if (r["judge_name"], r["judge_version"]) == judged_by
    }
    events = lk.read_episodes_rows("events", ids, columns=["episode_id", "type", "payload"])
    refs = {r["episode_id"]: json.loads(r["payload"]).get("final_state_ref")
            for r in events.to_pylist() if r["type"] == "episode_ended"}  # fmt: skip
    blobs = BlobStore(s.blobs)
    drafts, broken = [], 0
    for task_id in wanted:
        episode = newest[task_id]["episode_id"]
        mine = [f for f in failures if f["episode_id"] == episode]
        seq = mine[0]["failing_seq"] if mine else None
        state, ref = None, refs.get(episode)
        if isinstance(ref, str) and _SHA256.fullmatch(ref):
            try:
                state = read_archive(blobs.get(ref))
            except (WorkspaceUnjudgeable, OSError, KeyError, TrajlakeError) as exc:
                err_console.print(
                    f"[yellow]{escape(episode)}: its final state does not load ({escape(str(exc))})"
                )
        elif ref is not None:
            err_console.print(
                f"[yellow]{escape(episode)}: its final state reference is not a sha256[/yellow]"
            )
        failure = CaseFailure(
            case=case, category=row["category"], signature=row["signature"],
            message=mine[0]["message"] if mine else row["message"],
            observation=failing_observation(lk, episode, seq, row["judge_name"], row["judge_version"]),
            episode_id=episode, failed_at_judgement=episode in judged,
        )  # fmt: skip
        try:
            draft = derive_task(sources[task_id], failure, state, out)
        except TrajlakeError as exc:  # (one task's draft; the others go on)
            broken += 1
            err_console.print(
                f"[red]no draft from {escape(task_id)}:[/red] {escape(str(exc))}", soft_wrap=True
            )
            continue
        drafts.append(draft)
        start = (
            "the episode's final state"
            if draft.from_episode_state
            else f"its own initial state ({draft.why_not})"
        )
        err_console.print(f"draft [bold]{escape(draft.task.id)}[/bold] from {escape(task_id)}, starting from "
                          f"{escape(start)}: {escape(str(draft.task.root))}")  # fmt: skip
    if admit and drafts:
        _admit_dirs([d.task.root for d in drafts], backend, runs, workers, lake, as_json)
    if broken:
        raise typer.Exit(code=ExitCode.FAILED)


_SHA256 = re.compile(r"[0-9a-f]{64}")
"""A blob's reference (its sha256): anything else is never opened as a path."""


@tasks_app.command("list")
def list_tasks(
    paths: Annotated[
        list[Path] | None, typer.Argument(exists=True, help="Where to look (default: ./tasks).")
    ] = None,
) -> None:
    """Task specs found under the paths (default: ./tasks), validated."""
    from judges.tasks import find_task_dirs, load_task

    where = paths or [Path("tasks")]
    dirs = find_task_dirs(where)
    if not dirs:
        fail(f"no task.yaml under {', '.join(map(str, where))}", ExitCode.USAGE)
    table = Table(title="tasks")
    for col in ("task", "family", "tier", "version", "title"):
        table.add_column(col)
    bad = 0
    for d in dirs:
        try:
            t = load_task(d)
            table.add_row(t.id, t.spec.family, t.spec.tier, t.spec.version, t.spec.title)
        except TrajlakeError as exc:
            bad += 1
            table.add_row(str(d), "-", "-", "-", f"[red]{escape(str(exc))}[/red]")
    console.print(table)
    if bad:
        raise typer.Exit(code=ExitCode.FAILED)


@tasks_app.command("generated")
def generated(
    paths: Annotated[
        list[Path], typer.Argument(exists=True, help="Task directories, or directories holding tasks.")
    ],
    seeds: Annotated[
        int, typer.Option(min=1, help="Seeds to draw (1, 2, ...; the judge's own seed is secret).")
    ] = 3,
    against: Annotated[
        Path | None,
        typer.Option(
            exists=True, file_okay=False, help="A package tree to try instead of the untouched state."
        ),
    ] = None,
    show: Annotated[int, typer.Option(min=0, help="Cases shown per seed.")] = 3,
) -> None:
    """Preview a task's generated check (for authors): what it asks, and how much of it a tree gets right.

    For tasks whose tests call the package (``bridge``), on the host: the reference's answers to
    each seed's cases, and which of them the untouched state (or ``--against``, e.g. your own
    alternative fix, which must get them all) answers the same. For tasks whose agent leaves a
    procedure, the input sets each seed draws. ``trajlake tasks admit`` runs the full checks.
    """
    from judges.generated import GeneratedCheckError, input_sets, preview_bridge
    from judges.tasks import find_task_dirs, load_task

    bad = 0
    for d in find_task_dirs(paths):
        task = load_task(d)
        gen = task.spec.generated
        if gen is None or task.generator_path is None or not task.generator_path.is_file():
            console.print(f"[yellow]{escape(task.id)}[/yellow]: no generated check")
            bad += gen is not None
            continue
        for seed in range(1, seeds + 1):
            try:
                if gen.procedure is None:
                    ref, oks = preview_bridge(task, seed, (against or task.initial_dir).resolve())
                    console.print(f"{escape(task.id)} seed {seed}: {sum(oks)}/{len(oks)} answered as the "
                                  "reference does "
                                  f"by {escape(str(against or 'the untouched state'))}")  # fmt: skip
                    for case, exp, ok in list(zip(ref.cases, ref.expected, oks, strict=True))[:show]:
                        mark = "[green]same[/green]" if ok else "[red]differs[/red]"
                        console.print(f"   {mark} {escape(repr(case)[:120])} -> {escape(repr(exp[1])[:80])}")
                else:
                    sets = input_sets(task, seed)
                    sizes = ", ".join(f"{p} {len(b)} B" for s in sets.sets for p, b in sorted(s.items()))
                    console.print(f"{escape(task.id)} seed {seed}: {len(sets.sets)} input sets "
                                  f"({escape(sizes[:300])}); "
                                  f"outputs {', '.join(sets.outputs)}")  # fmt: skip
            except GeneratedCheckError as exc:
                bad += 1
                err_console.print(f"[red]{escape(task.id)}[/red]: {escape(str(exc))}")
                break
    if bad:
        raise typer.Exit(code=ExitCode.FAILED)


golden_app = typer.Typer(help="Golden sets: cases made from reviewed episodes.", no_args_is_help=True)
judges_app.add_typer(golden_app, name="golden")


@golden_app.command("add")
def golden_add(
    from_reviews: Annotated[
        bool, typer.Option("--from-reviews", help="Make cases from the reviewed episodes (`reviews`).")
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(dir_okay=False, help="Golden file to add to (default: judges/golden/reviews.yaml)."),
    ] = None,
    verdict: Annotated[
        list[str] | None,
        typer.Option(help="Only episodes reviewed with these verdicts (ok, hack, judge_wrong)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print what was added and skipped as JSON.")
    ] = False,
) -> None:
    """Turn reviewed episodes into golden cases, so `judges verify` catches a regression next time.

    ok keeps the judge's verdict, judge_wrong expects the other one, hack expects no pass (and no
    more than doing nothing); the case replays the episode's tool calls from the task's initial state.
    """
    import pyarrow.compute as pc

    from judges.golden import GOLDEN_DIR, ReviewedEpisode, add_cases, case_from_review
    from lake import Lake, sql_literal
    from trajlake.preflight import require_lake

    if not from_reviews:
        fail("say where the cases come from: `--from-reviews` (the only source so far)", ExitCode.USAGE)
    lk: Lake = require_lake(settings().lake, ["episodes", "steps", "events"])
    if not lk.exists("reviews"):
        fail("no reviews yet: `trajlake review fill`, then verdicts through the API or "
             "`trajlake review verdict`", ExitCode.NOT_READY)  # fmt: skip
    reviews = lk.read("reviews").to_pylist()
    if verdict:
        keep = {r["episode_id"] for r in reviews if r["verdict"] in verdict}
        reviews = [r for r in reviews if r["episode_id"] in keep]
    by_episode: dict[str, list[dict[str, Any]]] = {}
    for r in reviews:
        by_episode.setdefault(r["episode_id"], []).append(r)
    ids = sorted(by_episode)
    made, skipped = [], []
    for chunk in (ids[i : i + 200] for i in range(0, len(ids), 200)):
        where = f"episode_id IN ({', '.join(sql_literal(e) for e in chunk)})"
        eps = {e["episode_id"]: e for e in lk.read("episodes", where=where).to_pylist()}
        steps = lk.read(
            "steps", where=where + " AND type = 'tool_call'", columns=["episode_id", "seq", "payload"]
        )
        rewards = lk.read("events", where=where + " AND type = 'reward'", columns=["episode_id", "payload"])
        calls: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        for s in steps.to_pylist():
            calls.setdefault(s["episode_id"], []).append((s["seq"], json.loads(s["payload"])))
        specs: dict[tuple[str, str, str], dict[str, Any]] = {}
        for e in rewards.filter(pc.is_valid(rewards["payload"])).to_pylist():
            p = json.loads(e["payload"])
            if p.get("judge_spec") is not None:
                specs[(e["episode_id"], p["judge_name"], p["judge_version"])] = p["judge_spec"]
        for eid in chunk:
            ep, rows = eps.get(eid), by_episode[eid]
            if ep is None:
                skipped.append({"episode_id": eid, "reason": "not in the episodes table"})
                continue
            judged = rows[-1]
            case, why = case_from_review(ReviewedEpisode(
                episode_id=eid, task_id=ep["task_id"], task_family=ep["task_family"],
                task_version=ep["task_version"],
                judge_spec=specs.get((eid, judged["judge_name"], judged["judge_version"])),
                judge_verdict=judged["judge_verdict"], verdicts=rows,
                tool_calls=[p for _, p in sorted(calls.get(eid, []), key=lambda c: c[0])],
            ))  # fmt: skip
            if case is None:
                skipped.append({"episode_id": eid, "reason": why})
            else:
                made.append(case)
    path = out or GOLDEN_DIR / "reviews.yaml"
    added = add_cases(path, made) if made else []
    if as_json:
        print(json.dumps({"file": str(path), "added": added, "already_there": len(made) - len(added),
                          "skipped": skipped}, indent=2))  # fmt: skip
    else:
        console.print(f"[green]{len(added)}[/green] golden cases added to {path} "
                      f"({len(made) - len(added)} already there, {len(skipped)} skipped); "
                      f"`trajlake judges verify {path}` replays them")  # fmt: skip
        for s in skipped:
            console.print(
                f"[yellow]skipped[/yellow] {s['episode_id']}: {escape(s['reason'])}", soft_wrap=True
            )


@judges_app.command("impact")
def impact(
    judge: Annotated[Any, judge_spec_option("the new judge.")],
    tasks: Annotated[
        list[Path],
        typer.Option("--tasks", exists=True, help="Task directories, or folders of them (repeatable)."),
    ],
    where: Annotated[
        str | None,
        typer.Option(help="SQL predicate over the episodes table, e.g. \"task_family = 'pyfix'\"."),
    ] = None,
    sample: Annotated[
        int | None, typer.Option(min=1, help="About this many episodes, whole groups at random.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of --sample.")] = 0,
    max_flip_rate: Annotated[
        float | None, typer.Option(min=0.0, max=1.0, help="Exit 1 when more verdicts than this share flip.")
    ] = None,
    queue: Annotated[bool, typer.Option(help="Put the flipped episodes in the review queue.")] = True,
    workers: Annotated[int, typer.Option(min=1, help="Episodes judged at once.")] = 2,
    backend: BackendOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """What a judge change would do: re-judge recorded episodes (dry run) and compare with the current one.

    Verdict flips by family, groups whose advantages change sign, groups that become constant;
    the flipped episodes enter the review queue. `--max-flip-rate X` gates the change (exit 1 above).
    """
    from ingest.blobs import BlobStore
    from judges.tasks import find_task_dirs, load_task
    from pipelines.impact import ImpactError
    from pipelines.impact import impact as run_impact
    from rollouts.runner import ROLLOUT_SPEC
    from sandboxes import SandboxPool
    from trajlake.preflight import require_backend, require_images, require_lake

    s = settings()
    lk = require_lake(s.lake, ["episodes", "rewards", "events"])
    loaded = {t.id: t for t in (load_task(d) for d in find_task_dirs(tasks))}
    if not loaded:
        fail(f"no task.yaml under {', '.join(map(str, tasks))}", ExitCode.USAGE)
    backend_ = require_backend(s, backend.value if backend else None)
    require_images(backend_, [t.spec.initial_state.image for t in loaded.values()])
    try:
        with SandboxPool(backend_, ROLLOUT_SPEC, max_size=workers) as pool, _progress() as progress:
            bar = progress.add_task("selecting episodes", total=None)
            report = run_impact(lk, loaded, pool, BlobStore(s.blobs), judge, where=where, sample=sample,
                                seed=seed, workers=workers,
                                on_selected=lambda n: progress.update(bar, total=n, description="judging"),
                                on_item=lambda i: progress.advance(bar))  # fmt: skip
    except ImpactError as exc:
        fail(str(exc), ExitCode.USAGE)
    finally:
        backend_.close()
    queued, queue_error = 0, None
    if queue and report.flips:
        try:  # the report and the gate stand without a broker; the queue waits for one
            queued = _queue_flips(report)
        except TrajlakeError as exc:
            queue_error = exc.explained()
    out = {
        "judge": {"name": report.judge_name, "version": report.judge_version},
        "selected": report.selected, "compared": len(report.compared), "skipped": dict(report.skipped),
        "errors": [{"episode_id": e.episode_id, "reason": e.reason} for e in report.errors],
        "flips": len(report.flips), "flip_rate": round(report.flip_rate, 6), "max_flip_rate": max_flip_rate,
        "by_family": report.by_family(),
        "groups": {"checked": report.groups_checked, "sign_changed": report.sign_changed,
                   "became_constant": report.became_constant},
        "flipped": [{"episode_id": c.episode_id, "task_id": c.task_id, "family": c.family,
                     "from": c.old_verdict, "to": c.new_verdict, "old_score": c.old_score,
                     "new_score": c.new_score, "old_judge": c.old_judge}
                    for c in report.flips],
        "queued_for_review": queued,
        "queue_error": queue_error,
    }  # fmt: skip
    if as_json:
        print(json.dumps(out, indent=2))
    else:
        table = Table(
            title=f"impact of {report.judge_name} {report.judge_version}: {len(report.compared)} episodes"
        )
        for col in ("family", "compared", "flips", "pass -> fail", "fail -> pass"):
            table.add_column(col)
        for fam, row in out["by_family"].items():
            table.add_row(fam, str(row["compared"]), str(row["flips"]), str(row["pass_to_fail"]),
                          str(row["fail_to_pass"]))  # fmt: skip
        console.print(table)
        console.print(f"flip rate {report.flip_rate:.1%} ({len(report.flips)} of {len(report.compared)}); "
                      f"{len(report.sign_changed)} of {report.groups_checked} groups change an advantage's "
                      f"sign, {len(report.became_constant)} become constant; {queued} flipped episodes "
                      f"queued for review; {len(report.errors)} errors, "
                      f"{sum(report.skipped.values())} skipped")  # fmt: skip
    if queue_error:
        err_console.print(f"[yellow]warning:[/yellow] the flipped episodes were not queued for review: "
                          f"{escape(queue_error)} (`--no-queue` skips the queue)")  # fmt: skip
    if max_flip_rate is not None and report.flip_rate > max_flip_rate:
        err_console.print(
            f"[red]the flip rate {report.flip_rate:.1%} is above --max-flip-rate {max_flip_rate:.1%}[/red]"
        )
        raise typer.Exit(code=ExitCode.FAILED)
    if report.errors:
        raise typer.Exit(code=ExitCode.FAILED)


def _queue_flips(report: Any) -> int:
    """Put the flipped episodes in the review queue (rule ``judge-impact``); return how many were new."""
    import datetime as dt

    from api.review import item_id
    from lake import Lake
    from schemas.control import REVIEW_ITEM, control_event
    from trajlake.loop import curate

    s = settings()
    lk = Lake(s.lake)
    have = set(lk.read("review_queue", columns=["item_id"]).column("item_id").to_pylist()) if lk.exists(
        "review_queue") else set()  # fmt: skip
    rule = f"judge-impact:{report.judge_name}@{report.judge_version}"
    now = dt.datetime.now(dt.UTC)
    fill = f"impact-{now:%Y%m%dT%H%M%S}"
    rows = [
        {"item_id": item_id(c.episode_id, rule), "episode_id": c.episode_id, "rule": rule,
         "kind": "verdict_flip",
         "reason": f"{report.judge_name} {report.judge_version} would say {c.new_verdict} "
                   f"({c.new_score:.2f}); "
                   f"{c.old_judge} says {c.old_verdict} ({c.old_score:.2f})",
         "task_id": c.task_id, "task_family": c.family, "judge_name": report.judge_name,
         "judge_version": report.judge_version, "judge_verdict": c.new_verdict, "queued_at": now,
         "fill_id": fill}
        for c in report.flips
        if item_id(c.episode_id, rule) not in have
    ]  # fmt: skip
    if rows:
        curate(s, [control_event(REVIEW_ITEM, r, "judge-impact") for r in rows])
    return len(rows)
