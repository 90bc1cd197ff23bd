"""The ``local`` backend: Linux namespaces through bubblewrap, the embedded default.

Each ``exec`` is one ``bwrap`` process tree in fresh user, pid, ipc and uts
namespaces, inside the sandbox's own network namespace (made and watched by the
host, see :mod:`sandboxes.netwatch`): no network at all, a private mount
namespace that shows read-only system paths (the host's, or an image's root
filesystem), a private ``/tmp`` and the workspace, and no capabilities. As root
on the host the tree runs as an unprivileged host uid, so even a file whose
owner bits would let root read it (``/etc/shadow``) stays closed. It joins the
sandbox's cgroups (memory, pids, cpu) before it runs, with rlimits for CPU
time, file size and open files.

The workspace is an overlayfs whose upper layer lives on a size-bounded tmpfs:
a snapshot freezes the upper layer into a new read-only lower layer and starts a
new empty one; restore and reset only remount a different stack of layers. None
of them copies a file.

Background processes do not outlive the ``exec`` that started them: when the
command exits, its pid namespace and everything in it goes.
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import stat
import subprocess
import time
import uuid
from pathlib import Path

from sandboxes.cgroups import CgroupSet
from sandboxes.errors import (
    SandboxCrashedError,
    SandboxError,
    SandboxQuotaError,
    SandboxUnavailableError,
    SnapshotNotFoundError,
)
from sandboxes.exec_io import CappedBuffer, exit_code_of
from sandboxes.images import AGENT_UID, ImageStore
from sandboxes.interface import DEFAULT_PATH, WORKSPACE, ExecResult, Sandbox, SandboxSpec
from sandboxes.mounts import mount, mount_tmpfs, umount, untraversable_ancestor
from sandboxes.netwatch import NetWatch, NetworkReport, watch_namespace
from sandboxes.registry import SandboxBackend, SandboxConfig, register_backend
from sandboxes.workspace_io import clear_dir, copy_tree, read_under, remove_tree, write_under
from schemas import fixes
from schemas.events import ResourceUsage

MAX_LAYERS = 48
"""Snapshot depth bound: the overlay's mount options must fit in one page."""


def _host_system_binds() -> list[str]:
    """Bwrap arguments that show the host's system directories read-only."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / top
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), f"/{top}"]
        elif path.is_dir():
            args += ["--ro-bind", str(path), f"/{top}"]
    args += ["--ro-bind", "/etc", "/etc"]
    return args


def _require_traversable(path: Path, uid: int, what: str) -> None:
    blocked = untraversable_ancestor(path, uid)
    if blocked is not None:
        mode = stat.S_IMODE(os.stat(blocked).st_mode)
        raise SandboxUnavailableError(
            f"{what} ({path}) is out of reach of the sandbox user (uid {uid}): {blocked} has mode "
            f"{mode:04o}; allow it through (`chmod o+x {blocked}`) or choose a directory under one "
            "that is (TRAJLAKE_IMAGE_STORE, TRAJLAKE_SANDBOX_RUNTIME_DIR)"
        )


@register_backend
class LocalBackend(SandboxBackend):
    """Sandboxes made of namespaces (bubblewrap), overlayfs and cgroup v1."""

    name = "local"

    def unavailable_reason(self) -> str | None:
        """Why this backend cannot run here, or ``None``."""
        if os.geteuid() != 0:
            return "needs root (overlay and tmpfs mounts, cgroups, an unprivileged sandbox uid)"
        if shutil.which("bwrap") is None:
            return "bubblewrap is not installed (apt-get install bubblewrap)"
        missing = [tool for tool in ("setpriv", "prlimit") if shutil.which(tool) is None]
        if missing:
            return f"{', '.join(missing)} not found (util-linux)"
        try:
            if "overlay" not in Path("/proc/filesystems").read_text():
                return "the kernel has no overlayfs"
        except OSError as exc:
            return f"cannot read /proc/filesystems: {exc}"
        try:
            _require_traversable(self.config.runtime_dir, self.config.host_uid, "the sandbox runtime dir")
        except SandboxUnavailableError as exc:
            return str(exc)
        return CgroupSet.unavailable_reason()

    def _image_rootfs(self, image: str) -> tuple[Path, str]:
        # reachability first: an image built into a store the sandbox user cannot enter is useless
        _require_traversable(self.config.image_store, self.config.host_uid, "the image store")
        store = ImageStore(self.config.image_store)
        record = store.get(image)
        rootfs = store.rootfs(record)
        if not rootfs.is_dir():
            raise SandboxUnavailableError(
                f"the root filesystem of image {record.name} is missing ({rootfs})", fix=fixes.REBUILD_IMAGE
            )
        _require_traversable(rootfs, self.config.host_uid, f"the root filesystem of image {record.name}")
        return rootfs, record.digest

    def ensure_image(self, image: str | None) -> None:
        """``image`` is recorded, its root filesystem is there and the sandbox user can reach it."""
        if image is not None:
            self._image_rootfs(image)

    def create(self, spec: SandboxSpec, *, sandbox_id: str | None = None) -> LocalSandbox:
        """Start a sandbox in the spec's initial state (see :class:`SandboxBackend`)."""
        self.ensure_available()
        rootfs: Path | None = None
        digest: str | None = None
        if spec.image is not None:
            rootfs, digest = self._image_rootfs(spec.image)
        return LocalSandbox(sandbox_id or uuid.uuid4().hex[:12], spec, self.config, rootfs, digest)


