"""A pool of warm sandboxes: bounded, fair, health-checked, self-healing.

``acquire`` hands out a sandbox of the requested image in its initial state
(re-templated to the requested workspace), waiting in a FIFO queue up to a
timeout when every slot is in use. ``release`` returns it to a maintenance
thread that resets and health-checks it off the caller's path, then makes it
available again; a sandbox that crashed, hung, failed its check or was killed
from outside is destroyed and replaced. A crash inside a lease surfaces as
:class:`~sandboxes.errors.SandboxCrashedError`, an ``InfraError``, so the
episode that held it ends as ``infra_error``, never as a policy failure.

Every lifecycle step of a leased sandbox goes to the lease's listener (rollout
workers point it at ``Episode.sandbox``), and the pool keeps metrics: acquire
latency, in use, idle, waiting, created, destroyed, crashed, timeouts.
"""

from __future__ import annotations

import contextlib
import logging
import statistics
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sandboxes import metrics as sandbox_metrics
from sandboxes.errors import PoolClosedError, PoolTimeoutError, SandboxError
from sandboxes.interface import LifecycleListener, Sandbox, SandboxSpec
from sandboxes.registry import SandboxBackend
from schemas.errors import InfraError
from schemas.events import ResourceUsage

log = logging.getLogger(__name__)


def _percentile(samples: list[float], q: float) -> float | None:
    if not samples:
        return None
    if len(samples) == 1:
        return samples[0]
    return statistics.quantiles(samples, n=100, method="inclusive")[min(98, max(0, int(q) - 1))]


@dataclass(frozen=True)
class PoolMetrics:
    """A snapshot of the pool's counters and gauges."""

    in_use: int
    """Sandboxes leased out now."""
    idle: int
    """Warm sandboxes ready to hand out."""
    cleaning: int
    """Released sandboxes being reset and checked."""
    pending: int
    """Slots reserved for sandboxes being started or prepared for a lease."""
    maintaining: int
    """Sandboxes being reset, health-checked or destroyed by the maintainer."""
    waiting: int
    """Callers queued in ``acquire``."""
    acquired: int
    """Leases handed out so far."""
    created: int
    """Sandboxes started so far."""
    destroyed: int
    """Sandboxes closed so far."""
    crashed: int
    """Sandboxes found broken (crashed, hung, killed from outside) and replaced."""
    acquire_timeouts: int
    """``acquire`` calls that gave up."""
    acquire_p50_s: float | None
    """Median seconds from ``acquire`` to a ready sandbox."""
    acquire_p99_s: float | None
    """99th percentile of the same."""
    warm_hits: int
    """Acquires served by a warm sandbox (no start on the caller's path)."""
    latencies_s: list[float] = field(default_factory=list, repr=False)
    """The acquire latency samples (most recent ones)."""


class _Waiter:
    __slots__ = ("image",)

    def __init__(self, image: str | None) -> None:
        self.image = image


