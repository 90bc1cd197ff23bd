"""``trajlake demo``: the closed loop on the embedded default, end to end.

1. The embedded Kafka broker comes up.
2. The ``wordplay`` family is admitted (real sandboxes, real judges) into the ``tasks`` table.
3. A short supervised warm start on synthetic strings (never the task words)
   gives the in-repo transformer a first grip on the skill; it stops as soon
   as the training loss falls below a threshold.
4. Iterations: the current checkpoint acts (sampling, as in training) on the
   held-out tasks to measure it, and in groups on the training tasks by rollout worker processes
   acting in sandboxes; every step is an event in Kafka; the Beam pipeline
   folds the log into Delta; the learner reads exactly the new episodes at
   pinned table versions and takes policy-gradient steps (group-relative
   advantages, clipped importance weights from the recorded behaviour
   log-probabilities); the new checkpoint and its lineage go to the
   ``checkpoints`` table and the log; the next iteration's workers load it.
5. A summary: episodes, success rate per iteration on held-out and training
   tasks, failures by category, and a learning-curve PNG.
"""

from __future__ import annotations

import json
import random
import string
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ingest.kafka_broker import EmbeddedKafka

if TYPE_CHECKING:
    from trajlake.settings import Settings

FAMILY_DIR = Path(__file__).resolve().parents[1] / "tasks" / "wordplay"
HELD_OUT_FROM = 37
"""wordplay-037 .. 048 are held out: never trained on, never in the warm start."""


