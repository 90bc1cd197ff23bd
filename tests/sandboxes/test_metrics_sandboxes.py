"""The pool's Prometheus metrics move with real leases, a real crash and a real tool timeout.

Counters accumulate over a session and the pool gauges sum over every open pool of the process,
so each assertion is on a difference from the value read before.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from sandboxes import SandboxBackend, SandboxCrashedError, SandboxPool, SandboxSpec
from sandboxes.tools import ToolAction, run_tool
from tests.sandboxes.test_pool import _kill_from_outside
from tests.waiting import wait_until

SMALL = SandboxSpec(memory_mb=256, pids=64, disk_mb=32, tmp_mb=8, exec_timeout_s=30)
NAMES = (
    "trajlake_sandbox_pool_size", "trajlake_sandbox_pool_in_use", "trajlake_sandbox_acquires_total",
    "trajlake_sandbox_acquire_seconds_count", "trajlake_sandbox_crashes_total",
    "trajlake_sandbox_timeouts_total",
)  # fmt: skip


def test_pool_metrics_follow_leases_a_crash_and_a_tool_timeout(local_backend: SandboxBackend) -> None:
    labels = {"backend": local_backend.name}
    before = {n: REGISTRY.get_sample_value(n, labels) or 0.0 for n in NAMES}

    def moved() -> dict[str, float]:
        return {n[len("trajlake_sandbox_") :]: (REGISTRY.get_sample_value(n, labels) or 0.0) - before[n]
                for n in NAMES}  # fmt: skip

    pool = SandboxPool(local_backend, SMALL, max_size=2)
    try:
        assert moved()["pool_size"] == 2 and moved()["pool_in_use"] == 0
        sb = pool.acquire(timeout=120)
        assert moved()["pool_in_use"] == 1
        assert moved()["acquires_total"] == 1 and moved()["acquire_seconds_count"] == 1
        out = run_tool(sb, ToolAction("bash", {"command": "sleep 30"}), timeout=1.0)
        assert out.timed_out and moved()["timeouts_total"] == 1
        assert not run_tool(sb, ToolAction("bash", {"command": "true"}), timeout=10).timed_out
        assert moved()["timeouts_total"] == 1
        pool.release(sb)
        assert moved()["pool_in_use"] == 0

        # a sandbox that dies inside a lease: the pool destroys and replaces it, and counts it
        with pytest.raises(SandboxCrashedError):
            with pool.lease(timeout=120) as sb:
                listed = set(sb._cgroup.procs())  # type: ignore[attr-defined]
                killer = threading.Thread(target=_kill_when_running, args=(sb, listed))
                killer.start()
                try:
                    sb.exec("sleep 20", timeout=25)
                finally:
                    killer.join(60)
        wait_until(lambda: moved()["crashes_total"] == 1, timeout=60, what="the crash counted")
        assert moved()["acquires_total"] == 2 and moved()["pool_in_use"] == 0
    finally:
        pool.close()
    assert moved()["pool_size"] == 0  # a closed pool is no longer counted


def _kill_when_running(sb: object, listed: set[int]) -> None:
    """Kill the sandbox from outside once its command runs (found through its cgroup).

    It waits for the command itself (a ``sleep`` not in ``listed``, the processes listed before
    the exec started), not for any ``bwrap``: the processes of the sandbox's earlier execs may
    still be listed in the cgroup while they are reaped, and killing one of those (seen once in
    CI, on a loaded machine) left the exec under test running to its end.
    """
    wait_until(lambda: any(p not in listed and _comm(p) == "sleep" for p in sb._cgroup.procs()),  # type: ignore[attr-defined]
               timeout=60, what="the exec's command")  # fmt: skip
    _kill_from_outside(sb)


def _comm(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None
