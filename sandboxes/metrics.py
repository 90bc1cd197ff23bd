"""Prometheus metrics of the sandboxes (the process's default registry; served by ``--metrics-port``).

Every series carries ``backend`` (a registered backend name: ``local``, ``docker``).

- ``trajlake_sandbox_pool_size{backend}``: the pools' bound (``max_size``: sandboxes alive at
  once), so ``in_use / size`` is how full they are;
- ``trajlake_sandbox_pool_in_use{backend}``: sandboxes leased out now;
- ``trajlake_sandbox_acquire_seconds{backend}``: from ``acquire`` to a ready sandbox (the
  acquires that got one);
- ``trajlake_sandbox_acquires_total{backend}``: leases handed out;
- ``trajlake_sandbox_crashes_total{backend}``: sandboxes found broken and replaced (crashed inside
  a lease, dead when handed out, failed a reset or a health probe);
- ``trajlake_sandbox_timeouts_total{backend}``: tool calls that hit their timeout (the command was
  killed; :func:`sandboxes.tools.run_tool`).

The two gauges are summed over the open pools of the process when scraped (a collector holding
weak references), so several pools of one backend (a worker's, a judge's) add up and a closed
pool leaves no stale value behind.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import REGISTRY, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from sandboxes.pool import SandboxPool

SIZE = "trajlake_sandbox_pool_size"
IN_USE = "trajlake_sandbox_pool_in_use"

ACQUIRE_SECONDS = Histogram(
    "trajlake_sandbox_acquire_seconds",
    "Seconds from acquire to a ready sandbox.",
    ["backend"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
ACQUIRES = Counter("trajlake_sandbox_acquires", "Sandbox leases handed out.", ["backend"])
CRASHES = Counter("trajlake_sandbox_crashes", "Sandboxes found broken (crashed, hung, dead) and replaced.",
                  ["backend"])  # fmt: skip
TIMEOUTS = Counter("trajlake_sandbox_timeouts", "Tool calls that hit their timeout.", ["backend"])

_pools: weakref.WeakSet[SandboxPool] = weakref.WeakSet()
_pools_lock = threading.Lock()


def track_pool(pool: SandboxPool) -> None:
    """Count an open pool in the pool gauges (until :func:`untrack_pool` or garbage collection)."""
    with _pools_lock:
        _pools.add(pool)


def untrack_pool(pool: SandboxPool) -> None:
    """Stop counting a closed pool."""
    with _pools_lock:
        _pools.discard(pool)


class _PoolCollector(Collector):
    """The pool gauges per backend, read from the open pools when scraped."""

    def describe(self) -> list[GaugeMetricFamily]:
        return [GaugeMetricFamily(SIZE, _SIZE_HELP, labels=["backend"]),
                GaugeMetricFamily(IN_USE, _IN_USE_HELP, labels=["backend"])]  # fmt: skip

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with _pools_lock:
            pools = list(_pools)
        size: dict[str, int] = {}
        in_use: dict[str, int] = {}
        for pool in pools:
            name = pool.backend.name
            size[name] = size.get(name, 0) + pool.max_size
            in_use[name] = in_use.get(name, 0) + pool.in_use
        g_size = GaugeMetricFamily(SIZE, _SIZE_HELP, labels=["backend"])
        g_in_use = GaugeMetricFamily(IN_USE, _IN_USE_HELP, labels=["backend"])
        for name in sorted(size):
            g_size.add_metric([name], size[name])
            g_in_use.add_metric([name], in_use[name])
        yield g_size
        yield g_in_use


_SIZE_HELP = "Sandboxes the open pools may hold at once (their max_size)."
_IN_USE_HELP = "Sandboxes leased out now."
REGISTRY.register(_PoolCollector())
