"""Several rollout workers in parallel processes, each with its own producer and sandboxes.

Workers never talk to the learner: they build their policy from a spec (the
learner's checkpoints are files named in the ``checkpoints`` table), and what
they do reaches the learner only through the log and the tables.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import queue as queue_mod
import signal
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollouts.errors import RolloutWorkerError
from rollouts.sampler import Assignment
from rollouts.worker import EpisodeOutcome
from sandboxes.interface import SandboxSpec
from sandboxes.registry import SandboxConfig
from schemas import fixes
from schemas.errors import TrajlakeError

ROLLOUT_SPEC = SandboxSpec(memory_mb=1024, pids=256, disk_mb=256, tmp_mb=128, exec_timeout_s=120)


@dataclass(frozen=True)
class RolloutConfig:
    """What every worker process needs to start."""

    bootstrap: str
    home: str
    topic: str
    policy_factory: str
    """``module:function(spec, *, worker_index)`` that turns ``policy_spec`` into a policy inside a worker."""
    policy_spec: str
    sandbox_backend: str = "local"
    sandbox_config: SandboxConfig = field(default_factory=SandboxConfig)
    workers: int = 2
    sandboxes_per_worker: int = 1
    metadata: dict[str, Any] = field(default_factory=dict)
    state_cache: bool = True
    """Share tasks' prepared initial states across attempts and workers (``$home/cache/states``)."""
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    metrics_port: int | None = None
    """Worker ``i`` serves its Prometheus metrics on ``metrics_port + i`` (0: each on a free port;
    ``None``: not served). Served only with ``metrics_server``."""
    metrics_host: str = "127.0.0.1"
    """Address the workers' metrics ports bind."""
    metrics_server: str | None = None
    """``module:function(port, host) -> bound port`` that serves a worker's default registry (named
    by the composition root, as ``policy_factory`` is)."""


def _resolve(path: str) -> Callable[..., Any]:
    module, _, name = path.partition(":")
    fn: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return fn


class _Stopped(BaseException):
    """The parent asked this worker to stop (SIGTERM); like Ctrl-C, no ``except Exception`` takes it."""


def _stop(signum: int, frame: Any) -> None:
    raise _Stopped("stopped by the parent")


def _worker_main(idx: int, cfg: RolloutConfig, assignments: list[Assignment], out: Any) -> None:
    # Ctrl-C reaches every process of the terminal's group: the parent alone decides, and stops the
    # workers with SIGTERM, which ends the episode in flight as `aborted` through the recorder.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _stop)
    # one CPU thread per worker process: the workers are the parallelism
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    closers: list[Callable[[], None]] = []
    stopping = False
    try:
        from ingest.recorder import EpisodeRecorder
        from judges.state_cache import StateCache
        from judges.tasks import load_task
        from rollouts.worker import run_episode
        from sandboxes.pool import SandboxPool
        from sandboxes.registry import get_backend

        if cfg.metrics_port is not None and cfg.metrics_server:
            # the recorder, the sandboxes and the judge all run here: this process's registry has them
            port = cfg.metrics_port + idx if cfg.metrics_port else 0
            bound = _resolve(cfg.metrics_server)(port, cfg.metrics_host)
            out.put(("metrics", f"worker {idx}: metrics on http://{cfg.metrics_host}:{bound}/metrics"))
        # each worker gets its own index, so that seeded policies do not repeat each other's samples
        policy = _resolve(cfg.policy_factory)(cfg.policy_spec, worker_index=idx)
        closers.append(policy.close)
        backend = get_backend(cfg.sandbox_backend, cfg.sandbox_config)
        closers.append(backend.close)
        tasks: dict[str, Any] = {}
        cache = StateCache(Path(cfg.home) / "cache" / "states") if cfg.state_cache else None
        rec = EpisodeRecorder.open(
            bootstrap=cfg.bootstrap,
            home=Path(cfg.home),
            worker_id=worker_id(cfg, idx),
            topic=cfg.topic,
            delivery="inline",
        )
        # stopped: what is not acknowledged within seconds stays in the spool, for the parent to send
        closers.append(lambda: rec.close(timeout=5 if stopping else 30))
        with SandboxPool(backend, ROLLOUT_SPEC, max_size=cfg.sandboxes_per_worker) as pool:
            for a in assignments:
                task = tasks.get(a.task_dir) or tasks.setdefault(a.task_dir, load_task(a.task_dir))
                meta = {**cfg.metadata, **(a.metadata or {}),
                        **({"group_size": a.group_size} if a.group_size else {})}  # fmt: skip
                outcome = run_episode(
                    task,
                    policy,
                    pool,
                    rec,
                    group_id=a.group_id,
                    attempt=a.attempt,
                    metadata=meta,
                    state_cache=cache,
                )
                out.put(("episode", outcome))
        rec.flush(timeout=120)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which decides
        stopping = isinstance(exc, _Stopped)
        out.put(("error", f"worker {idx}: {exc}" if isinstance(exc, TrajlakeError | _Stopped)
                 else f"worker {idx}: {type(exc).__name__}: {exc}"))  # fmt: skip
    finally:
        for close in reversed(closers):
            try:
                close()
            except Exception:  # noqa: BLE001, S110 - closing what is left; the error above is what counts
                pass
        out.put(("done", idx))