def _warm_pairs(exclude: set[str], n: int = 4000, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs: list[tuple[str, str]] = []
    while len(pairs) < n:
        w = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 6)))
        if w not in exclude:
            pairs.append((f'Write "{w}" reversed into answer.txt.\n', w[::-1]))
    return pairs


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    it = [r["iteration"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    ax.errorbar(
        it,
        [r["eval_success"] for r in rows],
        yerr=[
            [r["eval_success"] - r["ci_low"] for r in rows],
            [r["ci_high"] - r["eval_success"] for r in rows],
        ],
        fmt="o-",
        capsize=3,
        label="held-out success rate (95% Wilson interval)",
    )
    ax.plot(it, [r["eval_reward"] for r in rows], "s--", label="held-out mean reward")
    train = [(r["iteration"], r["train_reward"]) for r in rows if r.get("train_reward") is not None]
    if train:
        ax.plot([t[0] for t in train], [t[1] for t in train], "^:", label="training mean reward (sampled)")
    ax.set_xlabel("iteration (checkpoint)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("wordplay: RL through Kafka -> Beam -> Delta -> learner")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def run_demo(
    settings: Settings,
    broker: EmbeddedKafka,
    *,
    iterations: int = 5,
    group_size: int = 4,
    workers: int = 2,
    eval_samples: int = 4,
    family_dir: Path = FAMILY_DIR,
    console: Console,
) -> bool:
    """Run the demo; return True when held-out success rose and every phase went through the log.

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
    from learners.evaluation import difference_interval, split_metrics
    from learners.trainer import TrainArgs, supervised_warm_start, train
    from rollouts import TaskPool
    from sandboxes import SandboxPool
    from trajlake.loop import fold_log, rollout
    from trajlake.preflight import prepare_images, require_backend

    started = time.monotonic()
    lake_dir = Path(settings.lake).resolve()
    ckpt_root = Path(settings.checkpoints).resolve()

    console.rule("[bold]1. embedded Kafka broker")
    broker.start()
    console.print(f"broker up on {broker.bootstrap}")

    console.rule("[bold]2. admit the wordplay task family")
    task_dirs = find_task_dirs([family_dir])
    backend = require_backend(settings)
    prepare_images(settings, backend, {load_task(d).spec.initial_state.image for d in task_dirs},
                   progress=lambda m: console.print(f"[dim]{escape(m)}[/dim]"))  # fmt: skip
    with SandboxPool(backend, ADMISSION_SPEC, max_size=workers) as pool:
        results = admit_all(task_dirs, pool, runs=2, workers=workers)
    # the results are events on the tasks topic; the pipeline folds them into the tasks table
    publish_admissions(settings.kafka_bootstrap, settings.topic_tasks, results)
    fold_log(settings)
    lake = Lake(str(lake_dir))
    admitted = sum(r.admitted for r in results)
    console.print(f"{admitted}/{len(results)} tasks admitted (spec, reproducible state, judge fails "
                  "untouched, passes reference, deterministic) -> log -> tasks table")  # fmt: skip
    if admitted < len(results):
        reasons = rejection_reasons(results).most_common(5)
        raise AdmissionError(
            f"{len(results) - admitted} of {len(results)} wordplay tasks were rejected, so the demo stops "
            "here; "
            + "; ".join(f"{n} task(s): {reason}" for reason, n in reasons)
            + " (`trajlake tasks admit tasks/wordplay --json` gives every row)"
        )
    pool_ = TaskPool.admitted_in([family_dir], lake_dir)
    train_tasks = [t for t in pool_.tasks if int(t.id.rsplit("-", 1)[1]) < HELD_OUT_FROM]
    held_out = [t for t in pool_.tasks if int(t.id.rsplit("-", 1)[1]) >= HELD_OUT_FROM]
    judge_name, judge_version = shared_judge(pool_.tasks)
    console.print(f"{len(train_tasks)} training tasks, {len(held_out)} held-out tasks; "
                  f"judge {judge_name} {judge_version}")  # fmt: skip

    console.rule("[bold]3. supervised warm start (synthetic strings, not the task words)")
    words = {t.spec.instruction.split('"')[1] for t in pool_.tasks}
    ckpt = supervised_warm_start(
        _warm_pairs(words), checkpoint_root=str(ckpt_root), steps=1500, target_loss=0.5, lr=2e-3,
        note="supervised warm start on 4000 synthetic random-letter strings (no task word)",
    )  # fmt: skip
    publish_checkpoint(settings.kafka_bootstrap, settings.topic_learner, ckpt)  # folded with the next batch
    wm = ckpt.lineage.metrics
    console.print(f"{ckpt.checkpoint_id}: {wm['steps']} steps, loss {wm['final_loss']:.2f}")

    rows: list[dict[str, Any]] = []
    all_ids: set[str] = set()
    final_eval_ids: list[str] = []
    for it in range(iterations + 1):
        last = it == iterations
        console.rule(
            f"[bold]4.{it} iteration {it}: {ckpt.checkpoint_id}" + (" (final evaluation)" if last else "")
        )
        t0 = time.monotonic()
        spec = f"local:{ckpt.path}?seed={1000 + it}"
        ev = rollout(
            settings, held_out, spec, group_size=eval_samples, workers=workers, tag=f"eval{it}", seed=it
        )
        tr = []
        if not last:
            tr = rollout(settings, train_tasks, f"local:{ckpt.path}?seed={it}", group_size=group_size,
                         workers=workers, tag=f"train{it}", seed=it)  # fmt: skip
        t_roll = time.monotonic() - t0
        folded = fold_log(settings)
        ev_m = split_metrics(lake_dir, {o.episode_id for o in ev}, judge_name)
        tr_m = split_metrics(lake_dir, {o.episode_id for o in tr}, judge_name) if tr else None
        all_ids |= {o.episode_id for o in ev + tr}
        final_eval_ids = [o.episode_id for o in ev]
        row: dict[str, Any] = {
            "iteration": it,
            "checkpoint": ckpt.checkpoint_id,
            "eval_success": ev_m.success_rate,
            "eval_successes": ev_m.successes,
            "n": ev_m.judged,
            "ci_low": ev_m.interval()[0],
            "ci_high": ev_m.interval()[1],
            "eval_reward": ev_m.mean_reward,
            "train_success": tr_m.success_rate if tr_m else None,
            "train_reward": tr_m.mean_reward if tr_m else None,
            "episodes": ev_m.episodes + (tr_m.episodes if tr_m else 0),
            "infra_errors": ev_m.infra_errors + (tr_m.infra_errors if tr_m else 0),
        }
        msg = (f"{row['episodes']} episodes in {t_roll:.0f}s, {folded} records folded; held-out success "
               f"{ev_m.success_rate:.0%} (reward {ev_m.mean_reward:.2f})")  # fmt: skip
        if tr_m:
            msg += f"; training success {tr_m.success_rate:.0%} (reward {tr_m.mean_reward:.2f})"
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
                    epochs=2,
                    batch_size=32,
                    lr=3e-4,
                    clip_eps=0.2,
                    kl_coef=0.0,
                    seed=it,
                )  # fmt: skip
            )
            if res.checkpoint is None:
                console.print("[red]the learner found no new samples[/red]")
                return False
            ckpt = res.checkpoint
            publish_checkpoint(settings.kafka_bootstrap, settings.topic_learner, ckpt)
            m = ckpt.lineage.metrics
            row.update(loss=m["loss"], kl=m["kl"], clip_frac=m["clip_frac"], samples=res.samples)
            console.print(f"learner: {res.samples} samples (tables {ckpt.lineage.table_versions}) -> "
                          f"{ckpt.checkpoint_id}, loss {m['loss']:.3f}, "
                          f"clip {m['clip_frac']:.2f}")  # fmt: skip
        rows.append(row)

    console.rule("[bold]5. summary")
    table = Table(title="per iteration (held-out = tasks never trained on)")
    for col in (
        "iter",
        "checkpoint",
        "episodes",
        "held-out success",
        "held-out reward",
        "train success",
        "train reward",
    ):
        table.add_column(col, justify="right" if col not in ("checkpoint",) else "left")
    for r in rows:
        table.add_row(
            str(r["iteration"]), r["checkpoint"][-13:], str(r["episodes"]), f"{r['eval_success']:.0%}",
            f"{r['eval_reward']:.2f}", "-" if r["train_success"] is None else f"{r['train_success']:.0%}",
            "-" if r["train_reward"] is None else f"{r['train_reward']:.2f}",
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
    _plot(rows, png)
    chain = lineage_chain(lake_dir, ckpt.checkpoint_id)
    console.print(f"learning curve: {png}")
    console.print(f"lineage of {ckpt.checkpoint_id}: {len(chain)} checkpoints back to the warm start "
                  f"(`trajlake lineage {ckpt.checkpoint_id}`)")  # fmt: skip
    _rejudge_step(settings, lake, backend, held_out, final_eval_ids, workers=workers, console=console)
    first, final = rows[0]["eval_success"], rows[-1]["eval_success"]
    diff, low, high = difference_interval(
        rows[0]["eval_successes"], rows[0]["n"], rows[-1]["eval_successes"], rows[-1]["n"]
    )
    summary = {
        "iterations": [
            {k: r[k] for k in ("iteration", "checkpoint", "eval_success", "ci_low", "ci_high", "n")}
            for r in rows
        ],
        "improvement": {"diff": diff, "ci_low": low, "ci_high": high},
        "interval": "95% Wilson per iteration; Newcombe's hybrid score interval for final minus first",
    }
    (Path(settings.home) / "demo_summary.json").write_text(json.dumps(summary, indent=2))
    n0, n1 = rows[0]["n"], rows[-1]["n"]
    console.print(f"held-out success, final minus first: {diff:+.0%} (95% interval {low:+.0%} .. "
                  f"{high:+.0%}; n = {n0} and {n1}) -> {settings.home}/demo_summary.json")  # fmt: skip
    improved = bool(final > first)
    verdict = "[green]rose[/green]" if improved else "[red]did not rise[/red]"
    console.print(f"held-out success {verdict}: {first:.0%} -> {final:.0%} in {iterations} RL iterations "
                  f"({time.monotonic() - started:.0f}s)")  # fmt: skip
    return improved


# A looser judge: only "a word written to answer.txt" and "right length" of the hidden tests.
LOOSE_JUDGE = {"name": "tests", "config": {"extra_args": ["-k", "one_word or same_length"]}}


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
        f"tests {version} (only 'a word written' and 'right length'), run {report.run_id}: "
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