class SandboxPool:
    """Warm sandboxes per image behind a bounded, fair ``acquire``.

    Args:
        backend: makes the sandboxes.
        spec: limits and default image of every sandbox (``image`` and
            ``workspace`` are chosen per acquire).
        max_size: most sandboxes alive at once (leased, idle, cleaning, starting).
        warm: how many idle sandboxes to keep ready per image (an int: for the
            spec's image).
        health_timeout: seconds a health probe may take before the sandbox counts as hung.
        health_interval: seconds between health probes of idle sandboxes.
        probe_every: a released sandbox is reset and checked for liveness every time, and
            probed with a command every this many releases (and whenever idle too long).
        listener: receives lifecycle steps that happen outside any lease.
    """

    def __init__(
        self,
        backend: SandboxBackend,
        spec: SandboxSpec | None = None,
        *,
        max_size: int = 4,
        warm: int | Mapping[str | None, int] = 0,
        health_timeout: float = 10.0,
        health_interval: float = 30.0,
        probe_every: int = 8,
        listener: LifecycleListener | None = None,
    ) -> None:
        if max_size < 1:
            raise ValueError("max_size must be at least 1")
        self.backend = backend
        self.spec = spec or SandboxSpec()
        self.max_size = max_size
        self.warm: dict[str | None, int] = {self.spec.image: warm} if isinstance(warm, int) else dict(warm)
        if sum(self.warm.values()) > max_size:
            raise ValueError(f"warm sandboxes {sum(self.warm.values())} exceed max_size {max_size}")
        self.health_timeout = health_timeout
        self.health_interval = health_interval
        self.probe_every = max(1, probe_every)
        self._releases = 0
        self.listener = listener
        self._cond = threading.Condition()
        self._idle: dict[str | None, deque[tuple[Sandbox, float]]] = {}
        self._queue: deque[_Waiter] = deque()
        self._cleaning: deque[tuple[Sandbox, str]] = deque()  # (sandbox, reuse|broken|evict)
        self._in_use: dict[str, tuple[Sandbox, float]] = {}
        self._pending = 0
        self._maintaining = 0  # popped by the maintainer, not yet idle or destroyed
        self._closed = False
        self._counts = dict.fromkeys(
            ("acquired", "created", "destroyed", "crashed", "acquire_timeouts", "warm_hits"), 0
        )
        self._latencies: deque[float] = deque(maxlen=10_000)
        self._maintainer = threading.Thread(target=self._maintain, name="sandbox-pool", daemon=True)
        self._maintainer.start()
        sandbox_metrics.track_pool(self)

    # ---------------------------------------------------------------- public

    def acquire(
        self,
        *,
        image: str | None = None,
        workspace: Path | None = None,
        timeout: float = 30.0,
        listener: LifecycleListener | None = None,
    ) -> Sandbox:
        """A sandbox of ``image`` in the initial state ``workspace``, leased to the caller.

        Args:
            image: base image (default: the pool spec's).
            workspace: the initial state of the workspace for this lease.
            timeout: seconds to wait for a free slot.
            listener: receives this lease's lifecycle steps (``acquired`` first).

        Raises:
            PoolTimeoutError: no slot within ``timeout`` (an ``InfraError``).
            PoolClosedError: the pool is closed.
            SandboxUnavailableError: a new sandbox could not be started.
        """
        image = image if image is not None else self.spec.image
        start = time.monotonic()
        deadline = start + timeout
        waiter = _Waiter(image)
        sandbox: Sandbox | None = None
        warm_hit = False
        with self._cond:
            self._queue.append(waiter)
            try:
                while True:
                    if self._closed:
                        raise PoolClosedError("the sandbox pool is closed")
                    if self._queue[0] is waiter:
                        sandbox, warm_hit, reserve = self._take(image)
                        if sandbox is not None or reserve:
                            break
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        self._counts["acquire_timeouts"] += 1
                        raise PoolTimeoutError(
                            f"no sandbox free within {timeout}s ({len(self._in_use)} in use, "
                            f"max {self.max_size}, {len(self._queue) - 1} waiting ahead or behind)"
                        )
                    self._cond.wait(remaining)
            finally:
                self._queue.remove(waiter)
                self._cond.notify_all()
        if sandbox is not None and not sandbox.is_alive():
            # killed from outside while idle: replace it and try again
            self._discard(sandbox, "found dead when acquired")
            with self._cond:
                self._pending -= 1
                self._cond.notify_all()
            remaining = deadline - time.monotonic()
            return self.acquire(
                image=image, workspace=workspace, timeout=max(remaining, 0.001), listener=listener
            )
        try:
            if sandbox is None:
                sandbox = self._create(image, workspace)
            elif workspace != sandbox.spec.workspace:
                sandbox.listener = listener
                sandbox.reset(workspace=workspace)
        except BaseException as exc:
            if sandbox is not None:
                self._discard(sandbox, f"re-templating failed: {exc}")
            with self._cond:
                self._pending -= 1
                self._cond.notify_all()
            raise
        held_since = time.monotonic()
        with self._cond:
            self._pending -= 1
            self._in_use[sandbox.id] = (sandbox, held_since)
            self._counts["acquired"] += 1
            self._counts["warm_hits"] += int(warm_hit)
            self._latencies.append(held_since - start)
        sandbox_metrics.ACQUIRES.labels(self.backend.name).inc()
        sandbox_metrics.ACQUIRE_SECONDS.labels(self.backend.name).observe(held_since - start)
        sandbox.listener = listener
        sandbox.emit("acquired", detail=f"waited {held_since - start:.4f}s")
        return sandbox

    def release(self, sandbox: Sandbox, *, broken: bool = False, reason: str | None = None) -> None:
        """Give a leased sandbox back: it is reset and checked before anyone gets it again.

        Args:
            sandbox: a sandbox this pool leased.
            broken: the holder saw it crash or hang; destroy and replace it.
            reason: why it is broken (recorded in the ``crashed`` event).
        """
        with self._cond:
            entry = self._in_use.pop(sandbox.id, None)
            if entry is None:
                raise SandboxError(f"sandbox {sandbox.id} is not leased from this pool")
            held = time.monotonic() - entry[1]
        try:
            if broken:
                sandbox.emit("crashed", detail=reason)
            sandbox.emit("released", usage=ResourceUsage(wall_s=round(held, 6)))
        finally:
            sandbox.listener = self.listener
            with self._cond:
                self._cleaning.append((sandbox, "broken" if broken or sandbox.closed else "reuse"))
                self._cond.notify_all()

    @contextlib.contextmanager
    def lease(
        self,
        *,
        image: str | None = None,
        workspace: Path | None = None,
        timeout: float = 30.0,
        listener: LifecycleListener | None = None,
    ) -> Iterator[Sandbox]:
        """``acquire`` for a ``with`` block; a crash inside marks the sandbox broken.

        The exception still propagates: an ``InfraError`` ends the episode as
        ``infra_error`` in the recorder.
        """
        sandbox = self.acquire(image=image, workspace=workspace, timeout=timeout, listener=listener)
        broken: str | None = None
        try:
            yield sandbox
        except BaseException as exc:
            if isinstance(exc, SandboxError) and isinstance(exc, InfraError):
                broken = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            self.release(sandbox, broken=broken is not None, reason=broken)

    @property
    def in_use(self) -> int:
        """Sandboxes leased out now."""
        with self._cond:
            return len(self._in_use)

    def metrics(self) -> PoolMetrics:
        """Counters and gauges now."""
        with self._cond:
            lat = list(self._latencies)
            return PoolMetrics(
                in_use=len(self._in_use),
                idle=sum(len(q) for q in self._idle.values()),
                cleaning=len(self._cleaning),
                pending=self._pending,
                maintaining=self._maintaining,
                waiting=len(self._queue),
                acquire_p50_s=_percentile(lat, 50),
                acquire_p99_s=_percentile(lat, 99),
                latencies_s=lat,
                **self._counts,
            )

    def wait_warm(self, timeout: float = 60.0) -> bool:
        """Block until every image has its warm sandboxes idle; ``False`` on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._closed:
                if all(len(self._idle.get(img, ())) >= n for img, n in self.warm.items()):
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return False

    def close(self) -> None:
        """Destroy every idle sandbox and stop; leased ones are destroyed when released."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            idle = [sb for q in self._idle.values() for sb, _ in q]
            self._idle.clear()
            self._cond.notify_all()
        sandbox_metrics.untrack_pool(self)
        self._maintainer.join(timeout=60)
        for sandbox in idle:
            self._destroy(sandbox)
        with self._cond:
            cleaning = list(self._cleaning)
            self._cleaning.clear()
        for sandbox, _ in cleaning:
            self._destroy(sandbox)

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------- internals

    def _alive(self) -> int:
        return (
            len(self._in_use)
            + sum(len(q) for q in self._idle.values())
            + len(self._cleaning)
            + self._pending
            + self._maintaining
        )

    def _take(self, image: str | None) -> tuple[Sandbox | None, bool, bool]:
        """Under the lock: an idle sandbox of ``image``, or a reserved slot to start one."""
        idle = self._idle.get(image)
        while idle:
            sandbox, _ = idle.popleft()
            if not sandbox.closed:
                self._pending += 1  # its slot, until it is in use
                return sandbox, True, False
        if self._alive() < self.max_size:
            self._pending += 1
            return None, False, True
        # Full, but an idle sandbox of another image can make room: the
        # maintainer destroys it and the slot frees up for this waiter.
        for other, queue in self._idle.items():
            if other != image and queue:
                victim, _ = queue.popleft()
                self._cleaning.append((victim, "evict"))
                self._cond.notify_all()
                break
        return None, False, False

    def _create(self, image: str | None, workspace: Path | None) -> Sandbox:
        spec = self.spec.with_(image=image, workspace=workspace)
        sandbox = self.backend.create(spec)
        sandbox.listener = self.listener
        sandbox.emit("created")
        with self._cond:
            self._counts["created"] += 1
        return sandbox

    def _destroy(self, sandbox: Sandbox) -> None:
        sandbox.listener = self.listener
        try:
            sandbox.close()
        except Exception:  # noqa: BLE001 - a broken sandbox may fail to close cleanly
            log.exception("closing sandbox %s failed", sandbox.describe())
        with self._cond:
            self._counts["destroyed"] += 1

    def _discard(self, sandbox: Sandbox, reason: str) -> None:
        sandbox.emit("crashed", detail=reason)
        with self._cond:
            self._counts["crashed"] += 1
        sandbox_metrics.CRASHES.labels(self.backend.name).inc()
        self._destroy(sandbox)

    def _maintain(self) -> None:
        """Reset and check released sandboxes, probe idle ones, keep the warm counts."""
        while True:
            job: tuple[Sandbox, str] | None = None
            refill: str | None | bool = False
            probe: tuple[Sandbox, str | None] | None = None
            with self._cond:
                while not self._closed:
                    if self._cleaning:
                        job = self._cleaning.popleft()
                        self._maintaining += 1
                        break
                    refill = self._refill_image()
                    if refill is not False:
                        self._pending += 1
                        break
                    probe = self._stale_idle()
                    if probe is not None:
                        break
                    self._cond.wait(timeout=min(self.health_interval, 1.0))
                if self._closed and job is None:
                    return
            try:
                if job is not None:
                    self._clean(*job)
                elif refill is not False:
                    self._warm_one(refill if isinstance(refill, str) else None)
                elif probe is not None:
                    self._probe(*probe)
            finally:
                if job is not None or probe is not None:
                    with self._cond:
                        self._maintaining -= 1
                        self._cond.notify_all()

    def _refill_image(self) -> str | None | bool:
        if self._queue and self._alive() >= self.max_size:
            return False
        for image, want in self.warm.items():
            if len(self._idle.get(image, ())) < want and self._alive() < self.max_size:
                return image
        return False

    def _stale_idle(self) -> tuple[Sandbox, str | None] | None:
        now = time.monotonic()
        for image, queue in self._idle.items():
            if queue and now - queue[0][1] > self.health_interval:
                sandbox, _ = queue.popleft()
                self._maintaining += 1  # holds its slot while probed
                return sandbox, image
        return None

    def _make_idle(self, sandbox: Sandbox, image: str | None) -> None:
        with self._cond:
            if self._closed:
                closing = True
            else:
                closing = False
                self._idle.setdefault(image, deque()).append((sandbox, time.monotonic()))
            self._cond.notify_all()
        if closing:
            self._destroy(sandbox)

    def _healthy(self, sandbox: Sandbox) -> str | None:
        try:
            sandbox.check_health(self.health_timeout)
            return None
        except SandboxError as exc:
            return f"{type(exc).__name__}: {exc}"

    def _clean(self, sandbox: Sandbox, action: str) -> None:
        image = sandbox.spec.image
        if action != "reuse" or sandbox.closed:
            if action == "broken":
                with self._cond:
                    self._counts["crashed"] += 1
                sandbox_metrics.CRASHES.labels(self.backend.name).inc()
            self._destroy(sandbox)
        else:
            with self._cond:
                self._releases += 1
                probe = self._releases % self.probe_every == 0
            try:
                sandbox.reset()
                if probe:
                    problem = self._healthy(sandbox)
                else:
                    problem = None if sandbox.is_alive() else "found dead after reset"
            except Exception as exc:  # noqa: BLE001 - whatever the last lease left: discard it, keep the pool
                problem = f"reset failed: {type(exc).__name__}: {exc}"
            if problem is None:
                self._make_idle(sandbox, image)
                return
            self._discard(sandbox, problem)
        with self._cond:
            self._cond.notify_all()

    def _warm_one(self, image: str | None) -> None:
        try:
            sandbox = self._create(image, None)
        except Exception:  # noqa: BLE001 - keep the pool alive; acquire will surface the error
            log.exception("starting a warm sandbox of %s failed", image)
            with self._cond:
                self._pending -= 1
                self._cond.notify_all()
            time.sleep(1.0)
            return
        with self._cond:
            self._pending -= 1
        self._make_idle(sandbox, image)

    def _probe(self, sandbox: Sandbox, image: str | None) -> None:
        problem = self._healthy(sandbox)
        if problem is None:
            self._make_idle(sandbox, image)
        else:
            self._discard(sandbox, problem)


__all__ = ["PoolMetrics", "SandboxPool"]
