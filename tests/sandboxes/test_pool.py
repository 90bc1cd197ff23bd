"""The pool against the real backends: bound, fairness, timeouts, warm hits, crash replacement."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from ingest.kafka_broker import EmbeddedKafka
from ingest.log_reader import read_events
from ingest.recorder import EpisodeRecorder
from sandboxes import (
    PoolTimeoutError,
    SandboxBackend,
    SandboxCrashedError,
    SandboxPool,
    SandboxSpec,
)
from schemas.events import SandboxPayload
from tests.waiting import wait_until

SMALL = SandboxSpec(memory_mb=256, pids=64, disk_mb=32, tmp_mb=8, exec_timeout_s=30)


def test_concurrency_bound_is_honoured(local_backend: SandboxBackend) -> None:
    pool = SandboxPool(local_backend, SMALL, max_size=2)
    inside = 0
    peak = 0
    lock = threading.Lock()
    errors: list[BaseException] = []

    both_in = threading.Event()

    def work() -> None:
        nonlocal inside, peak
        try:
            with pool.lease(timeout=120) as sb:
                with lock:
                    inside += 1
                    peak = max(peak, inside)
                    if inside == 2:
                        both_in.set()
                # hold the lease until two are in at once (however slow a loaded machine makes the
                # second one's creation): a pool that allowed only one would time out here
                both_in.wait(120)
                r = sb.exec("sleep 0.2; echo done")
                assert r.stdout == "done\n"
                with lock:
                    inside -= 1
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    m = pool.metrics()
    pool.close()
    assert not errors, errors
    assert peak == 2, f"peak concurrency {peak} with max_size 2"
    assert m.acquired == 6 and m.created <= 2 + m.crashed
    assert m.acquire_p50_s is not None and m.acquire_p99_s is not None


def test_waiters_are_served_in_arrival_order(local_backend: SandboxBackend) -> None:
    with SandboxPool(local_backend, SMALL, max_size=1) as pool:
        holder = pool.acquire()
        order: list[int] = []

        def wait(i: int) -> None:
            sb = pool.acquire(timeout=120)
            order.append(i)
            pool.release(sb)

        threads = []
        for i in range(4):
            t = threading.Thread(target=wait, args=(i,))
            t.start()
            threads.append(t)
            # wait until this waiter is queued before starting the next
            wait_until(lambda i=i: pool.metrics().waiting >= i + 1, what=f"waiter {i} queued")
        pool.release(holder)
        for t in threads:
            t.join(60)
        assert order == [0, 1, 2, 3]


def test_acquire_times_out_when_full(local_backend: SandboxBackend) -> None:
    with SandboxPool(local_backend, SMALL, max_size=1) as pool:
        sb = pool.acquire()
        start = time.monotonic()
        with pytest.raises(PoolTimeoutError, match="no sandbox free within 0.3s"):
            pool.acquire(timeout=0.3)
        assert time.monotonic() - start >= 0.3
        assert pool.metrics().acquire_timeouts == 1
        pool.release(sb)
        again = pool.acquire(timeout=5)  # the slot is usable again
        pool.release(again)


def test_warm_sandboxes_are_reset_between_leases(local_backend: SandboxBackend, tmp_path: Path) -> None:
    tpl = tmp_path / "tpl"
    tpl.mkdir()
    (tpl / "task.txt").write_text("initial\n")
    with SandboxPool(local_backend, SMALL.with_(workspace=tpl), max_size=2, warm=2) as pool:
        assert pool.wait_warm(120)
        with pool.lease(workspace=tpl) as sb:
            first = sb.id
            sb.exec("echo dirty > task.txt; touch leftover")
        # the maintainer resets it off the caller's path; the next lease sees the template
        deadline = time.monotonic() + 120
        while pool.metrics().idle < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        seen = set()
        for _ in range(2):
            sb = pool.acquire(workspace=tpl)
            seen.add(sb.id)
            r = sb.exec("cat task.txt; ls")
            assert r.stdout == "initial\ntask.txt\n", r
            pool.release(sb)
        m = pool.metrics()
        assert first in seen
        assert m.warm_hits == 3 and m.created == 2


def test_lease_retemplates_a_warm_sandbox(local_backend: SandboxBackend, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for d, text in ((a, "task a"), (b, "task b")):
        d.mkdir()
        (d / "which.txt").write_text(text)
    with SandboxPool(local_backend, SMALL, max_size=1) as pool:
        with pool.lease(workspace=a) as sb:
            assert sb.read_file("which.txt") == b"task a"
        with pool.lease(workspace=b) as sb:
            assert sb.read_file("which.txt") == b"task b"


def _kill_from_outside(sb) -> None:  # type: ignore[no-untyped-def]
    """Kill the sandbox the way a crash would: its processes die from outside."""
    if sb.backend == "docker":
        subprocess.run(["docker", "kill", sb.container_id], check=True, capture_output=True)
    else:
        # the bwrap process of the running exec, found through the sandbox's cgroup
        for pid in sb._cgroup.procs():
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "bwrap":
                    os.kill(pid, signal.SIGKILL)
            except (FileNotFoundError, ProcessLookupError):
                pass


@pytest.mark.kafka
def test_sandbox_killed_mid_episode_is_replaced_and_the_episode_is_infra_error(
    backend: SandboxBackend, kafka: EmbeddedKafka, topic: str, tmp_path: Path
) -> None:
    rec = EpisodeRecorder.open(
        bootstrap=kafka.bootstrap, home=tmp_path, worker_id="pool-test", topic=topic, delivery="inline"
    )
    pool = SandboxPool(backend, SMALL, max_size=1)
    crashed_ids = []
    with pytest.raises(SandboxCrashedError):
        with rec.episode(task={"id": "t1"}, policy={"id": "p"}) as ep:
            with pool.lease(listener=ep.sandbox_step) as sb:
                crashed_ids.append(sb.id)
                assert sb.exec("echo before").stdout == "before\n"
                killer = threading.Timer(1.0, _kill_from_outside, args=(sb,))
                killer.start()
                sb.exec("sleep 20", timeout=25)
    episode_id = ep.episode_id
    # the pool replaced it: the next lease is a different, working sandbox
    with pool.lease(timeout=120) as fresh:
        assert fresh.id != crashed_ids[0]
        assert fresh.exec("echo after").stdout == "after\n"
    m = pool.metrics()
    pool.close()
    rec.flush()
    rec.close()
    assert m.crashed == 1 and m.destroyed >= 1

    events = [r.event for r in read_events(kafka.bootstrap, topic, episode_id=episode_id)]
    assert all(e is not None for e in events)
    kinds = [(e.type, getattr(e.payload, "action", None)) for e in events]  # type: ignore[union-attr]
    assert kinds[0] == ("episode_started", None)
    actions = [a for t, a in kinds if t == "sandbox"]
    assert actions == ["acquired", "crashed", "released"], kinds
    crashed = [e for e in events if e.type == "sandbox" and e.payload.action == "crashed"][0]  # type: ignore[union-attr]
    assert crashed.payload.backend == backend.name and crashed.payload.sandbox_id == crashed_ids[0]  # type: ignore[union-attr]
    assert "SandboxCrashedError" in (crashed.payload.detail or "")  # type: ignore[union-attr]
    end = events[-1]
    assert end.type == "episode_ended" and end.payload.status == "infra_error"  # type: ignore[union-attr]


def test_idle_sandbox_killed_from_outside_is_not_handed_out(docker_backend: SandboxBackend) -> None:
    # one slot: the killed sandbox is the only warm one, so acquire must notice it is dead
    with SandboxPool(docker_backend, SMALL, max_size=1, warm=1) as pool:
        assert pool.wait_warm(120)
        sb = pool.acquire()
        victim_id = sb.id
        pool.release(sb)
        deadline = time.monotonic() + 120
        while pool.metrics().idle < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        subprocess.run(["docker", "kill", sb.container_id], check=True, capture_output=True)  # type: ignore[attr-defined]
        with pool.lease(timeout=120) as fresh:
            assert fresh.id != victim_id
            assert fresh.exec("echo ok").stdout == "ok\n"
        assert pool.metrics().crashed == 1


def test_hung_sandbox_fails_its_health_check_and_is_replaced(docker_backend: SandboxBackend) -> None:
    events: list[SandboxPayload] = []
    with SandboxPool(
        docker_backend, SMALL, max_size=1, health_timeout=2, probe_every=1, listener=events.append
    ) as pool:
        sb = pool.acquire()
        hung_id = sb.id
        subprocess.run(["docker", "pause", sb.container_id], check=True, capture_output=True)  # type: ignore[attr-defined]
        pool.release(sb)  # the maintainer's health check finds it frozen
        with pool.lease(timeout=120) as fresh:
            assert fresh.id != hung_id
            assert fresh.exec("echo ok").stdout == "ok\n"
        assert pool.metrics().crashed == 1
    crashed = [e for e in events if e.action == "crashed"]
    assert crashed and crashed[0].sandbox_id == hung_id


def test_idle_sandbox_that_hangs_is_found_by_the_periodic_probe(docker_backend: SandboxBackend) -> None:
    with SandboxPool(
        docker_backend, SMALL, max_size=1, warm=1, health_timeout=2, health_interval=0.5
    ) as pool:
        assert pool.wait_warm(120)
        sb = pool.acquire()
        hung_id = sb.id
        pool.release(sb)
        deadline = time.monotonic() + 120
        while pool.metrics().idle < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        subprocess.run(["docker", "pause", sb.container_id], check=True, capture_output=True)  # type: ignore[attr-defined]
        deadline = time.monotonic() + 120
        while pool.metrics().crashed < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pool.metrics().crashed == 1
        with pool.lease(timeout=120) as fresh:
            assert fresh.id != hung_id and fresh.exec("echo ok").stdout == "ok\n"
