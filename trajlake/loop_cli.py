"""``trajlake rollout``, ``trajlake train`` and ``trajlake lineage``: the loop, one phase at a time."""

from __future__ import annotations

import json
import random
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from trajlake.options import BackendOpt, LakeOpt, LearnerBackend, PolicyOpt, TaskDirs, Workers
from trajlake.terminal import ExitCode, console, err_console, fail, settings

MetricsHostOpt = Annotated[str, typer.Option(help="Address the metrics port binds.")]


def rollout(
    tasks: TaskDirs,
    policy: PolicyOpt,
    workers: Workers = 2,
    episodes: Annotated[int, typer.Option(min=1, help="Episodes in all (tasks x group size).")] = 8,
    group_size: Annotated[
        int, typer.Option(min=1, help="Attempts per task (group-relative advantages).")
    ] = 4,
    family: Annotated[list[str] | None, typer.Option(help="Only these families.")] = None,
    tier: Annotated[list[str] | None, typer.Option(help="Only these tiers.")] = None,
    backend: BackendOpt = None,
    seed: Annotated[int, typer.Option(help="Task sampling seed.")] = 0,
    curriculum: Annotated[
        bool,
        typer.Option(
            help="Draw tasks by difficulty pool (recent pass rate) and replace constant-reward groups."
        ),
    ] = False,
    curriculum_file: Annotated[
        Path | None,
        typer.Option(exists=True, dir_okay=False, help="Pools, weights and bounds of the curriculum (YAML)."),
    ] = None,
    budget_s: Annotated[
        float | None, typer.Option(min=0.0, help="With --curriculum: seconds to spend, cheaper tiers first.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the summary and the episodes as JSON instead of a table.")
    ] = False,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=65535,
            help="Serve each worker's Prometheus metrics (spool, sandboxes, judges) on "
            "this port plus the worker's index (0: free ports, printed).",
        ),
    ] = None,
    metrics_host: MetricsHostOpt = "127.0.0.1",
) -> None:
    """Run episodes of admitted tasks with a policy, in sandboxes, recording every step to Kafka."""
    from dataclasses import replace

    from ingest.kafka_broker import require_broker
    from rollouts import TaskPool, run_rollouts, summarize
    from trajlake.loop import rollout_config
    from trajlake.preflight import require_backend, require_images

    s = settings()
    if backend is not None:
        s = s.model_copy(update={"sandbox_backend": backend.value})
    pool = TaskPool.admitted_in(tasks, s.lake, families=family, tiers=tier)
    if not len(pool):
        fail(
            f"no admitted task under {', '.join(map(str, tasks))} matches; admit them first with "
            "`trajlake tasks admit DIR`",
            ExitCode.NOT_READY,
        )
    require_broker(s.kafka_bootstrap)
    require_images(require_backend(s), [t.spec.initial_state.image for t in pool.tasks])
    n_tasks = max(1, episodes // max(1, group_size))
    rng = random.Random(seed)
    plan = None
    if curriculum or curriculum_file or budget_s is not None:
        plan = _curriculum(s, pool, curriculum_file, rng, n_tasks, group_size, budget_s)
        assignments = plan.first()
    else:
        assignments = pool.sample(n_tasks, group_size, rng=rng, tag="rollout")[:episodes]
    cfg = rollout_config(s, policy, workers=workers)
    if metrics_port is not None:  # served by each worker process: the work and its metrics are there
        cfg = replace(cfg, metrics_port=metrics_port, metrics_host=metrics_host,
                      metrics_server="infra.metrics:serve_metrics")  # fmt: skip
    outcomes: list[Any] = []
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
    ) as progress:
        bar = progress.add_task("episodes", total=len(assignments))

        def show(o: Any) -> None:
            outcomes.append(o)
            progress.update(bar, advance=1, description=f"{o.task_id}: {o.status}")

        while assignments:
            before = len(outcomes)
            run_rollouts(cfg, assignments, on_outcome=show, on_metrics=progress.console.print)
            assignments = plan.refill(outcomes[before:]) if plan is not None else []
            progress.update(bar, total=len(outcomes) + len(assignments))
    summary = summarize(outcomes)
    extra = {"curriculum": plan.report()} if plan is not None else {}
    if as_json:
        print(json.dumps({"summary": summary.as_dict(), **extra, "episodes": [asdict(o) for o in outcomes]},
                         indent=2))  # fmt: skip
    else:
        table = Table(title=f"{len(outcomes)} episodes, policy {policy}")
        for col in ("task", "group", "status", "verdict", "score", "steps", "seconds"):
            table.add_column(col)
        for o in outcomes:
            table.add_row(
                o.task_id,
                (o.group_id or "")[-12:],
                o.status,
                str(o.verdict),
                f"{o.score:.2f}" if o.score is not None else "-",
                str(o.steps),
                f"{o.duration_s:.1f}",
            )
        console.print(table)
        if plan is not None:
            r = plan.report()
            pools = ", ".join(f"{k} {v}" for k, v in sorted(r["pools"].items()))
            console.print(f"curriculum: tasks by pool {pools}; {r['constant_groups']} constant-reward "
                          f"groups, {r['refilled']} replaced (bound {r['max_refills']}), "
                          f"{r['unreplaced']} not")  # fmt: skip
        if summary.model_calls:
            console.print(
                f"{summary.model_calls} model calls, {summary.history_breaks} broke the token history "
                f"({summary.history_break_share:.0%}; warning above {summary.history_break_threshold:.0%})"
            )
    if summary.history_break_warning:
        calls, breaks, share = summary.model_calls, summary.history_breaks, summary.history_break_share
        err_console.print(
            f"[yellow]warning:[/yellow] {breaks} of {calls} model calls ({share:.0%}) had a "
            "prompt that did not continue the conversation's token history, so their episodes train as "
            "several sequences; send prompts as ids (`tokenizer=DIR` in the openai policy spec: token in/out)"
        )


