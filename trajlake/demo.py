"""``trajlake demo``: the closed loop on the embedded default, end to end, as a measurement.

1. The embedded Kafka broker comes up.
2. The ``reverse`` family is generated (``tasks/reverse/make_tasks.py``: random 6-letter
   strings to write reversed, a training split and 200 held-out tasks) and admitted (real
   sandboxes, the real ``answer`` judge) into the ``tasks`` table through the log.
3. A supervised warm start on synthetic strings (never a task's) that are mostly 3-4
   letters long: it stops as soon as it solves 20% of 100 synthetic 6-letter validation
   strings greedily (checked every 5 steps), so the long strings are a skill it mostly lacks.
4. Iterations: the current checkpoint is evaluated on every held-out task twice (greedy
   and sampled); it acts in groups (at T=0.7) on the next training tasks in rollout worker processes
   acting in sandboxes (groups whose episodes all scored the same are refilled with new
   tasks, a bounded number of times, and counted); every step is an event in Kafka; the
   Beam pipeline folds the log into Delta; the learner reads exactly the new episodes at
   pinned table versions and takes policy-gradient steps (group-relative advantages,
   constant-reward groups left out, clipped importance weights from the recorded
   behaviour log-probabilities, Adam's state carried across iterations); the new
   checkpoint and its lineage go to the log and the ``checkpoints`` table.
5. A summary: success per iteration with 95% Wilson intervals (greedy and sampled), the
   final-minus-first difference with its interval, failures by category, the learning
   curve as a PNG and ``demo_summary.json``. The demo succeeds only when the lower bound
   of the greedy final-minus-first interval is above 0.
6. The final evaluation is judged again by a looser version of the judge, through the log.
"""

from __future__ import annotations

import importlib.util
import json
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ingest.kafka_broker import EmbeddedKafka

if TYPE_CHECKING:
    from judges.tasks import Task
    from rollouts import EpisodeOutcome
    from trajlake.settings import Settings

FAMILY_SOURCE = Path(__file__).resolve().parents[1] / "tasks" / "reverse"


