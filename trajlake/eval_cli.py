"""``trajlake eval``: an evaluation run, independent of training, with pass@k and intervals.

An evaluation samples only the ``eval`` split (training never samples it), runs
K attempts per task with a policy, and records them like any rollout but with
``source: eval`` on ``episode_started``: the episodes table says so and no
dataset trains on them. The evaluation judge may differ from each task's
training judge; the episodes are then judged again by it from their archived
final states (a re-judge, so both verdicts are events), and the report gives the
gap between the two judges on the same episodes.
"""

from __future__ import annotations

import json
import random
import uuid
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from trajlake.options import BackendOpt, TaskDirs, Workers, check_policy, judge_spec_option
from trajlake.terminal import ExitCode, console, err_console, fail, settings


class EvalSplit(StrEnum):
    """Which tasks an evaluation samples."""

    eval = "eval"
    train = "train"
    all = "all"


def _policy_of_checkpoint(lake: Path, checkpoint: str) -> str:
    """The ``local:`` policy spec of a checkpoint id (or ``latest``) of the lake's ``checkpoints`` table."""
    from learners.checkpoints import read_checkpoints

    rows = read_checkpoints(lake)
    if not rows:
        fail(f"no checkpoints in {lake}/checkpoints yet; `trajlake train` makes them", ExitCode.NOT_READY)
    if checkpoint == "latest":
        checkpoint = max(rows.values(), key=lambda r: r["created_at"])["checkpoint_id"]
    if checkpoint not in rows:
        fail(f"no checkpoint {checkpoint!r} in {lake}/checkpoints; `trajlake lineage latest` names "
             "the newest", ExitCode.USAGE)  # fmt: skip
    return f"local:{rows[checkpoint]['path']}"