class _Curriculum:
    """The rounds of a curriculum rollout: the first draw, then replacements of constant groups."""

    def __init__(
        self, sampler: Any, rng: random.Random, n_tasks: int, group_size: int, budget_s: float | None
    ):
        from rollouts.curriculum import assignments

        self.sampler, self.rng, self.group_size = sampler, rng, group_size
        self.max_refills = sampler.config.max_refills
        self.choices = sampler.draw(n_tasks, rng, budget_s=budget_s, group_size=group_size)
        self.budget_left = (
            None if budget_s is None else budget_s - sum(c.cost_s * group_size for c in self.choices)
        )
        self.used = {c.task.id for c in self.choices}
        self.round = 0
        self.constant = self.refilled = self.unreplaced = 0
        self._first = assignments(self.choices, group_size, rng, tag="rollout")

    def first(self) -> list[Any]:
        return self._first

    def refill(self, outcomes: list[Any]) -> list[Any]:
        """Fresh tasks for this round's constant-reward groups, within the bound (counted)."""
        from rollouts.curriculum import assignments, constant_groups

        flat = constant_groups(outcomes)
        self.constant += len(flat)
        room = self.max_refills - self.refilled
        new = self.sampler.draw(min(len(flat), max(0, room)), self.rng, exclude=self.used,
                                group_size=self.group_size, budget_s=self.budget_left)  # fmt: skip
        if self.budget_left is not None:  # replacements are spent from the same budget
            self.budget_left -= sum(c.cost_s * self.group_size for c in new)
        self.unreplaced += len(flat) - len(new)
        if not new:
            return []
        self.round += 1
        self.refilled += len(new)
        self.used |= {c.task.id for c in new}
        self.choices += new
        replaces = {c.task.id: g for c, g in zip(new, flat, strict=False)}
        return assignments(
            new, self.group_size, self.rng, tag="rollout", round_=self.round, replaces=replaces
        )

    def report(self) -> dict[str, Any]:
        from collections import Counter

        return {"pools": dict(Counter(c.pool for c in self.choices)), "constant_groups": self.constant,
                "refilled": self.refilled, "unreplaced": self.unreplaced, "max_refills": self.max_refills,
                "rounds": self.round + 1,
                "choices": [{"task_id": c.task.id, "pool": c.pool, "pass_rate": c.rate, "reason": c.reason}
                            for c in self.choices]}  # fmt: skip