def family_file(name: str) -> Any:
    """``tasks/reverse/<name>.py`` as a module (the family's generator, its experiment)."""
    spec = importlib.util.spec_from_file_location(f"trajlake_reverse_{name}", FAMILY_SOURCE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


experiment = family_file("experiment")
"""The reverse family's experiment (``tasks/reverse/experiment.py``): its data, evaluation and settings."""
WARM_LENGTHS, WARM_LONG_FRACTION = experiment.WARM_LENGTHS, experiment.WARM_LONG_FRACTION
WARM_STOP_SUCCESS, WARM_CHECK_EVERY = experiment.WARM_STOP_SUCCESS, experiment.WARM_CHECK_EVERY
ITERATIONS, TASKS_PER_ITERATION, TRAIN_TASKS = (
    experiment.ITERATIONS,
    experiment.TASKS_PER_ITERATION,
    experiment.TRAIN_TASKS,
)
GROUP_SIZE, TRAIN_TEMPERATURE, REFILL_ROUNDS = (
    experiment.GROUP_SIZE,
    experiment.TRAIN_TEMPERATURE,
    experiment.REFILL_ROUNDS,
)
RL_HYPERPARAMETERS: dict[str, Any] = experiment.RL_HYPERPARAMETERS
prompt_of, warm_data, greedy_success = experiment.prompt_of, experiment.warm_data, experiment.greedy_success


def family_module() -> Any:
    """``tasks/reverse/make_tasks.py`` as a module (the family's generator)."""
    return family_file("make_tasks")


def plot_curves(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    """Held-out success per iteration, greedy and sampled, with their 95% intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    it = [r["iteration"] for r in rows]
    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=120)
    for key, fmt, label in (("eval", "o-", "greedy"), ("sampled", "s--", "sampled (T=1)")):
        p = [r[f"{key}_success"] for r in rows]
        ax.errorbar(
            [i + (0.04 if key == "sampled" else 0) for i in it], p,
            yerr=[[v - r[f"{key}_ci_low"] for v, r in zip(p, rows, strict=True)],
                  [r[f"{key}_ci_high"] - v for v, r in zip(p, rows, strict=True)]],
            fmt=fmt, capsize=3, label=f"held-out success, {label} (95% Wilson, n={rows[0][key + '_n']})",
        )  # fmt: skip
    train = [(r["iteration"], r["train_reward"]) for r in rows if r.get("train_reward") is not None]
    if train:
        ax.plot([t[0] for t in train], [t[1] for t in train], "^:", label="training mean reward (sampled)")
    ax.set_xlabel("iteration (checkpoint)")
    ax.set_xticks(it)
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _constant_groups(outcomes: Sequence[EpisodeOutcome]) -> set[str]:
    """Groups whose scored episodes all got one score (nothing to learn from in them)."""
    scores: dict[str, set[float]] = {}
    for o in outcomes:
        if o.group_id is not None and o.score is not None:
            scores.setdefault(o.group_id, set()).add(round(o.score, 9))
    return {g for g, s in scores.items() if len(s) == 1}


def _row(it: int, checkpoint: str, parts: dict[str, Any]) -> dict[str, Any]:
    """One iteration's numbers: ``parts`` maps ``eval``/``sampled``/``train`` to split metrics."""
    row: dict[str, Any] = {"iteration": it, "checkpoint": checkpoint, "episodes": 0, "infra_errors": 0}
    for key in ("eval", "sampled"):
        m = parts[key]
        low, high = m.interval()
        row |= {f"{key}_success": m.success_rate, f"{key}_successes": m.successes, f"{key}_n": m.judged,
                f"{key}_ci_low": low, f"{key}_ci_high": high, f"{key}_reward": m.mean_reward}  # fmt: skip
    tr = parts.get("train")
    row["train_success"] = tr.success_rate if tr else None
    row["train_reward"] = tr.mean_reward if tr else None
    for m in parts.values():
        if m is not None:
            row["episodes"] += m.episodes
            row["infra_errors"] += m.infra_errors
    return row


def run_demo(
    settings: Settings,
    broker: EmbeddedKafka,
    *,
    iterations: int = ITERATIONS,
    group_size: int = GROUP_SIZE,
    workers: int = 2,
    tasks_per_iteration: int = TASKS_PER_ITERATION,
    held_out: int = 200,
    family_dir: Path | None = None,
    seed: int = 0,
    console: Console,
) -> bool:
    """Run the demo; return True when the held-out greedy success rose measurably.

    "Measurably": the 95% interval of final minus first (Newcombe's) lies above 0.

    Args:
        settings: where the lake, checkpoints and tasks go, and the broker's address.
        broker: the embedded broker, started here.
        iterations: RL iterations (the final evaluation comes after the last).
        group_size: attempts per training task and iteration (G).
        workers: rollout worker processes.
        tasks_per_iteration: fresh training tasks each iteration acts on.
        held_out: held-out tasks generated (each evaluated greedily and sampled per iteration).
        console: where the progress goes.
        seed: seeds the generated tasks, the warm start and every sampler (one run per seed).
        family_dir: a task family to use instead of generating ``reverse`` (its tasks whose
            id contains ``-eval-`` are the held-out split).

    Raises:
        AdmissionError: a task of the family was rejected (the demo stops before training).
        UnavailableError: something it needs cannot be prepared here (Java, root, the image).
    """
    from judges.admission import (
        ADMISSION_SPEC,
        admit_all,
        publish_admissions,
        rejection_reasons,
        shared_judge,
    )
    from judges.errors import AdmissionError
    from judges.tasks import find_task_dirs, load_task
    from lake import Lake
    from learners.checkpoints import lineage_chain, publish_checkpoint
    from learners.evaluation import split_metrics
    from learners.trainer import TrainArgs, supervised_warm_start, train
    from rollouts import TaskPool
    from rollouts.sampler import recorded_splits
    from sandboxes import SandboxPool
    from trajlake.loop import fold_log, rollout
    from trajlake.preflight import prepare_images, require_backend

    started = time.monotonic()
    lake_dir = Path(settings.lake).resolve()
    ckpt_root = Path(settings.checkpoints).resolve()

    console.rule("[bold]1. embedded Kafka broker")
    broker.start()
    console.print(f"broker up on {broker.bootstrap}")

    family = family_module()
    if family_dir is None:
        console.rule("[bold]2. generate and admit the reverse task family")
        family_dir = Path(settings.home) / "tasks" / "reverse"
        n_train = TRAIN_TASKS
        family.write_family(family_dir, train=n_train, held_out=held_out, seed=seed)
        lo, hi = family.LENGTHS
        letters = f"{lo}" if lo == hi else f"{lo}-{hi}"
        console.print(f"tasks/reverse/make_tasks.py: {n_train} training and {held_out} held-out tasks "
                      f"(random {letters}-letter strings) in {family_dir}")  # fmt: skip
    else:
        console.rule(f"[bold]2. admit the {family_dir.name} task family")
    task_dirs = find_task_dirs([family_dir])
    backend = require_backend(settings)
    prepare_images(settings, backend, {load_task(d).spec.initial_state.image for d in task_dirs},
                   progress=lambda m: console.print(f"[dim]{escape(m)}[/dim]"))  # fmt: skip
    t0 = time.monotonic()
    with SandboxPool(backend, ADMISSION_SPEC, max_size=workers) as pool:
        results = admit_all(task_dirs, pool, runs=2, workers=workers)
    # the results are events on the tasks topic; the pipeline folds them into the tasks table
    publish_admissions(settings.kafka_bootstrap, settings.topic_tasks, results,
                       recorded_splits=recorded_splits(lake_dir))  # fmt: skip
    fold_log(settings)
    lake = Lake(str(lake_dir))
    admitted = sum(r.admitted for r in results)
    console.print(f"{admitted}/{len(results)} tasks admitted in {time.monotonic() - t0:.0f}s (spec, "
                  "reproducible state, judge fails untouched, passes reference, deterministic) -> log -> "
                  "tasks table")  # fmt: skip
    if admitted < len(results):
        reasons = rejection_reasons(results).most_common(5)
        raise AdmissionError(
            f"{len(results) - admitted} of {len(results)} {family_dir.name} tasks were rejected, so the "
            "demo stops here; "
            + "; ".join(f"{n} task(s): {reason}" for reason, n in reasons)
            + f" (`trajlake tasks admit {family_dir} --json` gives every row)"
        )
    pool_ = TaskPool.admitted_in([family_dir], lake_dir, split=None)
    # the family declares its splits (reverse-eval-* held out); admission recorded them
    train_tasks = TaskPool.admitted_in([family_dir], lake_dir).tasks
    eval_tasks = TaskPool.admitted_in([family_dir], lake_dir, split="eval").tasks
    judge_name, judge_version = shared_judge(pool_.tasks)
    console.print(f"{len(train_tasks)} training tasks, {len(eval_tasks)} held-out tasks; "
                  f"judge {judge_name} {judge_version}")  # fmt: skip

    console.rule("[bold]3. supervised warm start (synthetic strings, mostly shorter than the tasks')")
    words = {t.spec.instruction.split('"')[1] for t in pool_.tasks}
    pairs, validation = warm_data(words, family.LENGTHS, seed=seed)
    ckpt = supervised_warm_start(
        pairs, checkpoint_root=str(ckpt_root), steps=1500, lr=2e-3, seed=seed, check_every=WARM_CHECK_EVERY,
        stop_when=lambda net: greedy_success(net, validation) >= WARM_STOP_SUCCESS,
        note=(f"supervised warm start on {len(pairs)} synthetic strings ({1 - WARM_LONG_FRACTION:.0%} of "
              f"{WARM_LENGTHS[0]}-{WARM_LENGTHS[1]} letters; no task string), stopped at "
              f"{WARM_STOP_SUCCESS:.0%} greedy success on 100 synthetic {family.LENGTHS[0]}-"
              f"{family.LENGTHS[1]}-letter strings (checked every {WARM_CHECK_EVERY} steps)"),
    )  # fmt: skip
    publish_checkpoint(settings.kafka_bootstrap, settings.topic_learner, ckpt)  # folded with the next batch
    wm = ckpt.lineage.metrics
    console.print(f"{ckpt.checkpoint_id}: {wm['steps']} steps, loss {wm['final_loss']:.2f}")

    rows: list[dict[str, Any]] = []
    all_ids: set[str] = set()
    final_eval_ids: list[str] = []
    next_task = 0

    def fresh(n: int) -> list[Task]:
        """The next ``n`` training tasks, in turn."""
        nonlocal next_task
        picked = [train_tasks[(next_task + i) % len(train_tasks)] for i in range(n)]
        next_task += n
        return picked

    for it in range(iterations + 1):
        last = it == iterations
        console.rule(
            f"[bold]4.{it} iteration {it}: {ckpt.checkpoint_id}" + (" (final evaluation)" if last else "")
        )
        t0 = time.monotonic()
        local = f"local:{ckpt.path}"
        run_seed = 100_000 * seed + 100 * it
        greedy = rollout(settings, eval_tasks, f"{local}?greedy=1", group_size=1, workers=workers,
                         tag=f"eval{it}-greedy", seed=run_seed, source="eval")  # fmt: skip
        sampled = rollout(settings, eval_tasks, f"{local}?seed={run_seed + 50}", group_size=1,
                          workers=workers, tag=f"eval{it}-sampled", seed=run_seed, source="eval")  # fmt: skip
        tr: list[EpisodeOutcome] = []
        constant = refilled = 0
        if not last:
            batch = fresh(tasks_per_iteration)
            for rnd in range(REFILL_ROUNDS + 1):
                spec = f"{local}?seed={run_seed + rnd}&temperature={TRAIN_TEMPERATURE}"
                out = rollout(settings, batch, spec, group_size=group_size, workers=workers,
                              tag=f"train{it}-{rnd}", seed=run_seed)  # fmt: skip
                tr += out
                flat = _constant_groups(out)
                constant += len(flat)
                if not flat or rnd == REFILL_ROUNDS:
                    break
                batch = fresh(len(flat))  # each constant-reward group is replaced by a fresh task
                refilled += len(batch)
        t_roll = time.monotonic() - t0
        folded = fold_log(settings)
        parts = {
            "eval": split_metrics(lake_dir, {o.episode_id for o in greedy}, judge_name),
            "sampled": split_metrics(lake_dir, {o.episode_id for o in sampled}, judge_name),
            "train": split_metrics(lake_dir, {o.episode_id for o in tr}, judge_name) if tr else None,
        }
        row = _row(it, ckpt.checkpoint_id, parts) | {"constant_groups": constant, "refilled": refilled}
        all_ids |= {o.episode_id for o in greedy + sampled + tr}
        final_eval_ids = [o.episode_id for o in greedy]
        msg = (f"{row['episodes']} episodes in {t_roll:.0f}s, {folded} records folded; held-out success "
               f"greedy {row['eval_success']:.1%} [{row['eval_ci_low']:.1%}, {row['eval_ci_high']:.1%}], "
               f"sampled {row['sampled_success']:.1%} (n = {row['eval_n']})")  # fmt: skip
        if not last:
            msg += (f"; training reward {row['train_reward']:.2f}, {constant} constant-reward groups "
                    f"({refilled} refilled)")  # fmt: skip
        console.print(msg)
        if not last:
            res = train(
                TrainArgs(
                    lake=str(lake_dir),
                    checkpoint_root=str(ckpt_root),
                    judge_name=judge_name,
                    judge_version=judge_version,
                    parent=ckpt.path,
                    task_ids=[t.id for t in train_tasks],
                    seed=run_seed,
                    **RL_HYPERPARAMETERS,
                )  # fmt: skip
            )
            if res.checkpoint is None:
                console.print("[red]the learner found no new samples[/red]")
                return False
            ckpt = res.checkpoint
            publish_checkpoint(settings.kafka_bootstrap, settings.topic_learner, ckpt)
            m = ckpt.lineage.metrics
            row.update(loss=m["loss"], kl=m["kl"], clip_frac=m["clip_frac"], samples=res.samples,
                       entropy=m["entropy_estimate"],
                       zero_adv_frac=m["zero_advantage_group_frac"])  # fmt: skip
            console.print(f"learner: {res.samples} samples (tables {ckpt.lineage.table_versions}) -> "
                          f"{ckpt.checkpoint_id}, loss {m['loss']:.3f}, clip {m['clip_frac']:.2f}, "
                          f"entropy {m['entropy_estimate']:.2f}, zero-advantage groups "
                          f"{m['zero_advantage_group_frac']:.0%}")  # fmt: skip
        rows.append(row)

    console.rule("[bold]5. summary")
    table = Table(title="per iteration (held-out = tasks never trained on; 95% Wilson intervals)")
    for col in ("iter", "checkpoint", "episodes", "greedy success", "sampled success", "train reward",
                "const. groups"):  # fmt: skip
        table.add_column(col, justify="left" if col == "checkpoint" else "right")
    for r in rows:
        table.add_row(
            str(r["iteration"]), r["checkpoint"][-13:], str(r["episodes"]),
            f"{r['eval_success']:.1%} [{r['eval_ci_low']:.0%}, {r['eval_ci_high']:.0%}]",
            f"{r['sampled_success']:.1%} [{r['sampled_ci_low']:.0%}, {r['sampled_ci_high']:.0%}]",
            "-" if r["train_reward"] is None else f"{r['train_reward']:.2f}",
            "-" if r["train_reward"] is None else str(r["constant_groups"]),
        )  # fmt: skip
    console.print(table)
    failures = [f for f in lake.read("failures").to_pylist() if f["episode_id"] in all_ids]
    breakdown = Table(title="failures by category (failures table, this demo's episodes)")
    for col in ("category", "signature", "episodes"):
        breakdown.add_column(col)
    for (cat, sig), n in Counter((f["category"], f["signature"]) for f in failures).most_common(8):
        breakdown.add_row(cat, (sig or "")[:70], str(n))
    console.print(breakdown)
    png = Path(settings.home) / "learning_curve.png"
    plot_curves(rows, png, "reverse: RL through Kafka -> Beam -> Delta -> learner")
    chain = lineage_chain(lake_dir, ckpt.checkpoint_id)
    console.print(f"learning curve: {png}")
    console.print(f"lineage of {ckpt.checkpoint_id}: {len(chain)} checkpoints back to the warm start "
                  f"(`trajlake lineage {ckpt.checkpoint_id}`)")  # fmt: skip
    _rejudge_step(settings, lake, backend, eval_tasks, final_eval_ids, workers=workers, console=console)
    summary = demo_summary(rows)
    summary["seconds"] = round(time.monotonic() - started, 1)
    (Path(settings.home) / "demo_summary.json").write_text(json.dumps(summary, indent=2))
    first, final = rows[0], rows[-1]
    imp, imp_s = summary["improvement"], summary["improvement_sampled"]
    console.print(f"held-out success, final minus first: greedy {imp['diff']:+.1%} (95% interval "
                  f"{imp['ci_low']:+.1%} .. {imp['ci_high']:+.1%}; n = {first['eval_n']} and "
                  f"{final['eval_n']}), sampled {imp_s['diff']:+.1%} ({imp_s['ci_low']:+.1%} .. "
                  f"{imp_s['ci_high']:+.1%}) -> {settings.home}/demo_summary.json")  # fmt: skip
    improved = bool(imp["ci_low"] > 0)
    elapsed = time.monotonic() - started
    if improved:
        console.print(f"held-out success [green]rose[/green]: greedy {first['eval_success']:.1%} -> "
                      f"{final['eval_success']:.1%} in {iterations} RL iterations, the interval of the "
                      f"difference above 0 ({elapsed:.0f}s)")  # fmt: skip
    else:
        console.print(f"[red]held-out success did not rise measurably[/red]: greedy "
                      f"{first['eval_success']:.1%} -> {final['eval_success']:.1%}, and the 95% interval "
                      f"of the difference ({imp['ci_low']:+.1%} .. {imp['ci_high']:+.1%}) does not lie "
                      f"above 0 ({elapsed:.0f}s)")  # fmt: skip
    return improved


def demo_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What ``demo_summary.json`` holds.

    Per iteration the greedy and sampled success with 95% Wilson intervals, and final
    minus first with Newcombe's interval, for both.
    """
    from learners.evaluation import difference_interval

    first, final = rows[0], rows[-1]

    def improvement(key: str) -> dict[str, float]:
        d, low, high = difference_interval(
            first[f"{key}_successes"], first[f"{key}_n"], final[f"{key}_successes"], final[f"{key}_n"]
        )
        return {"diff": d, "ci_low": low, "ci_high": high}

    extra = ("train_reward", "constant_groups", "refilled", "entropy", "zero_adv_frac", "samples")
    return {
        "iterations": [
            {
                "iteration": r["iteration"],
                "checkpoint": r["checkpoint"],
                "eval_success": r["eval_success"],
                "ci_low": r["eval_ci_low"],
                "ci_high": r["eval_ci_high"],
                "n": r["eval_n"],
                "sampled_success": r["sampled_success"],
                "sampled_ci_low": r["sampled_ci_low"],
                "sampled_ci_high": r["sampled_ci_high"],
                "sampled_n": r["sampled_n"],
                **{k: r[k] for k in extra if k in r},
            }
            for r in rows
        ],  # fmt: skip
        "improvement": improvement("eval"),
        "improvement_sampled": improvement("sampled"),
        "eval": "greedy decoding on every held-out task (eval_success: the success rule) and one sample "
        "at temperature 1 on each (sampled_success)",
        "interval": "95% Wilson per iteration; Newcombe's hybrid score interval for final minus first",
    }


# A looser judge version: an answer from a score of 0.75 on passes (6 letters: the first 5 right).
LOOSE_JUDGE = {"name": "answer", "config": {"pass_score": 0.75}}


def _rejudge_step(
    settings: Settings,
    lake: Any,
    backend: Any,
    tasks: list[Any],
    episode_ids: list[str],
    *,
    workers: int,
    console: Console,
) -> None:
    """Score the final evaluation again with a looser judge version, through the log."""
    from ingest.blobs import BlobStore
    from ingest.kafka_sink import KafkaSink, KafkaSinkConfig
    from pipelines.rejudge import RejudgeSelection, rejudge
    from rollouts.runner import ROLLOUT_SPEC
    from sandboxes import SandboxPool
    from trajlake.loop import fold_log

    console.rule("[bold]6. re-judge the final evaluation with another judge version")
    sink = KafkaSink(KafkaSinkConfig(bootstrap_servers=settings.kafka_bootstrap, client_id="demo-rejudge"))
    try:
        with SandboxPool(backend, ROLLOUT_SPEC, max_size=workers) as pool:
            report = rejudge(
                lake,
                {t.id: t for t in tasks},
                pool,
                sink,
                BlobStore(str(Path(settings.home) / "blobs")),
                topic=settings.topic_judgements,
                judge_spec=LOOSE_JUDGE,
                selection=RejudgeSelection(episode_ids=tuple(episode_ids)),
                workers=workers,
            )
    finally:
        sink.close()
    folded = fold_log(settings)
    version = next((i.judge_version for i in report.items if i.judge_version), "-")
    flips = report.flips()
    console.print(
        f"re-judged {report.count('judged')} held-out episodes from their archived final states with "
        f"answer {version} (a pass from a score of 0.75 on), run {report.run_id}: "
        f"{report.count('skipped')} skipped, {report.count('error')} errors in {report.seconds:.0f}s, "
        f"{folded} judgements folded"
    )
    console.print(
        "verdicts, online judge -> looser judge: "
        + ", ".join(f"{a}->{b}: {n}" for (a, b), n in sorted(flips.items()))
        + f"; the looser judge would have passed {flips.get(('fail', 'pass'), 0)} failed episodes"
    )
    console.print(
        "explore the episodes, failures and both judge versions: [bold]trajlake api serve[/bold] "
        f"(http://{settings.api_host}:{settings.api_port}/), or `trajlake lake sql` with Spark"
    )
