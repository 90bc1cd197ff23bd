"""The ``Sandbox`` interface every backend implements, and what it returns.

The public methods here apply the policy every backend shares (argument checks,
default limits, path rules, lifecycle events) and call one abstract method that
does the backend's own work, so a backend cannot forget a rule and every backend
reports its lifecycle the same way.
"""

from __future__ import annotations

import os
import posixpath
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar

from sandboxes.errors import SandboxClosedError, SandboxCrashedError, SandboxPathError
from sandboxes.netwatch import NetworkReport
from schemas.events import ResourceUsage, SandboxAction, SandboxPayload

WORKSPACE = "/workspace"
"""Where the workspace is mounted inside every sandbox."""

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

LifecycleListener = Callable[[SandboxPayload], object]
"""Receives one payload per lifecycle step (wired to ``Episode.sandbox`` by workers)."""


@dataclass(frozen=True)
class ExecResult:
    """What a command did. A failing command is data, not an exception."""

    exit_code: int
    """Exit status; ``128 + n`` when the command was killed by signal ``n``."""
    stdout: str
    """Standard output (UTF-8, undecodable bytes replaced), at most the output limit."""
    stderr: str
    """Standard error, likewise capped."""
    duration_s: float
    """Wall-clock seconds from start to the last process gone."""
    timed_out: bool = False
    """The wall-clock timeout expired and the whole process tree was killed."""
    truncated: bool = False
    """stdout or stderr was longer than the output limit and was cut."""
    oom_killed: bool = False
    """The kernel killed a process of the command for exceeding the memory limit."""
    stdout_bytes: int = 0
    """Bytes the command wrote to stdout (before truncation)."""
    stderr_bytes: int = 0
    """Bytes the command wrote to stderr (before truncation)."""
    usage: ResourceUsage | None = None
    """Resources the command consumed, when the backend measures them."""

    @property
    def ok(self) -> bool:
        """Exit code 0 and neither timed out nor killed."""
        return self.exit_code == 0 and not self.timed_out and not self.oom_killed

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``usage`` as a dict or ``None``)."""
        out = asdict(self)
        out["usage"] = self.usage.model_dump() if self.usage is not None else None
        return out


@dataclass(frozen=True)
class SandboxSpec:
    """What a sandbox is made of and the limits it runs under."""

    image: str | None = None
    """Base image: a recorded image name or digest (``trajlake sandbox build-image``).

    ``None`` means the backend's default: the host's read-only system paths for
    ``local``, the default recorded image for ``docker``."""
    workspace: Path | None = None
    """Directory whose contents are the workspace's initial state (``reset`` returns here)."""
    memory_mb: int = 512
    """Memory limit of everything running in the sandbox (no swap)."""
    pids: int = 128
    """Maximum number of processes and threads at once."""
    cpus: float = 1.0
    """CPU bandwidth, in cores."""
    disk_mb: int = 256
    """Size bound of the workspace (initial state, changes and snapshots of ``local``)."""
    tmp_mb: int = 64
    """Size of the private ``/tmp``."""
    max_files: int = 65536
    """Files and directories the workspace, and apart from it ``/tmp``, can hold (tmpfs inodes):
    a judge must be able to list what the agent left."""
    exec_timeout_s: float = 60.0
    """Default wall-clock timeout of one ``exec``."""
    output_limit_bytes: int = 1 << 20
    """Bytes kept of each of stdout and stderr; the rest is counted and dropped."""
    cpu_time_s: int | None = None
    """``RLIMIT_CPU`` of each process (``None``: only the wall-clock timeout)."""
    file_size_mb: int | None = None
    """``RLIMIT_FSIZE`` (``None``: the disk bound)."""
    open_files: int = 1024
    """``RLIMIT_NOFILE``."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Environment every command gets, on top of PATH/HOME/LANG."""

    def with_(self, **changes: Any) -> SandboxSpec:
        """A copy with some fields changed."""
        return replace(self, **changes)


def workspace_relpath(path: str | Path) -> str:
    """The path relative to the workspace root, refusing anything that leaves it.

    Args:
        path: relative to the workspace, or absolute under ``/workspace``.

    Returns:
        A normalised relative path (``"."`` for the root itself).

    Raises:
        SandboxPathError: the path is outside the workspace.
    """
    text = str(path)
    if not text or "\x00" in text:
        raise SandboxPathError(f"invalid path {text!r}")
    if text.startswith("/"):
        if text != WORKSPACE and not text.startswith(WORKSPACE + "/"):
            raise SandboxPathError(f"{text!r} is outside the workspace {WORKSPACE}")
        text = text[len(WORKSPACE) :].lstrip("/") or "."
    norm = posixpath.normpath(text)
    if norm == ".." or norm.startswith("../"):
        raise SandboxPathError(f"{str(path)!r} leaves the workspace")
    return norm