def _curriculum(s: Any, pool: Any, path: Path | None, rng: random.Random, n_tasks: int, group_size: int,
                budget_s: float | None) -> _Curriculum:  # fmt: skip
    from lake import Lake
    from rollouts.curriculum import CurriculumConfig, CurriculumError, CurriculumSampler, task_stats

    try:
        config = CurriculumConfig.load(path)
    except CurriculumError as exc:
        fail(str(exc), ExitCode.USAGE)
    lk = Lake(s.lake)
    stats = {}
    if lk.exists("episodes") and lk.exists("rewards"):
        stats = task_stats(lk.read("episodes"), lk.read("rewards"), recent_versions=config.recent_versions)
    plan = _Curriculum(CurriculumSampler(pool.tasks, stats, config), rng, n_tasks, group_size, budget_s)
    if not plan.choices:
        fail(f"no task fits: the budget of {budget_s:.0f}s is below the cheapest task's group" if budget_s
             else "no task has a pool with a weight above 0 in the curriculum", ExitCode.USAGE)  # fmt: skip
    return plan


def train(
    judge: Annotated[str, typer.Option(help="Judge whose rewards are the signal.")] = "composite",
    judge_version: Annotated[
        str | None, typer.Option(help="Pinned judge version (default: most common).")
    ] = None,
    backend: Annotated[LearnerBackend, typer.Option(help="Learner framework.")] = LearnerBackend.torch,
    parent: Annotated[
        Path | None, typer.Option(exists=True, file_okay=False, help="Checkpoint directory to continue from.")
    ] = None,
    task: Annotated[list[str] | None, typer.Option(help="Only these task ids.")] = None,
    family: Annotated[list[str] | None, typer.Option(help="Only tasks of these families.")] = None,
    epochs: Annotated[int, typer.Option(min=1, help="Passes over the new samples.")] = 2,
    batch_size: Annotated[int, typer.Option(min=1, help="Minibatch size.")] = 32,
    micro_batch_size: Annotated[
        int | None,
        typer.Option(min=1, help="Samples per forward/backward; gradients accumulate over a minibatch."),
    ] = None,
    lr: Annotated[float, typer.Option(min=0.0, help="Learning rate.")] = 3e-4,
    kl_coef: Annotated[float, typer.Option(min=0.0, help="KL penalty to the reference (0: none).")] = 0.0,
    kl_reference: Annotated[
        Path | None,
        typer.Option(
            exists=True,
            file_okay=False,
            help="A checkpoint held fixed as the KL reference "
            "(default: the parent, the parameters the step starts from).",
        ),
    ] = None,
    clip_high: Annotated[
        float | None,
        typer.Option(min=0.0, help="Clip-higher: the ratio's upper epsilon (default: the lower)."),
    ] = None,
    std_norm: Annotated[
        bool, typer.Option(help="Divide group-centred rewards by the group's std (--no-std-norm: Dr. GRPO).")
    ] = True,
    full: Annotated[
        bool, typer.Option(help="Read every episode, not only those new since the parent.")
    ] = False,
    device: Annotated[str, typer.Option(help="auto | cpu | cuda[:N] (torch).")] = "auto",
    hf_model: Annotated[
        Path | None,
        typer.Option(
            exists=True, file_okay=False, help="A local Hugging Face causal LM to start from (torch)."
        ),
    ] = None,
    group_wait_s: Annotated[
        float | None,
        typer.Option(
            min=0.0, help="Drop a group not whole this long after its first member ended (log time)."
        ),
    ] = 3600.0,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=65535,
            help="Serve Prometheus metrics (step and data-wait time, exclusions, log-prob mismatch) "
            "on this port.",
        ),
    ] = None,
    metrics_host: MetricsHostOpt = "127.0.0.1",
) -> None:
    """One learner step from the lake at pinned versions -> a checkpoint with lineage."""
    from ingest.kafka_broker import require_broker
    from learners.checkpoints import publish_checkpoint
    from learners.trainer import TrainArgs
    from learners.trainer import train as run_train
    from pipelines import run_once
    from schemas.errors import TrajlakeError
    from trajlake.preflight import require_lake

    s = settings()
    require_lake(s.lake, ["episodes", "rewards", "samples"])
    require_broker(s.kafka_bootstrap)  # the checkpoint's lineage goes to the log: fail before training
    args = TrainArgs(
        lake=str(Path(s.lake).resolve()),
        checkpoint_root=str(Path(s.checkpoints).resolve()),
        judge_name=judge,
        judge_version=judge_version,
        parent=str(parent) if parent else None,
        backend=backend.value,
        task_ids=task,
        families=family,
        epochs=epochs,
        batch_size=batch_size,
        micro_batch_size=micro_batch_size,
        lr=lr,
        kl_coef=kl_coef,
        kl_reference=str(kl_reference) if kl_reference else None,
        clip_eps_high=clip_high,
        scale_advantages=std_norm,
        incremental=not full,
        device=device,
        hf_model=str(hf_model) if hf_model else None,
        max_group_wait_s=group_wait_s,
    )
    if metrics_port is not None:
        from infra.metrics import serve_metrics

        bound = serve_metrics(metrics_port, metrics_host)
        err_console.print(f"metrics on http://{metrics_host}:{bound}/metrics")
    with Progress(TextColumn("{task.description}"), TimeElapsedColumn(), console=err_console) as progress:
        bar = progress.add_task("training", total=None)

        def show(row: dict[str, float]) -> None:
            progress.update(
                bar,
                description=f"step {row['step']}: loss {row['loss']:.4f} "
                f"kl {row.get('kl', 0):.4f} clip {row.get('clip_frac', 0):.2f}",
            )

        res = run_train(args, on_step=show)
    if res.checkpoint is None:
        fail(f"no new samples to learn from in {s.lake} (judge {judge}); record episodes with "
             "`trajlake rollout` and fold them with `trajlake pipeline run --once`")  # fmt: skip
    info = res.checkpoint
    try:
        publish_checkpoint(s.kafka_bootstrap, s.topic_learner, info)
    except TrajlakeError as exc:
        fail(f"checkpoint {info.checkpoint_id} is saved at {info.path} but its lineage is not in the log "
             f"({exc}); once the broker answers, `trajlake publish-checkpoint {info.path}` records it",
             ExitCode.NOT_READY)  # fmt: skip
    run_once(s.pipeline_config())  # the checkpoints table gets its row now
    console.print(f"[green]{info.checkpoint_id}[/green] at {info.path}")
    console.print(
        f"{res.samples} samples, mean reward {res.mean_reward:.3f}, {len(res.metrics)} steps in "
        f"{res.seconds:.1f}s; tables {info.lineage.table_versions}; judge {info.lineage.judge_name} "
        f"{info.lineage.judge_version}; metrics {info.path}/metrics.jsonl"
    )


