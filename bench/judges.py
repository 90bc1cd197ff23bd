"""Judging throughput: the ``tests`` judge on the pyfix family vs running the same tests bare.

Run (as root, base image built)::

    .venv/bin/python bench/judges.py [--backends local,docker] [--tasks 32] [--json OUT]

One run, per backend, over the shipped pyfix tasks with their reference
solution applied (untimed):

- ``framework``: ``build_judge({"name": "tests"})(ctx)`` as the tasks judge:
  the final state read from the workspace's archive, the sandbox reset to
  exactly that tree, the generated check's 40 cases (their reference answers
  computed on the host once per task and host) and the hidden tests in the
  judge's own pytest across the bridge, the JUnit report parsed, evidence,
  version;
- ``fixed only``: the same judge without the generated check
  (``{"generated": false}``), to tell what the questions drawn at judge time
  cost from what the judged tree costs;
- ``baseline``: the same hidden tests copied in and ``python3 -m pytest -q``
  run directly in the same sandbox, exit code only.

Both alternate task by task in the same sandbox. Also: judgements/s of the
full composite judge (process + tests + static + efficiency) with 2 workers,
and what re-judging costs:

- ``export``: archiving the final workspace, as a rollout does before judging
  (``Sandbox.export_workspace``), against the judge it precedes;
- ``rejudge``: unpacking that archive as untrusted, leasing a fresh pooled
  sandbox reset to it, and judging there, against judging the live sandbox.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

if __name__ == "__main__" and sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # this directory's scripts must not shadow the packages they measure

from rich.console import Console
from rich.table import Table

from judges import JudgeContext, build_judge, find_task_dirs, load_task
from judges.admission import ADMISSION_SPEC
from judges.replay import Trajectory, apply_reference
from sandboxes import SandboxPool, get_backend
from sandboxes.workspace_io import extract_archive

TASKS = Path(__file__).resolve().parents[1] / "tasks"
console = Console()


def bench_backend(name: str, tasks: list[Any]) -> dict[str, Any]:
    backend = get_backend(name)
    backend.ensure_available()
    judge = build_judge({"name": "tests"})
    fixed_judge = build_judge({"name": "tests", "config": {"generated": False}})
    fw: list[float] = []
    fixed: list[float] = []
    base: list[float] = []
    verdicts = []
    export_s: list[float] = []
    rejudge_s: list[float] = []
    rejudge_verdicts = []
    with SandboxPool(backend, ADMISSION_SPEC, max_size=2) as pool:
        for task in tasks:
            with pool.lease(image=task.spec.initial_state.image, workspace=task.initial_dir) as sb:
                task.prepare(sb)
                assert apply_reference(task, sb).exit_code == 0
                target = task.spec.hidden_tests.target
                for _ in range(2):
                    t = time.perf_counter()
                    j = judge(JudgeContext(task=task, sandbox=sb, events=Trajectory(task).events))
                    fw.append(time.perf_counter() - t)
                    verdicts.append(j.verdict)
                    t = time.perf_counter()
                    fixed_judge(JudgeContext(task=task, sandbox=sb, events=Trajectory(task).events))
                    fixed.append(time.perf_counter() - t)
                    t = time.perf_counter()
                    sb.exec(["rm", "-rf", target])
                    for rel, data in task.hidden_files().items():
                        sb.write_file(f"{target}/{rel}", data)
                    r = sb.exec(
                        ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", target], timeout=120
                    )
                    base.append(time.perf_counter() - t)
                    assert r.exit_code == 0, r.stdout[-500:]
                sb.exec(["rm", "-rf", target])  # the state a rollout archives: no hidden tests in it
                t = time.perf_counter()
                archive = sb.export_workspace()
                export_s.append(time.perf_counter() - t)
            t = time.perf_counter()
            with tempfile.TemporaryDirectory(prefix="bench-rejudge-") as tmp:
                extract_archive(archive, Path(tmp) / "ws")
                with pool.lease(image=task.spec.initial_state.image, workspace=Path(tmp) / "ws") as sb2:
                    j = judge(JudgeContext(task=task, sandbox=sb2, events=Trajectory(task).events))
            rejudge_s.append(time.perf_counter() - t)
            rejudge_verdicts.append(j.verdict)

        def composite(task: Any) -> str:
            with pool.lease(image=task.spec.initial_state.image, workspace=task.initial_dir) as sb:
                task.prepare(sb)
                apply_reference(task, sb)
                return build_judge(task.spec.judge)(JudgeContext(task=task, sandbox=sb)).verdict

        t0 = time.perf_counter()
        with ThreadPoolExecutor(2) as ex:
            comp = list(ex.map(composite, tasks))
        comp_s = time.perf_counter() - t0
    backend.close()
    return {
        "tasks": len(tasks),
        "framework_p50_s": statistics.median(fw),
        "baseline_p50_s": statistics.median(base),
        "framework_per_s": len(fw) / sum(fw),
        "baseline_per_s": len(base) / sum(base),
        "overhead_ratio": statistics.median(fw) / statistics.median(base),
        "overhead_ratio_mean": statistics.mean(fw) / statistics.mean(base),
        # a task's second judging: its generated check's reference answers are computed once per
        # task and host, so this is what every later episode of the task costs
        "overhead_ratio_repeat": statistics.median(fw[1::2]) / statistics.median(base[1::2]),
        "fixed_only_ratio": statistics.median(fixed) / statistics.median(base),
        "fixed_only_ratio_mean": statistics.mean(fixed) / statistics.mean(base),
        "per_task": [
            {
                "task": t.id,
                "judge_s": round(statistics.mean(fw[2 * i : 2 * i + 2]), 3),
                "bare_s": round(statistics.mean(base[2 * i : 2 * i + 2]), 3),
            }
            for i, t in enumerate(tasks)
        ],  # fmt: skip
        "all_pass": all(v == "pass" for v in verdicts),
        "composite_per_s_2_workers": len(tasks) / comp_s,
        "composite_all_pass": all(v == "pass" for v in comp),
        "export_p50_s": statistics.median(export_s),
        "export_vs_judge": statistics.median(export_s) / statistics.median(fw),
        "rejudge_p50_s": statistics.median(rejudge_s),
        "rejudge_vs_live_judge": statistics.median(rejudge_s) / statistics.median(fw),
        "rejudge_all_pass": all(v == "pass" for v in rejudge_verdicts),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description="tests-judge throughput vs bare pytest in the same sandbox")
    ap.add_argument("--backends", default="local,docker")
    ap.add_argument("--tasks", type=int, default=32)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    tasks = [load_task(d) for d in find_task_dirs([TASKS / "pyfix"])][: args.tasks]
    results = {"cpus": os.cpu_count(), "backends": {}}
    for name in args.backends.split(","):
        console.print(f"[bold]{name}[/bold]: {len(tasks)} pyfix tasks ...")
        results["backends"][name] = bench_backend(name, tasks)  # type: ignore[index]
    table = Table(title="tests judge vs bare pytest (same sandbox, reference solutions)")
    for col in (
        "backend",
        "judge p50 s",
        "bare p50 s",
        "overhead p50",
        "overhead mean",
        "fixed-only p50",
        "judgements/s",
        "bare runs/s",
        "composite/s (2 w)",
    ):
        table.add_column(col, justify="right")
    for name, r in results["backends"].items():  # type: ignore[attr-defined]
        table.add_row(
            name,
            f"{r['framework_p50_s']:.3f}",
            f"{r['baseline_p50_s']:.3f}",
            f"{r['overhead_ratio']:.2f}x",
            f"{r['overhead_ratio_mean']:.2f}x",
            f"{r['fixed_only_ratio']:.2f}x",
            f"{r['framework_per_s']:.2f}",
            f"{r['baseline_per_s']:.2f}",
            f"{r['composite_per_s_2_workers']:.2f}",
        )
    console.print(table)
    rj = Table(title="re-judging from the archived final state (same judge, same tasks)")
    for col in (
        "backend",
        "export p50 ms",
        "export / judge",
        "re-judge p50 s",
        "re-judge / live judge",
        "verdicts",
    ):
        rj.add_column(col, justify="right")
    for name, r in results["backends"].items():  # type: ignore[attr-defined]
        rj.add_row(
            name,
            f"{r['export_p50_s'] * 1000:.1f}",
            f"{r['export_vs_judge']:.3f}x",
            f"{r['rejudge_p50_s']:.3f}",
            f"{r['rejudge_vs_live_judge']:.2f}x",
            "all pass" if r["rejudge_all_pass"] else "[red]differ[/red]",
        )
    console.print(rj)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