class LocalSandbox(Sandbox):
    """One local sandbox: a tmpfs, an overlay, cgroups; a ``bwrap`` tree per ``exec``."""

    backend = "local"

    def __init__(
        self,
        sandbox_id: str,
        spec: SandboxSpec,
        config: SandboxConfig,
        rootfs: Path | None,
        image_digest: str | None,
    ) -> None:
        super().__init__(sandbox_id, spec, image_digest)
        self._uid = config.host_uid
        self._rootfs = rootfs
        self.dir = Path(config.runtime_dir) / sandbox_id
        self._disk = self.dir / "disk"
        self._ws = self.dir / "ws"
        self._tmp = self.dir / "tmp"
        self._layers: list[str] = []  # current lower stack, newest first (names under disk/layers)
        self._snapshots: dict[str, tuple[str, ...]] = {}
        self._next_layer = 0
        self._mounted: list[Path] = []
        self._cgroup: CgroupSet | None = None
        self._netns: str | None = None  # a named namespace of its own, where the host can watch it
        self._net: NetWatch | None = None
        try:
            self._setup()
        except BaseException:
            self._teardown()
            raise

    # ------------------------------------------------------------- lifecycle

    def _setup(self) -> None:
        # parents are shared by concurrent sandboxes; the sandbox's own dir is not
        self.dir.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        self.dir.mkdir(mode=0o755)
        self._ws.mkdir()
        files = self.spec.max_files
        mount_tmpfs(self._disk, self.spec.disk_mb, "the workspace tmpfs", inodes=files)
        self._mounted.append(self._disk)
        # /tmp lives as long as the sandbox (like a container's), bounded on its own
        mount_tmpfs(
            self._tmp, self.spec.tmp_mb, "the sandbox's /tmp", mode="1777", inodes=self.spec.max_files
        )
        self._mounted.append(self._tmp)
        (self._disk / "layers").mkdir()
        self._load_template()
        self._mount_overlay()
        self._cgroup = CgroupSet.create(
            f"sbx-{self.id}",
            memory_bytes=self.spec.memory_mb << 20,
            pids=self.spec.pids,
            cpus=self.spec.cpus,
        )
        self._setup_network()
        self._bwrap_base = self._bwrap_args()

    def _setup_network(self) -> None:
        """One network namespace for the sandbox's lifetime, made by the host, watched by it.

        Every exec joins it (as a container's processes share one); bubblewrap's user
        namespace does not own it, so nothing run inside can change it. Where ``ip netns``
        is not available, each exec gets bubblewrap's own empty namespace instead: no
        network either way, only the observation is missing.
        """
        name = f"trajlake-{self.id}"
        if shutil.which("ip") is None or shutil.which("nsenter") is None:
            return
        p = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, timeout=20)
        if p.returncode != 0:
            return
        self._netns = name
        self._net = watch_namespace(f"/run/netns/{name}", self.id)

    def _load_template(self) -> None:
        base = self._disk / "base"
        if base.exists():
            shutil.rmtree(base)
        base.mkdir()
        if self.spec.workspace is not None:
            src = Path(self.spec.workspace)
            if not src.is_dir():
                raise SandboxError(f"workspace template {src} is not a directory")
            copy_tree(src, base, uid=self._uid, gid=self._uid)
        os.chown(base, self._uid, self._uid)

    def _mount_overlay(self, layers: tuple[str, ...] | None = None) -> None:
        """(Re)mount the workspace with a fresh empty upper layer over ``layers``."""
        if self._ws in self._mounted:
            umount(self._ws)
            self._mounted.remove(self._ws)
        if layers is not None:
            self._layers = list(layers)
        for name in ("upper", "work"):
            path = self._disk / name
            if path.exists():
                remove_tree(path)  # the agent's writes: as deep as it made them
            path.mkdir()
        os.chown(self._disk / "upper", self._uid, self._uid)
        lower = ":".join([str(self._disk / "layers" / n) for n in self._layers] + [str(self._disk / "base")])
        opts = f"lowerdir={lower},upperdir={self._disk / 'upper'},workdir={self._disk / 'work'}"
        try:
            mount("overlay", self._ws, "overlay", opts)
        except OSError as exc:
            raise SandboxCrashedError(f"cannot mount the workspace overlay: {exc}") from exc
        self._mounted.append(self._ws)

    def _bwrap_args(self) -> list[str]:
        args = [
            "bwrap",
            "--unshare-user",
            "--uid", str(AGENT_UID),
            "--gid", str(AGENT_UID),
            "--disable-userns",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname", "sandbox",
            "--die-with-parent",
            "--new-session",
            "--cap-drop", "ALL",
        ]  # fmt: skip
        if self._netns is None:
            args.append("--unshare-net")
        if self._rootfs is not None:
            args += ["--ro-bind", str(self._rootfs), "/"]
        else:
            args += _host_system_binds()
        args += [
            "--proc", "/proc",
            "--dev", "/dev",
            "--bind", str(self._tmp), "/tmp",
            "--bind", str(self._ws), WORKSPACE,
            "--clearenv",
        ]  # fmt: skip
        return args

    def _teardown(self) -> None:
        if self._cgroup is not None:
            self._cgroup.remove()
        if self._netns is not None:
            subprocess.run(["ip", "netns", "del", self._netns], capture_output=True, timeout=20)
            self._netns = self._net = None
        for path in reversed(self._mounted):
            try:
                umount(path)
            except OSError:
                pass
        self._mounted.clear()
        remove_tree(self.dir, ignore_errors=True)

    def _close(self) -> None:
        self._teardown()

    def _check_alive(self) -> None:
        if self._cgroup is None or not self._cgroup.exists():
            raise SandboxCrashedError(f"sandbox {self.id}: its cgroups are gone")
        if not os.path.ismount(self._ws):
            raise SandboxCrashedError(f"sandbox {self.id}: its workspace is no longer mounted")

    # ------------------------------------------------------------------ exec

    def _exec(
        self, argv: list[str], *, timeout: float, env: dict[str, str], stdin: bytes | None, cwd: str
    ) -> ExecResult:
        self._check_alive()
        assert self._cgroup is not None
        environment = {
            "PATH": DEFAULT_PATH,
            "HOME": "/tmp",
            "LANG": "C.UTF-8",
            "USER": "agent",
            "PYTHONDONTWRITEBYTECODE": "1",
            **env,
        }
        # setpriv: the unprivileged host uid; prlimit: rlimits inherited by the whole tree
        fsize = (self.spec.file_size_mb or self.spec.disk_mb) << 20
        args = [
            "setpriv", f"--reuid={self._uid}", f"--regid={self._uid}", "--clear-groups",
            "prlimit", f"--fsize={fsize}", f"--nofile={self.spec.open_files}", "--core=0",
        ]  # fmt: skip
        if self.spec.cpu_time_s is not None:
            args.append(f"--cpu={self.spec.cpu_time_s}:{self.spec.cpu_time_s + 1}")
        args += ["--", *self._bwrap_base]
        if self._netns is not None:
            args = ["nsenter", f"--net=/run/netns/{self._netns}", *args]
        for key, value in environment.items():
            args += ["--setenv", key, value]
        args += ["--chdir", cwd, "--", *argv]

        cg = self._cgroup
        oom_before = cg.oom_kills()
        cpu_before = cg.cpu_ns()
        cg.reset_peak()
        out = CappedBuffer(self.spec.output_limit_bytes)
        err = CappedBuffer(self.spec.output_limit_bytes)
        timed_out = False
        start = time.monotonic()
        try:
            with cg.thread_joined():
                proc = subprocess.Popen(
                    args,
                    stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    close_fds=True,
                    start_new_session=True,
                )
        except OSError as exc:
            raise SandboxCrashedError(f"sandbox {self.id}: cannot start bwrap: {exc}") from exc
        deadline = start + timeout
        sel = selectors.DefaultSelector()
        assert proc.stdout is not None and proc.stderr is not None
        for stream, buf in ((proc.stdout, out), (proc.stderr, err)):
            os.set_blocking(stream.fileno(), False)
            sel.register(stream, selectors.EVENT_READ, buf)
        pending = memoryview(stdin) if stdin else None
        if proc.stdin is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            sel.register(proc.stdin, selectors.EVENT_WRITE, None)
        try:
            while sel.get_map():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                for sk, _ in sel.select(timeout=min(remaining, 1.0)):
                    if sk.data is None:  # stdin
                        try:
                            assert pending is not None
                            n = os.write(sk.fd, pending[: 1 << 16])
                            pending = pending[n:]
                        except BrokenPipeError:
                            pending = pending[:0] if pending is not None else None
                        if not pending:
                            sel.unregister(sk.fileobj)
                            proc.stdin.close()  # type: ignore[union-attr]
                        continue
                    chunk = os.read(sk.fd, 1 << 16)
                    if chunk:
                        sk.data.feed(chunk)
                    else:
                        sel.unregister(sk.fileobj)
            if timed_out:
                self._kill_tree(proc.pid)
            _, status, rusage = os.wait4(proc.pid, 0)
        finally:
            sel.close()
            # Whatever is still in the group (nothing, unless the tree was killed) goes now.
            cg.kill_all()
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:
                        pass
        proc.returncode = exit_code_of(status)  # reaped by wait4; keep Popen from waiting again
        duration = time.monotonic() - start
        oom = cg.oom_kills() > oom_before
        if os.WIFSIGNALED(status) and not timed_out and not oom:
            sig = os.WTERMSIG(status)
            raise SandboxCrashedError(
                f"sandbox {self.id}: bwrap was killed by signal {signal.Signals(sig).name} from outside"
            )
        cpu_after = cg.cpu_ns()
        cpu_s = (
            (cpu_after - cpu_before) / 1e9
            if cpu_after is not None and cpu_before is not None
            else rusage.ru_utime + rusage.ru_stime
        )
        usage = ResourceUsage(
            cpu_s=round(cpu_s, 6),
            max_rss_bytes=cg.peak_memory() or rusage.ru_maxrss * 1024,
            wall_s=round(duration, 6),
        )
        code = exit_code_of(status)
        if timed_out and code == 0:
            code = 128 + signal.SIGKILL
        return ExecResult(
            exit_code=code,
            stdout=out.text(),
            stderr=err.text(),
            duration_s=round(duration, 6),
            timed_out=timed_out,
            truncated=out.truncated or err.truncated,
            oom_killed=oom,
            stdout_bytes=out.total,
            stderr_bytes=err.total,
            usage=usage,
        )

    def _kill_tree(self, pid: int) -> None:
        """Kill bwrap (its pid namespace dies with it) and everything in the cgroup."""
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        assert self._cgroup is not None
        self._cgroup.kill_all()

    # ------------------------------------------------------------ files

    def _read_file(self, rel: str, max_bytes: int | None) -> bytes:
        self._check_alive()
        return read_under(self._ws, rel, max_bytes)

    def _write_file(self, rel: str, data: bytes, mode: int) -> None:
        self._check_alive()
        write_under(self._ws, rel, data, mode=mode, uid=self._uid, gid=self._uid)

    # --------------------------------------------------------- snapshots

    def _quiesce(self) -> None:
        assert self._cgroup is not None
        self._cgroup.kill_all()

    def _workspace_root(self) -> Path:
        return self._ws

    def _network_report(self) -> NetworkReport | None:
        self._check_alive()
        return None if self._net is None else self._net.report()

    def _writable_outside(self) -> dict[str, Path]:
        return {"/tmp": self._tmp}

    def _snapshot(self) -> str:
        self._check_alive()
        self._quiesce()
        upper = self._disk / "upper"
        if any(upper.iterdir()):
            if len(self._layers) >= MAX_LAYERS:
                raise SandboxQuotaError(f"sandbox {self.id}: more than {MAX_LAYERS} nested snapshots")
            umount(self._ws)
            self._mounted.remove(self._ws)
            name = str(self._next_layer)
            self._next_layer += 1
            upper.rename(self._disk / "layers" / name)
            self._mount_overlay((name, *self._layers))
        ref = f"snap-{len(self._snapshots) + 1}"
        self._snapshots[ref] = tuple(self._layers)
        return ref

    def _restore(self, ref: str) -> None:
        self._check_alive()
        try:
            layers = self._snapshots[ref]
        except KeyError:
            raise SnapshotNotFoundError(f"sandbox {self.id} has no snapshot {ref!r}") from None
        self._quiesce()
        self._mount_overlay(layers)

    def _reset(self, workspace: Path | None) -> None:
        self._check_alive()
        self._quiesce()
        if self._ws in self._mounted:
            umount(self._ws)
            self._mounted.remove(self._ws)
        clear_dir(self._disk / "layers")
        for name in ("upper", "work"):  # what the last lease wrote: gone before a new template needs room
            remove_tree(self._disk / name, ignore_errors=True)
        clear_dir(self._tmp)
        if self._net is not None:
            self._net.clear()
        self._snapshots.clear()
        self._next_layer = 0
        if workspace is not None:
            self._load_template()
        self._mount_overlay(())