def publish_checkpoint(
    path: Annotated[Path, typer.Argument(exists=True, file_okay=False, help="A checkpoint directory.")],
) -> None:
    """Put a saved checkpoint's lineage in the log (again: the table keeps one row per id); fold it."""
    from ingest.kafka_broker import require_broker
    from learners.checkpoints import load_checkpoint
    from learners.checkpoints import publish_checkpoint as publish
    from pipelines import run_once

    s = settings()
    if not (path / "meta.json").is_file():
        fail(f"{path} is not a checkpoint directory (it has no meta.json)", ExitCode.USAGE)
    info, _, _ = load_checkpoint(path)
    require_broker(s.kafka_bootstrap)
    publish(s.kafka_bootstrap, s.topic_learner, info)
    run_once(s.pipeline_config())
    console.print(f"[green]{info.checkpoint_id}[/green] published to {s.topic_learner} and folded")


def lineage(
    checkpoint: Annotated[str | None, typer.Argument(help="Checkpoint id (or `latest`).")] = None,
    impacted_by: Annotated[
        str | None,
        typer.Option(help="A retraction id: the checkpoints that trained on what it names, transitively."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the chain as JSON.")] = False,
) -> None:
    """The chain from a checkpoint back to the data, tables and judges that produced it."""
    from learners.checkpoints import lineage_chain, read_checkpoints

    lake = Path(settings().lake)
    if (checkpoint is None) == (impacted_by is None):
        fail("give a CHECKPOINT (its chain) or --impacted-by RETRACTION (what trained on it), one of them",
             ExitCode.USAGE)  # fmt: skip
    if impacted_by is not None:
        from learners.retractions import impacted_checkpoints
        from trajlake.retract_cli import _print_impacted

        try:
            impacted = impacted_checkpoints(lake, impacted_by)
        except KeyError:
            fail(
                f"no retraction {impacted_by!r} in {lake}/retractions; `trajlake retract` makes one",
                ExitCode.USAGE,
            )
        if as_json:
            print(json.dumps(impacted, default=str, indent=2))
        else:
            _print_impacted(impacted, impacted_by)
        return
    assert checkpoint is not None
    if checkpoint == "latest":
        rows = read_checkpoints(lake)
        if not rows:
            fail(
                f"no checkpoints in {lake}/checkpoints yet; `trajlake train` (or `trajlake demo`) makes them",
                ExitCode.NOT_READY,
            )
        checkpoint = max(rows.values(), key=lambda r: r["created_at"])["checkpoint_id"]
    chain = lineage_chain(lake, checkpoint)
    for r in chain:  # what each step selected (lake, judge, task filter, bounds), from its metrics
        r["selection"] = json.loads(r.get("metrics") or "{}").get("selection")
    if as_json:
        print(json.dumps(chain, default=str, indent=2))
        return
    table = Table(title=f"lineage of {checkpoint}")
    for col in (
        "checkpoint",
        "created",
        "backend",
        "samples",
        "excluded",
        "table versions",
        "judge",
        "parent",
    ):
        table.add_column(col)
    for r in chain:
        metrics = json.loads(r["metrics"] or "{}")
        excluded = metrics.get("samples_excluded", metrics.get("skipped")) or {}
        history = metrics.get("token_history") or {}
        joined = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(history.items()))
        table.add_row(
            r["checkpoint_id"],
            str(r["created_at"])[:19],
            r["backend"],
            str(r["num_samples"]) + (f" ({joined})" if joined else ""),
            ", ".join(f"{k} {v}" for k, v in sorted(excluded.items())) or "-",
            r["table_versions"] if r["table_versions"] != "{}" else metrics.get("note", "-"),
            f"{r['judge_name']} {r['judge_version']}" if r["judge_name"] else "-",
            r["parent_id"] or "-",
        )
    console.print(table)
    for line in excluded:
        console.print(line, soft_wrap=True)


class ExportFormat(StrEnum):
    """Trainer formats ``trajlake export`` writes."""

    verl = "verl"
    trl = "trl"
    openrlhf = "openrlhf"
    hf = "hf"


def export(
    fmt: Annotated[
        ExportFormat, typer.Option("--format", help="verl | trl | openrlhf | hf (a datasets directory).")
    ],
    out: Annotated[Path, typer.Option(help="New directory to write the export and its lineage.json into.")],
    judge: Annotated[
        str | None, typer.Option(help="Judge whose rewards label the samples (default: the most common).")
    ] = None,
    judge_version: Annotated[
        str | None, typer.Option(help="Pinned judge version (default: most common).")
    ] = None,
    task: Annotated[list[str] | None, typer.Option(help="Only these task ids.")] = None,
    family: Annotated[list[str] | None, typer.Option(help="Only these task families.")] = None,
    lake: LakeOpt = None,
) -> None:
    """Export the trainable samples of the lake, at one consistent snapshot, for another trainer."""
    from collections import Counter

    from lake import Lake
    from learners.dataset import DatasetSpec
    from learners.export import export_dataset
    from trajlake.preflight import require_lake

    root = Path(lake or settings().lake)
    require_lake(root, ["episodes", "rewards", "samples"])
    if judge is None:
        names = Lake(root).read("rewards").column("judge_name").to_pylist()
        if not names:
            fail(f"the rewards table of {root} is empty: nothing is scored yet, so nothing can be exported")
        judge = Counter(names).most_common(1)[0][0]
    if (out / "lineage.json").exists():
        fail(f"{out} already holds an export; give a new --out directory", ExitCode.USAGE)
    spec = DatasetSpec(
        lake=str(root.resolve()),
        judge_name=judge,
        judge_version=judge_version,
        task_ids=frozenset(task) if task else None,
        families=frozenset(family) if family else None,
    )
    from sandboxes.tools import TOOLS
    from trajlake import verl_reward

    lineage = export_dataset(
        spec, fmt.value, out, tools=TOOLS,
        reward_function={"path": str(Path(verl_reward.__file__).resolve()), "name": "compute_score"},
    )  # fmt: skip
    excluded = ", ".join(f"{k} {v}" for k, v in sorted(lineage["samples_excluded"].items())) or "none"
    console.print(
        f"[green]{lineage['rows']}[/green] samples of {lineage['episodes']} episodes -> {out} ({fmt.value}); "
        f"tables {lineage['table_versions']}, judge {judge} {lineage['judge_version']}; excluded: {excluded}"
    )