def evaluate(
    tasks: TaskDirs,
    checkpoint: Annotated[
        str | None, typer.Argument(help="A checkpoint id, or `latest` (instead of --policy).")
    ] = None,
    policy: Annotated[
        str | None,
        typer.Option(
            callback=check_policy,
            help="The policy to evaluate: scripted:reference | scripted:FILE.yaml | openai:URL#MODEL | "
            "local:CHECKPOINT_DIR[?k=v&...].",
        ),
    ] = None,
    samples: Annotated[int, typer.Option(min=1, help="Attempts per task (K of pass@K).")] = 1,
    judge: Annotated[
        Any, judge_spec_option("the evaluation judge (default: each task's own, training, judge).")
    ] = None,
    against: Annotated[
        str | None,
        typer.Option(
            callback=check_policy,
            help="A second policy run on the same tasks: the report adds the paired difference.",
        ),
    ] = None,
    split: Annotated[
        EvalSplit, typer.Option(help="Tasks of this split (training never samples `eval`).")
    ] = EvalSplit.eval,
    family: Annotated[list[str] | None, typer.Option(help="Only these families.")] = None,
    workers: Workers = 2,
    backend: BackendOpt = None,
    seed: Annotated[int, typer.Option(help="Group ids and policy seeds.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Evaluate a policy on the eval split: pass@1 (and pass@K) with 95% intervals, as eval episodes."""
    from ingest.kafka_broker import require_broker
    from judges import build_judge
    from rollouts import TaskPool
    from trajlake.loop import fold_log
    from trajlake.preflight import require_backend, require_images

    s = settings()
    if backend is not None:
        s = s.model_copy(update={"sandbox_backend": backend.value})
    lake = Path(s.lake)
    if (checkpoint is None) == (policy is None):
        fail("name the policy to evaluate once: a CHECKPOINT id or --policy SPEC", ExitCode.USAGE)
    spec = policy if policy is not None else _policy_of_checkpoint(lake, str(checkpoint))
    chosen = None if split is EvalSplit.all else split.value
    pool = TaskPool.admitted_in(tasks, lake, split=chosen, families=family)
    if not len(pool):
        every = TaskPool.admitted_in(tasks, lake, split=None, families=family)
        where = ", ".join(map(str, tasks))
        if not len(every):
            fail(f"no admitted task under {where}; admit them first with `trajlake tasks admit DIR`",
                 ExitCode.NOT_READY)  # fmt: skip
        fail(f"none of the {len(every)} admitted tasks under {where} is in the {split.value} split; "
             "`--split all` evaluates them anyway (training never samples eval tasks)",
             ExitCode.NOT_READY)  # fmt: skip
    require_broker(s.kafka_bootstrap)
    require_images(require_backend(s), [t.spec.initial_state.image for t in pool.tasks])
    run_id = uuid.uuid4().hex[:12]
    eval_judge = build_judge(judge) if judge is not None else None
    runs = {"policy": spec, **({"against": against} if against else {})}
    outcomes: dict[str, list[Any]] = {}
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console) as progress:  # fmt: skip
        for role, policy_spec in runs.items():
            outcomes[role] = _run(s, pool, policy_spec, samples=samples, workers=workers, seed=seed,
                                  run_id=run_id, role=role, progress=progress)  # fmt: skip
        bar = progress.add_task("folding the episodes into the lake", total=None)
        fold_log(s)
        if eval_judge is not None:
            ids = [o.episode_id for os_ in outcomes.values() for o in os_]
            progress.update(bar, description=f"judging again with {eval_judge.name} {eval_judge.version}")
            _rejudge(s, pool, judge, ids, workers=workers)
            fold_log(s)
        progress.remove_task(bar)
    reports = {role: _report(lake, pool, outs, eval_judge, samples) for role, outs in outcomes.items()}
    main = reports["policy"]
    out: dict[str, Any] = {**main, "run_id": run_id, "policy": spec, "split": split.value}
    if against:
        from learners.evaluation import paired_difference

        diff = paired_difference(main["_per_task"], reports["against"]["_per_task"])
        other = {k: v for k, v in reports["against"].items() if not k.startswith("_")}
        out["comparison"] = {"policy": against, **other, "difference": diff.as_dict()}
    out.pop("_per_task")
    if as_json:
        print(json.dumps(out, indent=2, default=str))
    else:
        _print(out)
    if not main["n"]:
        fail(f"no episode of run {run_id} was judged ({main['infra_errors']} infrastructure errors, "
             f"{main['unjudged']} without the evaluation judge's verdict); `trajlake events read` shows them",
             ExitCode.FAILED)  # fmt: skip


def _run(s: Any, pool: Any, policy_spec: str, *, samples: int, workers: int, seed: int, run_id: str,
         role: str, progress: Any) -> list[Any]:  # fmt: skip
    """K attempts at every task of the pool by one policy, recorded as eval episodes."""
    from rollouts import group_assignments, run_rollouts
    from trajlake.loop import rollout_config

    assignments = group_assignments(pool.tasks, samples, rng=random.Random(seed), tag=f"eval-{run_id}")
    cfg = rollout_config(s, policy_spec, workers=workers,
                         metadata={"source": "eval", "eval_run": run_id, "eval_role": role})  # fmt: skip
    bar = progress.add_task(f"{role}: episodes", total=len(assignments))
    outs: list[Any] = []

    def show(o: Any) -> None:
        outs.append(o)
        progress.update(bar, advance=1, description=f"{role}: {o.task_id} {o.status}")

    run_rollouts(cfg, assignments, on_outcome=show)
    return outs


def _rejudge(s: Any, pool: Any, judge_spec: dict[str, Any], episode_ids: list[str], *, workers: int) -> None:
    """Score these episodes with the evaluation judge (from their archived final states), as events."""
    from ingest.blobs import BlobStore
    from ingest.kafka_sink import KafkaSink, KafkaSinkConfig
    from lake import Lake
    from pipelines.rejudge import RejudgeSelection
    from pipelines.rejudge import rejudge as run_rejudge
    from rollouts.runner import ROLLOUT_SPEC
    from sandboxes.pool import SandboxPool
    from trajlake.preflight import require_backend

    backend = require_backend(s)
    sink = KafkaSink(KafkaSinkConfig(bootstrap_servers=s.kafka_bootstrap, client_id="trajlake-eval"))
    try:
        with SandboxPool(backend, ROLLOUT_SPEC, max_size=max(1, workers)) as sandboxes:
            run_rejudge(Lake(s.lake), pool.by_id(), sandboxes, sink, BlobStore(s.blobs),
                        topic=s.topic_judgements, judge_spec=judge_spec, workers=workers,
                        selection=RejudgeSelection(episode_ids=tuple(episode_ids)))  # fmt: skip
    finally:
        sink.close()
        backend.close()


def _report(lake: Path, pool: Any, outcomes: list[Any], eval_judge: Any, samples: int) -> dict[str, Any]:
    """pass@1 (and pass@K) of these episodes by the evaluation judge, and the training judge's on the same."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from judges import build_judge
    from lake import Lake
    from learners.evaluation import pass_at_k

    lk = Lake(lake)
    ids = pa.array([o.episode_id for o in outcomes], type=pa.string())
    eps = lk.read("episodes", columns=["episode_id", "task_id", "status"])
    eps = {r["episode_id"]: r for r in eps.filter(pc.is_in(eps["episode_id"], value_set=ids)).to_pylist()}
    rw = lk.read("rewards", columns=["episode_id", "judge_name", "judge_version", "verdict"])
    verdicts = {
        (r["episode_id"], r["judge_name"], r["judge_version"]): r["verdict"]
        for r in rw.filter(pc.is_in(rw["episode_id"], value_set=ids)).to_pylist()
    }
    tasks = pool.by_id()
    training = {tid: build_judge(t.spec.judge) for tid, t in tasks.items()}
    per_task: dict[str, list[int]] = {}
    per_task_training: dict[str, list[int]] = {}
    per_task_both: dict[str, list[int]] = {}  # the evaluation judge on the episodes both judged
    rows, infra, unjudged, disagree = [], 0, 0, 0
    for o in outcomes:
        ep = eps.get(o.episode_id)
        status = ep["status"] if ep else o.status
        tj = training[o.task_id]
        ej = eval_judge or tj
        verdict = verdicts.get((o.episode_id, ej.name, ej.version))
        trained_verdict = verdicts.get((o.episode_id, tj.name, tj.version))
        rows.append({"episode_id": o.episode_id, "task_id": o.task_id, "status": status, "verdict": verdict,
                     "training_verdict": trained_verdict, "steps": o.steps})  # fmt: skip
        if status in ("infra_error", "aborted"):
            infra += 1  # the platform's failure, not the policy's: left out of n, and reported
            continue
        if verdict is None:
            unjudged += 1
            continue
        c = per_task.setdefault(o.task_id, [0, 0])
        c[0] += verdict == "pass"  # a judge error is no pass
        c[1] += 1
        if trained_verdict is not None:
            t = per_task_training.setdefault(o.task_id, [0, 0])
            t[0] += trained_verdict == "pass"
            t[1] += 1
            b = per_task_both.setdefault(o.task_id, [0, 0])
            b[0] += verdict == "pass"
            b[1] += 1
            disagree += (trained_verdict == "pass") != (verdict == "pass")
    p1 = pass_at_k([tuple(v) for v in per_task.values()], 1)  # type: ignore[misc]
    tp1 = pass_at_k([tuple(v) for v in per_task_training.values()], 1)  # type: ignore[misc]
    same = pass_at_k([tuple(v) for v in per_task_both.values()], 1)  # type: ignore[misc]
    names = sorted({(j.name, j.version) for j in training.values()})
    shown = (eval_judge.name, eval_judge.version) if eval_judge else (names[0] if len(names) == 1 else None)
    report: dict[str, Any] = {
        "pass_at_1": round(p1.value, 6),
        "ci_low": round(p1.low, 6),
        "ci_high": round(p1.high, 6),
        "n": p1.n,
        "tasks": p1.tasks,
        "samples_per_task": samples,
        "judge": {"name": shown[0], "version": shown[1]} if shown else "each task's own",
        "training_judge": {
            "judges": [{"name": n, "version": v} for n, v in names],
            "pass_at_1": round(tp1.value, 6),
            "ci_low": round(tp1.low, 6),
            "ci_high": round(tp1.high, 6),
            "n": tp1.n,
        },  # fmt: skip
        "judge_gap": round(tp1.value - same.value, 6),  # on the same episodes
        "judge_disagreements": disagree,
        "infra_errors": infra,
        "unjudged": unjudged,
        "policy_versions": sorted({o.policy_version for o in outcomes}),
        "episodes": rows,
        "_per_task": {k: (v[0], v[1]) for k, v in per_task.items()},
    }
    if samples > 1:
        pk = pass_at_k([tuple(v) for v in per_task.values()], samples)  # type: ignore[misc]
        short = sum(1 for v in per_task.values() if v[1] < samples)
        report["pass_at_k"] = {"k": samples, **pk.as_dict(), "tasks_with_fewer_samples": short}
    return report


def _print(out: dict[str, Any]) -> None:
    table = Table(title=f"evaluation {out['run_id']}: {escape(out['policy'])} on the {out['split']} split")
    for col in ("task", "episode", "status", "verdict", "training judge"):
        table.add_column(col)
    for r in out["episodes"]:
        table.add_row(r["task_id"], r["episode_id"][-12:], r["status"] or "-", r["verdict"] or "-",
                      r["training_verdict"] or "-")  # fmt: skip
    console.print(table)
    tj = out["training_judge"]
    console.print(
        f"pass@1 [bold]{out['pass_at_1']:.1%}[/bold] [{out['ci_low']:.1%}, {out['ci_high']:.1%}] "
        f"(95%; n={out['n']}, {out['tasks']} tasks); training judge {tj['pass_at_1']:.1%}, "
        f"gap {out['judge_gap']:+.1%}, {out['judge_disagreements']} disagreements; "
        f"{out['infra_errors']} infrastructure errors, {out['unjudged']} unjudged"
    )
    if "pass_at_k" in out:
        pk = out["pass_at_k"]
        console.print(f"pass@{pk['k']} {pk['value']:.1%} [{pk['ci_low']:.1%}, {pk['ci_high']:.1%}]")
    if "comparison" in out:
        c, d = out["comparison"], out["comparison"]["difference"]
        console.print(
            f"against {escape(c['policy'])}: pass@1 {c['pass_at_1']:.1%}; paired difference (it minus this) "
            f"{d['value']:+.1%} [{d['ci_low']:+.1%}, {d['ci_high']:+.1%}] over {d['tasks']} tasks"
        )
