"""cgroup v1 groups: one per local sandbox (memory, pids, cpu), and the container's for docker.

These machines expose the v1 controllers under ``/sys/fs/cgroup/<controller>``.
A sandbox's group is created below the cgroup this process is in (so an
enclosing limit still applies), every process of the sandbox joins it before it
runs, and the group is what makes "kill the whole process tree" exact: whatever
forked, double-forked or called ``setsid`` is still listed in ``cgroup.procs``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from sandboxes.errors import SandboxUnavailableError

CONTROLLERS = ("memory", "pids", "cpu", "cpuacct")
REQUIRED = ("memory", "pids")


def controller_mounts() -> dict[str, Path]:
    """Mount point of every mounted cgroup v1 controller."""
    mounts: dict[str, Path] = {}
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            head, _, tail = line.partition(" - ")
            fields = tail.split()
            if len(fields) < 3 or fields[0] != "cgroup":
                continue
            mount_point = Path(head.split()[4])
            for opt in fields[2].split(","):
                if opt in CONTROLLERS:
                    mounts.setdefault(opt, mount_point)
    return mounts


def cgroup_paths(pid: int | str = "self") -> dict[str, str]:
    """The cgroup path of ``pid`` in every v1 hierarchy, by controller."""
    paths: dict[str, str] = {}
    with open(f"/proc/{pid}/cgroup") as fh:
        for line in fh:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            for ctrl in ctrls.split(","):
                if ctrl in CONTROLLERS:
                    paths[ctrl] = path
    return paths


def _write(path: Path, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class CgroupSet:
    """One group in each v1 controller hierarchy, used together."""

    def __init__(self, dirs: dict[str, Path], *, owned: bool) -> None:
        self.dirs = dirs
        self.owned = owned
        """Created (and removed) by us; ``False`` for a container's groups."""

    @staticmethod
    def unavailable_reason() -> str | None:
        """Why sandbox groups cannot be made here, or ``None`` when they can."""
        mounts = controller_mounts()
        missing = [c for c in REQUIRED if c not in mounts]
        if missing:
            return f"cgroup v1 controllers not mounted: {', '.join(missing)}"
        own = cgroup_paths()
        for ctrl in REQUIRED:
            base = mounts[ctrl] / own.get(ctrl, "/").lstrip("/")
            if not os.access(base, os.W_OK):
                return f"cannot create cgroups under {base} (needs root or a delegated cgroup)"
        return None

    @classmethod
    def create(cls, name: str, *, memory_bytes: int, pids: int, cpus: float | None) -> CgroupSet:
        """Make the groups ``trajlake/<name>`` below this process's own and set limits.

        Raises:
            SandboxUnavailableError: controllers missing or not writable.
        """
        reason = cls.unavailable_reason()
        if reason:
            raise SandboxUnavailableError(reason)
        mounts = controller_mounts()
        own = cgroup_paths()
        dirs: dict[str, Path] = {}
        made = cls({}, owned=True)
        try:
            for ctrl in CONTROLLERS:
                if ctrl not in mounts:
                    continue
                path = mounts[ctrl] / own.get(ctrl, "/").lstrip("/") / "trajlake" / name
                path.mkdir(parents=True, exist_ok=False)
                dirs[ctrl] = path
                made.dirs = dirs
            mem = dirs["memory"]
            _write(mem / "memory.limit_in_bytes", str(memory_bytes))
            if (mem / "memory.memsw.limit_in_bytes").exists():
                _write(mem / "memory.memsw.limit_in_bytes", str(memory_bytes))  # no swap
            if (mem / "memory.swappiness").exists():
                try:
                    _write(mem / "memory.swappiness", "0")
                except OSError:
                    pass
            _write(dirs["pids"] / "pids.max", str(pids))
            if cpus is not None and "cpu" in dirs:
                period = 100_000
                _write(dirs["cpu"] / "cpu.cfs_period_us", str(period))
                _write(dirs["cpu"] / "cpu.cfs_quota_us", str(max(1000, int(cpus * period))))
        except OSError as exc:
            made.remove()
            raise SandboxUnavailableError(f"cannot set up cgroup {name}: {exc}") from exc
        return cls(dirs, owned=True)

    @classmethod
    def of_process(cls, pid: int) -> CgroupSet:
        """The groups a running process (a container's init) is in; not owned."""
        mounts = controller_mounts()
        paths = cgroup_paths(pid)
        dirs = {c: mounts[c] / paths[c].lstrip("/") for c in CONTROLLERS if c in mounts and c in paths}
        return cls(dirs, owned=False)

    @contextlib.contextmanager
    def thread_joined(self) -> Iterator[None]:
        """Put the calling thread (only) into the groups for the duration of the block.

        cgroup v1 places threads individually, and a child inherits the groups of
        the thread that forks it. Spawning from inside this block therefore starts
        the child in the sandbox's groups from its first instruction, without a
        pre-exec hook in the child (which would force a full ``fork`` of this
        process instead of a ``vfork``).
        """
        tid = threading.get_native_id()
        origin = cgroup_paths(f"self/task/{tid}")
        mounts = controller_mounts()
        moved: list[str] = []
        try:
            for ctrl, path in self.dirs.items():
                _write(path / "tasks", str(tid))
                moved.append(ctrl)
            yield
        finally:
            for ctrl in moved:
                _write(mounts[ctrl] / origin[ctrl].lstrip("/") / "tasks", str(tid))

    def exists(self) -> bool:
        """Every group directory is still there."""
        return bool(self.dirs) and all(d.is_dir() for d in self.dirs.values())

    def procs(self) -> list[int]:
        """Processes in the group."""
        d = self.dirs.get("pids") or self.dirs.get("memory")
        if d is None:
            return []
        try:
            return [int(x) for x in (d / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def kill_all(self, *, exclude: frozenset[int] = frozenset(), timeout: float = 5.0) -> int:
        """SIGKILL every process in the group until none is left; returns how many were sent.

        A fork bomb keeps forking while it is being killed, so this loops until the
        group is empty (the pids limit keeps each round bounded).
        """
        sent = 0
        deadline = time.monotonic() + timeout
        while True:
            pids = [p for p in self.procs() if p not in exclude]
            if not pids:
                return sent
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                    sent += 1
                except ProcessLookupError:
                    pass
            if time.monotonic() > deadline:
                return sent
            time.sleep(0.002)

    def oom_kills(self) -> int:
        """The kernel's count of OOM kills in the memory group."""
        mem = self.dirs.get("memory")
        if mem is None:
            return 0
        try:
            for line in (mem / "memory.oom_control").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except OSError:
            pass
        return 0

    def reset_peak(self) -> None:
        """Restart the peak-memory watermark (per ``exec`` measurement)."""
        mem = self.dirs.get("memory")
        if mem is not None:
            try:
                _write(mem / "memory.max_usage_in_bytes", "0")
            except OSError:
                pass

    def peak_memory(self) -> int | None:
        """Peak memory of the group since the last ``reset_peak``."""
        mem = self.dirs.get("memory")
        return _read_int(mem / "memory.max_usage_in_bytes") if mem is not None else None

    def cpu_ns(self) -> int | None:
        """CPU nanoseconds the group used so far."""
        acct = self.dirs.get("cpuacct")
        return _read_int(acct / "cpuacct.usage") if acct is not None else None

    def pids_current(self) -> int | None:
        """Processes and threads in the group now."""
        pids = self.dirs.get("pids")
        return _read_int(pids / "pids.current") if pids is not None else None

    def remove(self) -> None:
        """Kill what is left and remove the groups (owned groups only)."""
        if not self.owned:
            return
        self.kill_all()
        for path in self.dirs.values():
            for _ in range(200):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY:
                        break
                    # the last killed processes are still being reaped
                    time.sleep(0.005)
