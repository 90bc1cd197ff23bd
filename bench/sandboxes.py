"""Sandbox latency and throughput, per backend, against raw ``bwrap`` and raw ``docker``.

Run (as root, with the Docker engine up and the base image built)::

    .venv/bin/python bench/sandboxes.py [--backends local,docker] [--rounds 100] [--json OUT]

One run, per backend:

- ``cold``: create a sandbox -> ``exec python3 -c pass`` -> close (no pool);
- ``warm``: ``pool.acquire`` -> ``exec python3 -c pass`` -> ``pool.release`` on a
  pool kept warm (reset and health check happen off the caller's path);
- ``exec``: ``exec python3 -c pass`` in a sandbox already held;
- ``snapshot`` / ``restore`` of a workspace of 200 files (4 MiB);
- throughput: execs/s with N sandboxes used concurrently by N threads;
- ``state cache``: acquire-to-first-action for a task whose setup builds its workspace
  (generates 300 modules, byte-compiles them): leased from a warm pool, prepared cold (files
  copied, setup run) against prepared from the shared state cache (``judges/state_cache.py``),
  then the first action; the cached state's file-tree digest is checked equal to the cold one's.

Both backends run on the recorded base image (the same root filesystem).
Baselines in the same run: the same command by a raw ``bwrap`` with the same
namespaces on that root filesystem (no cgroups, no overlay, no accounting) and
by raw ``docker run --rm`` and ``docker exec`` through the engine's API. Ratios
are ours / baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__" and sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # this directory's scripts must not shadow the packages they measure

from rich.console import Console
from rich.table import Table

from sandboxes import SandboxPool, SandboxSpec, get_backend

CMD = ["python3", "-c", "pass"]
IMAGE = "trajlake-base"
SPEC = SandboxSpec(memory_mb=512, pids=128, disk_mb=128, exec_timeout_s=60)
console = Console()


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


def stats(samples: list[float]) -> dict[str, float]:
    return {"p50_ms": pct(samples, 50) * 1e3, "p99_ms": pct(samples, 99) * 1e3, "n": len(samples)}


def timed(fn: Any, rounds: int, warmup: int = 3) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def make_template(root: Path) -> Path:
    for i in range(200):
        d = root / f"pkg{i % 10}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.py").write_bytes(os.urandom(20 << 10))
    return root


def raw_bwrap() -> list[str]:
    """The same namespaces on the same root filesystem, and nothing else (no cgroups, overlay, accounting)."""
    from sandboxes import ImageStore
    from sandboxes.registry import SandboxConfig

    store = ImageStore(SandboxConfig().image_store)
    rootfs = store.rootfs(store.get(IMAGE))
    return [
        "bwrap", "--unshare-user", "--uid", "1000", "--gid", "1000", "--unshare-pid", "--unshare-net",
        "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
        "--ro-bind", str(rootfs), "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--", *CMD,
    ]  # fmt: skip


def bench_backend(name: str, rounds: int, threads: list[int], template: Path) -> dict[str, Any]:
    backend = get_backend(name)
    backend.ensure_available()
    image = IMAGE  # both backends on the same root filesystem
    res: dict[str, Any] = {}
    spec = SPEC.with_(image=image)
    cold_rounds = max(10, rounds // 4)

    def cold() -> None:
        with backend.create(spec) as sb:
            assert sb.exec(CMD).exit_code == 0

    res["cold"] = stats(timed(cold, cold_rounds))

    with SandboxPool(backend, spec, max_size=2, warm=2) as pool:
        assert pool.wait_warm(120)

        def warm() -> None:
            sb = pool.acquire(timeout=60)
            assert sb.exec(CMD).exit_code == 0
            pool.release(sb)

        res["warm"] = stats(timed(warm, rounds))
        m = pool.metrics()
        res["warm"]["acquire_p50_ms"] = (m.acquire_p50_s or 0) * 1e3
        res["warm"]["warm_hits"] = m.warm_hits
        res["warm"]["acquired"] = m.acquired

    with backend.create(spec.with_(workspace=template)) as sb:
        res["exec"] = stats(timed(lambda: sb.exec(CMD), rounds))
        snaps: list[float] = []
        restores: list[float] = []
        for i in range(max(10, rounds // 5)):
            sb.exec(f"echo {i} > pkg0/changed{i}.txt; rm -f pkg1/f{i * 10 + 1}.py")
            t = time.perf_counter()
            ref = sb.snapshot()
            snaps.append(time.perf_counter() - t)
            sb.exec("rm -rf pkg2")
            t = time.perf_counter()
            sb.restore(ref)
            restores.append(time.perf_counter() - t)
            if i % 20 == 19:
                sb.reset()
        res["snapshot"] = stats(snaps)
        res["restore"] = stats(restores)

    res["throughput"] = {}
    for n in threads:
        sandboxes = [backend.create(spec) for _ in range(n)]
        count = [0] * n
        stop = time.monotonic() + 4.0

        def loop(i: int, sandboxes: list[Any], count: list[int], stop: float) -> None:
            while time.monotonic() < stop:
                sandboxes[i].exec(CMD)
                count[i] += 1

        ts = [threading.Thread(target=loop, args=(i, sandboxes, count, stop)) for i in range(n)]
        t0 = time.monotonic()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        res["throughput"][n] = sum(count) / (time.monotonic() - t0)
        for sb in sandboxes:
            sb.close()
    backend.close()
    return res


def bench_baselines(rounds: int, backends: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "local" in backends:
        argv = raw_bwrap()
        out["raw_bwrap"] = stats(timed(lambda: subprocess.run(argv, check=True), rounds))
    if "docker" in backends:
        import docker

        from sandboxes import ImageStore
        from sandboxes.registry import SandboxConfig

        image_id = ImageStore(SandboxConfig().image_store).get("trajlake-base").image_id
        client = docker.from_env()

        def docker_run() -> None:
            client.containers.run(image_id, CMD, remove=True, network_mode="none", user="1000:1000")

        out["raw_docker_run"] = stats(timed(docker_run, max(10, rounds // 4)))
        c = client.containers.run(
            image_id, ["sleep", "infinity"], detach=True, network_mode="none", init=True
        )
        try:
            out["raw_docker_exec"] = stats(timed(lambda: c.exec_run(CMD, user="1000:1000"), rounds))
        finally:
            c.remove(force=True)
        client.close()
    return out


SETUP = [
    "mkdir -p gen && python3 -c \"import pathlib; [pathlib.Path(f'gen/m{i}.py').write_text("
    "''.join(f'def f{j}(x):\\n    return x * {j}\\n' for j in range(60))) for i in range(300)]\"",
    "python3 -m compileall -q gen",
]
"""A build step: 300 generated modules, byte-compiled (what a task's setup commonly does)."""


def make_setup_task(root: Path) -> Path:
    """pyfix-004 with a setup that builds part of its workspace."""
    import shutil

    import yaml

    tasks = Path(__file__).resolve().parents[1] / "tasks" / "pyfix"
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(tasks / "family.yaml", root / "family.yaml")
    dest = root / "pyfix-004"
    shutil.copytree(tasks / "pyfix-004", dest)
    spec = yaml.safe_load((dest / "task.yaml").read_text())
    spec.setdefault("initial_state", {})["setup"] = SETUP
    (dest / "task.yaml").write_text(yaml.safe_dump(spec))
    return dest


def bench_state_cache(name: str, rounds: int, root: Path) -> dict[str, Any]:
    """Acquire-to-first-action, prepared cold against prepared from the state cache."""
    from judges.final_state import read_archive
    from judges.state_cache import StateCache
    from judges.tasks import load_task

    task = load_task(make_setup_task(root / "tasks"))
    backend = get_backend(name)
    cache = StateCache(root / f"cache-{name}")
    digests: dict[str, set[str]] = {"cold": set(), "cached": set()}
    with SandboxPool(backend, SPEC.with_(image=IMAGE), max_size=1) as pool:

        def attempt(kind: str, check: bool = False) -> None:
            with pool.lease(image=IMAGE, workspace=task.initial_dir) as sb:
                if kind == "cold":
                    task.prepare(sb)
                else:
                    cache.prepare(task, sb)
                sb.exec(["true"], timeout=30)  # the first action
                if check:  # (outside the timed rounds)
                    digests[kind].add(read_archive(sb.export_workspace()).digest)

        n = max(5, rounds // 10)
        cold = timed(lambda: attempt("cold"), n, warmup=1)
        cached = timed(lambda: attempt("cached"), n, warmup=1)
        for kind in ("cold", "cached", "cold", "cached"):
            attempt(kind, check=True)
    backend.close()
    return {"cold": stats(cold), "cached": stats(cached), "rounds": n, "hits": cache.hits,
            "misses": cache.misses, "same_tree": len(digests["cold"] | digests["cached"]) == 1,
            "ratio_p50": stats(cold)["p50_ms"] / stats(cached)["p50_ms"]}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description="sandbox latency and throughput vs raw bwrap / docker")
    ap.add_argument("--backends", default="local,docker")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--threads", default="1,2,4")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--state-cache-only", action="store_true", help="Only the state cache measurement.")
    args = ap.parse_args()
    backends = args.backends.split(",")
    threads = [int(x) for x in args.threads.split(",")]
    results: dict[str, Any] = {"machine": {"cpus": os.cpu_count()}, "backends": {}}
    if args.state_cache_only:
        _state_cache_report(results, backends, args.rounds)
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
        return
    with tempfile.TemporaryDirectory() as tmp:
        template = make_template(Path(tmp))
        for name in backends:
            console.print(f"[bold]{name}[/bold] ...")
            results["backends"][name] = bench_backend(name, args.rounds, threads, template)
    results["baselines"] = bench_baselines(args.rounds, backends)

    table = Table(title=f"sandboxes: `python3 -c pass`, {os.cpu_count()} cores")
    for col in ("backend", "measure", "p50 ms", "p99 ms", "baseline", "ratio p50"):
        table.add_column(col, justify="right" if col not in ("backend", "measure", "baseline") else "left")
    base_of = {"local": "raw_bwrap", "docker": "raw_docker_run"}
    for name, r in results["backends"].items():
        base = results["baselines"].get(base_of[name])
        for measure in ("cold", "warm", "exec", "snapshot", "restore"):
            s = r[measure]
            bname, ratio = "", ""
            if measure in ("cold", "warm", "exec") and base:
                ref = base
                bname = base_of[name]
                if name == "docker" and measure in ("warm", "exec"):
                    ref, bname = results["baselines"]["raw_docker_exec"], "raw_docker_exec"
                ratio = f"{s['p50_ms'] / ref['p50_ms']:.2f}x"
            table.add_row(name, measure, f"{s['p50_ms']:.1f}", f"{s['p99_ms']:.1f}", bname, ratio)
        tput = ", ".join(f"{n}: {v:.0f}/s" for n, v in r["throughput"].items())
        table.add_row(name, "throughput", tput, "", "", "")
    for bname, s in results["baselines"].items():
        table.add_row("-", bname, f"{s['p50_ms']:.1f}", f"{s['p99_ms']:.1f}", "", "")
    console.print(table)
    _state_cache_report(results, backends, args.rounds)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


def _state_cache_report(results: dict[str, Any], backends: list[str], rounds: int) -> None:
    table = Table(title="acquire to first action, a task with a build step: cold against the state cache")
    for col in ("backend", "cold p50 ms", "cached p50 ms", "cold / cached", "same tree", "hits", "misses"):
        table.add_column(col)
    for name in backends:
        with tempfile.TemporaryDirectory() as tmp:
            r = bench_state_cache(name, rounds, Path(tmp))
        results.setdefault("state_cache", {})[name] = r
        cells = (f"{r['cold']['p50_ms']:.0f}", f"{r['cached']['p50_ms']:.0f}", f"{r['ratio_p50']:.2f}x")
        table.add_row(name, *cells, str(r["same_tree"]), str(r["hits"]), str(r["misses"]))
    console.print(table)


if __name__ == "__main__":
    main()