def run_rollouts(
    cfg: RolloutConfig,
    assignments: list[Assignment],
    *,
    on_outcome: Callable[[EpisodeOutcome], None] | None = None,
    timeout_s: float = 3600.0,
    on_metrics: Callable[[str], None] | None = None,
) -> list[EpisodeOutcome]:
    """Run the assignments over ``cfg.workers`` processes; return every outcome.

    With ``cfg.metrics_port``, ``on_metrics`` hears where each worker serves its metrics.

    Raises:
        RolloutWorkerError: a worker process failed outside any episode (e.g. its policy did not load).
        KeyboardInterrupt: Ctrl-C; the workers were stopped first (their episodes in flight end
            ``aborted``).
    """
    if not assignments:
        return []
    n = max(1, min(cfg.workers, len(assignments)))
    shares: list[list[Assignment]] = [[] for _ in range(n)]
    for i, a in enumerate(assignments):
        shares[i % n].append(a)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_worker_main, args=(i, cfg, share, out), daemon=True)
        for i, share in enumerate(shares)
    ]
    for p in procs:
        p.start()
    try:
        outcomes, errors = _collect(procs, out, n, on_outcome, timeout_s, on_metrics)
    except KeyboardInterrupt:
        for p in procs:
            if p.is_alive():
                p.terminate()
        raise
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
        _deliver_leftovers(cfg, n)
    if errors:
        raise RolloutWorkerError("; ".join(errors))
    return outcomes


def worker_id(cfg: RolloutConfig, idx: int) -> str:
    """The recorder (spool) id of worker ``idx`` of a run."""
    return f"rollout-{cfg.run_id}-{idx}"


def _deliver_leftovers(cfg: RolloutConfig, n: int, timeout_s: float = 15.0) -> None:
    """Send what stopped or crashed workers left in their spools (their ids are never reused)."""
    import logging

    from ingest.recorder import EpisodeRecorder
    from schemas.errors import TrajlakeError

    for idx in range(n):
        spool = Path(cfg.home) / "spool" / worker_id(cfg, idx)
        if not any(spool.glob("seg-*.log")):
            continue
        try:
            rec = EpisodeRecorder.open(
                bootstrap=cfg.bootstrap,
                home=Path(cfg.home),
                worker_id=worker_id(cfg, idx),
                topic=cfg.topic,
                delivery="inline",
            )
            try:
                rec.flush(timeout=timeout_s)
            finally:
                rec.close(timeout=1)
        except (TrajlakeError, OSError) as exc:
            logging.getLogger(__name__).warning("%s; %s", exc, fixes.SPOOL_DRAIN.render())


def _collect(
    procs: list[Any],
    out: Any,
    n: int,
    on_outcome: Callable[[EpisodeOutcome], None] | None,
    timeout_s: float,
    on_metrics: Callable[[str], None] | None = None,
) -> tuple[list[EpisodeOutcome], list[str]]:
    outcomes: list[EpisodeOutcome] = []
    errors: list[str] = []
    done = 0
    deadline = time.monotonic() + timeout_s
    while done < n:
        try:
            kind, value = out.get(timeout=1.0)
        except queue_mod.Empty:
            if time.monotonic() > deadline:
                errors.append("rollouts timed out")
                break
            if all(not p.is_alive() for p in procs) and out.empty():
                errors.append("workers exited without reporting")
                break
            continue
        if kind == "episode":
            outcomes.append(value)
            if on_outcome:
                on_outcome(value)
        elif kind == "error":
            errors.append(value)
        elif kind == "metrics":
            if on_metrics:
                on_metrics(value)
        else:
            done += 1
    return outcomes, errors