def argv_of(cmd: str | Sequence[str]) -> list[str]:
    """The argument vector of a command: a string runs through ``/bin/sh -c``."""
    if isinstance(cmd, str):
        if not cmd.strip():
            raise ValueError("empty command")
        return ["/bin/sh", "-c", cmd]
    argv = [str(a) for a in cmd]
    if not argv:
        raise ValueError("empty command")
    return argv


@dataclass(frozen=True)
class FifoPair:
    """Two named pipes in a fresh directory of a sandbox's workspace: a channel to one process in it.

    ``to`` carries bytes from the host into the sandbox, ``from`` back out. The host opens its
    ends at ``host_to``/``host_from``; the process in the sandbox at ``sandbox_dir``/``to`` and
    ``/from``.
    """

    sandbox_dir: str
    """The directory as the sandbox sees it (under ``/workspace``)."""
    host_dir: Path
    """The same directory on the host."""

    @property
    def host_to(self) -> Path:
        """The host's path of the pipe into the sandbox."""
        return self.host_dir / "to"

    @property
    def host_from(self) -> Path:
        """The host's path of the pipe out of the sandbox."""
        return self.host_dir / "from"

    def remove(self) -> None:
        """Remove the pipes; a process in the sandbox still opening its ends is let go first."""
        if not self.host_dir.is_dir():
            return
        for path, flags in ((self.host_to, os.O_WRONLY), (self.host_from, os.O_RDONLY)):
            try:
                fd = os.open(path, flags | os.O_NONBLOCK | os.O_NOFOLLOW)
            except OSError:
                continue  # nobody waits on that end (or it is gone)
            time.sleep(0.01)
            os.close(fd)
        from sandboxes.workspace_io import remove_tree

        remove_tree(self.host_dir, ignore_errors=True)  # in the workspace: as deep as the agent made it


class Sandbox(ABC):
    """An isolated, resettable place to run an agent's commands.

    Public methods apply the shared policy and call one ``_``-prefixed abstract
    method each. Thread-safety: one caller at a time (the pool hands a sandbox to
    one lease); ``close`` may be called from any thread.
    """

    backend: ClassVar[str]
    """Registered name of the backend."""

    def __init__(self, sandbox_id: str, spec: SandboxSpec, image_digest: str | None) -> None:
        self.id = sandbox_id
        self.spec = spec
        self.image_digest = image_digest
        """Digest of the image the sandbox runs, or ``None`` for host paths."""
        self.listener: LifecycleListener | None = None
        """Receives lifecycle steps; the pool points it at the current lease."""
        self._closed = False
        self._close_lock = threading.Lock()
        self._pristine: Path | None = None
        """The workspace the sandbox was last reset to, while nothing has run or changed since."""

    # ------------------------------------------------------------------ public

    @property
    def closed(self) -> bool:
        """``close()`` was called."""
        return self._closed

    def exec(
        self,
        cmd: str | Sequence[str],
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | str | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        """Run a command in the sandbox and wait for it and everything it started.

        Args:
            cmd: an argument vector, or a shell command line (run by ``/bin/sh -c``).
            timeout: wall-clock seconds before the whole process tree is killed
                (default: the spec's ``exec_timeout_s``).
            env: extra environment variables.
            stdin: bytes (or text) fed to the command's standard input.
            cwd: working directory inside the sandbox (relative paths are under
                the workspace; default the workspace root).

        Returns:
            The result; a non-zero exit, a timeout or an OOM kill are data in it.

        Raises:
            SandboxClosedError: the sandbox was closed.
            SandboxCrashedError: the sandbox itself died; replace it.
            ValueError: empty command or non-positive timeout.
        """
        self._check_open()
        argv = argv_of(cmd)
        limit = self.spec.exec_timeout_s if timeout is None else float(timeout)
        if limit <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        data = stdin.encode() if isinstance(stdin, str) else stdin
        workdir = WORKSPACE if cwd is None else cwd
        if not workdir.startswith("/"):
            workdir = posixpath.normpath(posixpath.join(WORKSPACE, workdir))
        merged = {**self.spec.env, **(env or {})}
        self._pristine = None
        return self._exec(argv, timeout=limit, env=merged, stdin=data, cwd=workdir)

    def read_file(self, path: str | Path, *, max_bytes: int | None = None) -> bytes:
        """Bytes of a file in the workspace (symlinks are never followed out of it).

        Args:
            path: relative to the workspace, or absolute under ``/workspace``.
            max_bytes: refuse files larger than this (default: no limit).

        Raises:
            SandboxPathError: outside the workspace, a symlink, or not a regular file.
            FileNotFoundError: no such file.
        """
        self._check_open()
        return self._read_file(workspace_relpath(path), max_bytes)

    def write_file(self, path: str | Path, data: bytes | str, *, mode: int = 0o644) -> None:
        """Create or replace a file in the workspace, creating parent directories.

        The file belongs to the sandbox's user, as if the agent had written it.

        Raises:
            SandboxPathError: outside the workspace or through a symlink.
            SandboxQuotaError: the workspace is full.
        """
        self._check_open()
        rel = workspace_relpath(path)
        if rel == ".":
            raise SandboxPathError("cannot write the workspace root itself")
        self._pristine = None
        self._write_file(rel, data.encode() if isinstance(data, str) else data, mode)

    def export_workspace(self, *, max_bytes: int = 64 << 20) -> bytes:
        """The workspace as a deterministic tar archive (the episode's final state).

        Identical workspaces give identical bytes, so the archive is stored in the
        blob store by its sha256 and a re-judge job can rebuild the state later.
        Like a snapshot, it kills whatever the agent left running first.

        Raises:
            SandboxQuotaError: the archive would exceed ``max_bytes``.
        """
        self._check_open()
        from sandboxes.workspace_io import archive_tree

        self._quiesce()  # nothing the agent left running may change the files mid-archive
        return archive_tree(self._workspace_root(), max_bytes=max_bytes)

    def open_fifo_pair(self, name: str) -> FifoPair:
        """Make two named pipes in a new directory ``name`` of the workspace (see :class:`FifoPair`).

        For a channel between the host and one process started with :meth:`exec`: the bytes
        never pass through a file either side can forge afterwards, and a process of the
        sandbox's user can open them. The caller removes them with :meth:`FifoPair.remove`.

        Raises:
            SandboxPathError: ``name`` is not a plain new directory name.
        """
        self._check_open()
        if not name or "/" in name or name in (".", ".."):
            raise SandboxPathError(f"not a plain directory name: {name!r}")
        host = self._workspace_root() / name
        try:
            os.mkdir(host, 0o700)
        except FileExistsError as exc:
            raise SandboxPathError(f"{name} already exists in the workspace") from exc
        for end in ("to", "from"):
            os.mkfifo(host / end, 0o600)
            os.chmod(host / end, 0o666)
        os.chmod(host, 0o755)  # the sandbox's user opens the pipes; it cannot add anything beside them
        return FifoPair(posixpath.join(WORKSPACE, name), host)

    def network_report(self) -> NetworkReport | None:
        """What the sandbox's network namespace saw since it started or was last reset.

        Observed by the host (see :mod:`sandboxes.netwatch`), not by parsing any command:
        every packet a process tried to send out of the sandbox, its destinations, and
        name lookups on the sandbox's loopback. ``None`` where the backend cannot observe.
        """
        self._check_open()
        return self._network_report()

    def files_outside_workspace(self, *, limit: int = 5000) -> list[str]:
        """Files that exist outside the workspace in the sandbox's writable places, as sandbox paths.

        Read from the host's side of those places (the sandbox's ``/tmp``, also its
        ``$HOME``), without following links, so nothing run in the sandbox shapes the
        answer. The rest of the sandbox's file system is read-only.
        """
        self._check_open()
        out: list[str] = []
        for inside, host in self._writable_outside().items():
            # a stack, not os.walk's recursion: the agent can nest directories thousands deep
            stack = [(str(host), inside)]
            while stack:
                here, base = stack.pop()
                try:
                    with os.scandir(here) as it:
                        entries = sorted(it, key=lambda e: e.name)
                except OSError:
                    continue  # gone, or not a directory any more
                subdirs = []
                for e in entries:
                    if e.is_dir(follow_symlinks=False):
                        subdirs.append((e.path, posixpath.join(base, e.name)))
                    else:
                        out.append(posixpath.join(base, e.name))
                        if len(out) >= limit:
                            return out
                stack.extend(reversed(subdirs))
        return out

    def stop_processes(self) -> None:
        """Kill every process still running in the sandbox (what the agent left behind); files stay."""
        self._check_open()
        self._quiesce()

    def snapshot(self) -> str:
        """Freeze the workspace's current state and return a reference to it.

        Background processes do not survive a snapshot.

        Raises:
            SandboxQuotaError: too many snapshots for the backend's bound.
        """
        self._check_open()
        self._pristine = None
        ref = self._snapshot()
        self.emit("snapshot", snapshot_ref=ref)
        return ref

    def restore(self, ref: str) -> None:
        """Put the workspace back to a snapshot; processes still running are killed.

        Raises:
            SnapshotNotFoundError: the reference is unknown (or dropped by ``reset``).
        """
        self._check_open()
        self._pristine = None
        self._restore(ref)
        self.emit("restore", snapshot_ref=ref)

    def reset(self, *, workspace: Path | None = None, note: str | None = None) -> None:
        """Back to the initial state: kill every process, drop every snapshot.

        Args:
            workspace: a new initial state to use from now on (re-templates a warm
                sandbox for another task); default the current one.
            note: what the reset is for, recorded in its lifecycle step instead of the path.
        """
        self._check_open()
        target = workspace if workspace is not None else self.spec.workspace
        if self._pristine is not None and self._pristine == target:
            # nothing has run, been written or snapshotted since it was reset to this very state:
            # the reset is done already (still a step of the lease's record)
            self.emit("reset", detail=f"{target} (unchanged since its last reset)")
            return
        if workspace is not None:
            self.spec = self.spec.with_(workspace=workspace)
        self._pristine = None
        self._reset(workspace)
        self._pristine = self.spec.workspace
        self.emit("reset", detail=note or (str(workspace) if workspace is not None else None))

    def is_alive(self) -> bool:
        """Cheap liveness check (no command run): the backend's resources still exist."""
        if self._closed:
            return False
        try:
            self._check_alive()
            return True
        except SandboxCrashedError:
            return False

    def check_health(self, timeout: float = 10.0) -> None:
        """Raise :class:`SandboxCrashedError` unless the sandbox answers a trivial command.

        Args:
            timeout: seconds the probe may take before the sandbox counts as hung.
        """
        self._check_open()
        self._check_alive()
        pristine = self._pristine
        result = self.exec(["true"], timeout=timeout)
        self._pristine = pristine  # `true` changes nothing: the probe keeps a fresh reset fresh
        if result.timed_out:
            raise SandboxCrashedError(f"sandbox {self.id} hung: `true` did not finish in {timeout}s")
        if result.exit_code != 0:
            raise SandboxCrashedError(
                f"sandbox {self.id} is broken: `true` exited {result.exit_code}: {result.stderr[-500:]}"
            )

    def close(self) -> None:
        """Kill everything and free every resource. Idempotent."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._close()
        finally:
            self.emit("destroyed")

    def emit(
        self,
        action: SandboxAction,
        *,
        snapshot_ref: str | None = None,
        usage: ResourceUsage | None = None,
        detail: str | None = None,
    ) -> None:
        """Report one lifecycle step to the listener, if any."""
        listener = self.listener
        if listener is None:
            return
        listener(
            SandboxPayload(
                action=action,
                backend=self.backend,
                sandbox_id=self.id,
                image=self.image_digest,
                snapshot_ref=snapshot_ref,
                usage=usage,
                detail=detail,
            )
        )

    def describe(self) -> str:
        """One line for logs: backend, id and image."""
        return f"{self.backend}:{self.id} ({self.image_digest or 'host'})"

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxClosedError(f"sandbox {self.id} is closed")

    # ------------------------------------------------------------ per backend

    @abstractmethod
    def _exec(
        self, argv: list[str], *, timeout: float, env: dict[str, str], stdin: bytes | None, cwd: str
    ) -> ExecResult:
        """Run ``argv``; the arguments are already checked and defaulted."""

    @abstractmethod
    def _read_file(self, rel: str, max_bytes: int | None) -> bytes:
        """Read a workspace file given its normalised relative path."""

    @abstractmethod
    def _write_file(self, rel: str, data: bytes, mode: int) -> None:
        """Write a workspace file given its normalised relative path."""

    @abstractmethod
    def _quiesce(self) -> None:
        """Kill every process running in the sandbox."""

    @abstractmethod
    def _workspace_root(self) -> Path:
        """The host directory that is the sandbox's workspace."""

    @abstractmethod
    def _snapshot(self) -> str:
        """Freeze the workspace; return the reference."""

    @abstractmethod
    def _restore(self, ref: str) -> None:
        """Put the workspace back to ``ref``."""

    @abstractmethod
    def _reset(self, workspace: Path | None) -> None:
        """Back to the initial state (``spec.workspace`` is already updated)."""

    def _network_report(self) -> NetworkReport | None:
        """What the backend's watch of the network saw (None: it has none)."""
        return None

    def _writable_outside(self) -> dict[str, Path]:
        """Sandbox path -> host directory of each writable place outside the workspace."""
        return {}

    @abstractmethod
    def _check_alive(self) -> None:
        """Raise :class:`SandboxCrashedError` if the backend's resources are gone."""

    @abstractmethod
    def _close(self) -> None:
        """Free everything; called once."""
