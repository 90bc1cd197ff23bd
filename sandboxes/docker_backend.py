"""The ``docker`` backend: one container per sandbox on a real Docker engine.

The container runs ``sleep infinity`` under ``docker-init`` with no network, a
read-only root, every capability dropped, ``no-new-privileges``, the agent's
uid, and memory (no swap), pids and cpu limits. The workspace (and ``/tmp``)
is a host directory on a size-bounded tmpfs bind-mounted into the container; snapshots are
archives of that directory kept on the host, so snapshot, restore and reset
never go through the engine. Images are run by their recorded id (see
:mod:`sandboxes.images`), never by a tag.

Commands run through the engine's exec API; timeouts and "kill the whole tree"
act on the container's cgroup from the host, so a command that forked, detached
or ignores signals is still found and killed.
"""

from __future__ import annotations

import os
import select
import shutil
import socket
import struct
import time
import uuid
from pathlib import Path
from typing import Any

from sandboxes.cgroups import CgroupSet
from sandboxes.errors import (
    ImageDriftError,
    ImageNotBuiltError,
    SandboxCrashedError,
    SandboxError,
    SandboxUnavailableError,
    SnapshotNotFoundError,
)
from sandboxes.exec_io import CappedBuffer
from sandboxes.images import AGENT_UID, ImageRecord, ImageStore
from sandboxes.interface import DEFAULT_PATH, WORKSPACE, ExecResult, Sandbox, SandboxSpec
from sandboxes.mounts import mount_tmpfs, umount
from sandboxes.netwatch import NetWatch, NetworkReport, watch_namespace
from sandboxes.registry import SandboxBackend, SandboxConfig, register_backend
from sandboxes.workspace_io import clear_dir, copy_tree, read_under, remove_tree, write_under
from schemas import fixes
from schemas.events import ResourceUsage

_LABEL = "trajlake.sandbox"


def docker_client(config: SandboxConfig) -> Any:
    """A client of the configured engine (API version negotiated).

    Raises:
        SandboxUnavailableError: the SDK is missing or the engine does not answer.
    """
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - the SDK is a dependency
        raise SandboxUnavailableError("the docker SDK is not installed (pip install docker)") from exc
    try:
        if config.docker_host:
            client = docker.DockerClient(base_url=config.docker_host, version="auto", timeout=60)
        else:
            client = docker.from_env(timeout=60)
        client.ping()
    except Exception as exc:
        where = config.docker_host or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise SandboxUnavailableError(
            f"no Docker engine answers at {where} ({first}); start one (as root: "
            "`infra/docker/dockerd.sh start`) or use the local backend (TRAJLAKE_SANDBOX_BACKEND=local)"
        ) from exc
    return client


def resolve_image(client: Any, store: ImageStore, ref: str) -> ImageRecord:
    """The record of ``ref``, checked against the engine: present, and not drifted.

    Raises:
        SandboxUnavailableError: not recorded, or never imported into this engine.
        ImageDriftError: the image's tag now names a different image than recorded.
    """
    import docker.errors

    record = store.get(ref)
    if not record.image_id:
        raise ImageNotBuiltError(
            f"image {record.name} was built for the local backend only", fix=fixes.IMPORT_IMAGE
        )
    try:
        client.images.get(record.image_id)
        return record
    except docker.errors.ImageNotFound:
        pass
    if record.docker_ref:
        try:
            current = client.images.get(record.docker_ref)
            raise ImageDriftError(
                f"{record.docker_ref} is now {current.id}, but {record.name} is pinned to {record.image_id}",
                fix=fixes.REBUILD_IMAGE,
            )
        except docker.errors.ImageNotFound:
            pass
    raise ImageNotBuiltError(
        f"image {record.name} ({record.image_id}) is not in this engine", fix=fixes.IMPORT_IMAGE
    )


@register_backend
class DockerBackend(SandboxBackend):
    """Sandboxes that are containers of a real Docker engine."""

    name = "docker"

    def __init__(self, config: SandboxConfig | None = None) -> None:
        super().__init__(config)
        self._client: Any = None

    @property
    def client(self) -> Any:
        """The engine client (connected on first use)."""
        if self._client is None:
            self._client = docker_client(self.config)
        return self._client

    def unavailable_reason(self) -> str | None:
        """Why this backend cannot run here, or ``None``."""
        if os.geteuid() != 0:
            return "needs root (the workspace tmpfs and the containers' cgroups)"
        try:
            _ = self.client
        except SandboxUnavailableError as exc:
            return str(exc)
        return None

    def ensure_image(self, image: str | None) -> None:
        """The engine answers and holds exactly the recorded image (not drifted)."""
        self.ensure_available()
        resolve_image(self.client, ImageStore(self.config.image_store), image or self.config.default_image)

    def create(self, spec: SandboxSpec, *, sandbox_id: str | None = None) -> DockerSandbox:
        """Start a container in the spec's initial state (see :class:`SandboxBackend`)."""
        self.ensure_available()
        record = resolve_image(
            self.client, ImageStore(self.config.image_store), spec.image or self.config.default_image
        )
        return DockerSandbox(sandbox_id or uuid.uuid4().hex[:12], spec, self.config, self.client, record)

    def close(self) -> None:
        """Close the engine connection."""
        if self._client is not None:
            self._client.close()
            self._client = None


class DockerSandbox(Sandbox):
    """One container; the workspace is a host tmpfs bind-mounted into it."""

    backend = "docker"

    def __init__(
        self, sandbox_id: str, spec: SandboxSpec, config: SandboxConfig, client: Any, image: ImageRecord
    ) -> None:
        super().__init__(sandbox_id, spec, image.digest)
        self._client = client
        self._api = client.api
        self._image = image
        self.dir = Path(config.runtime_dir) / sandbox_id
        self._ws = self.dir / "ws"
        self._tmp = self.dir / "tmp"
        self._snaps = self.dir / "snaps"
        self._template = self.dir / "template"  # a private copy: resets never reread the caller's dir
        self._snapshots: dict[str, Path] = {}
        self._mounted = False
        self._tmp_mounted = False
        self._net: NetWatch | None = None
        self._container: Any = None
        self._cgroup: CgroupSet | None = None
        self._keep: frozenset[int] = frozenset()
        self._init_pid = 0
        try:
            self._setup()
        except BaseException:
            self._teardown()
            raise

    @property
    def container_id(self) -> str | None:
        """Id of the container, once started."""
        return None if self._container is None else str(self._container.id)

    def _setup(self) -> None:
        import docker.errors
        from docker.types import Ulimit

        # parents are shared by concurrent sandboxes; the sandbox's own dir is not
        self.dir.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        self.dir.mkdir(mode=0o755)
        self._snaps.mkdir()
        mount_tmpfs(
            self._ws, self.spec.disk_mb, "the workspace tmpfs", owner=AGENT_UID, inodes=self.spec.max_files
        )
        self._mounted = True
        # /tmp is a host tmpfs too, so reset can empty it without a round trip through the engine
        mount_tmpfs(
            self._tmp, self.spec.tmp_mb, "the sandbox's /tmp", mode="1777", inodes=self.spec.max_files
        )
        self._tmp_mounted = True
        self._load_template()
        fsize = (self.spec.file_size_mb or self.spec.disk_mb) << 20
        ulimits = [
            Ulimit(name="nofile", soft=self.spec.open_files, hard=self.spec.open_files),
            Ulimit(name="fsize", soft=fsize, hard=fsize),
            Ulimit(name="core", soft=0, hard=0),
        ]
        if self.spec.cpu_time_s is not None:
            ulimits.append(Ulimit(name="cpu", soft=self.spec.cpu_time_s, hard=self.spec.cpu_time_s + 1))
        memory = f"{self.spec.memory_mb}m"
        try:
            self._container = self._client.containers.run(
                self._image.image_id,
                ["sleep", "infinity"],
                name=f"trajlake-{self.id}",
                detach=True,
                init=True,
                hostname="sandbox",
                network_mode="none",
                read_only=True,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                user=f"{AGENT_UID}:{AGENT_UID}",
                pids_limit=self.spec.pids,
                mem_limit=memory,
                memswap_limit=memory,
                nano_cpus=int(self.spec.cpus * 1e9),
                volumes={
                    str(self._ws): {"bind": WORKSPACE, "mode": "rw"},
                    str(self._tmp): {"bind": "/tmp", "mode": "rw"},
                },
                working_dir=WORKSPACE,
                ulimits=ulimits,
                labels={_LABEL: self.id},
                environment={"PATH": DEFAULT_PATH, "HOME": "/tmp", "LANG": "C.UTF-8"},
            )
            self._container.reload()
        except docker.errors.DockerException as exc:
            raise SandboxUnavailableError(f"cannot start a container of {self._image.name}: {exc}") from exc
        self._init_pid = int(self._container.attrs["State"]["Pid"])
        if not self._init_pid:
            raise SandboxCrashedError(f"container {self._container.id[:12]} exited at start")
        self._cgroup = CgroupSet.of_process(self._init_pid)
        self._keep = frozenset(self._descendants_of_init())
        self._net = watch_namespace(f"/proc/{self._init_pid}/ns/net", self.id)

    def _descendants_of_init(self) -> set[int]:
        """The init process and its ``sleep``: everything that must survive a kill sweep."""
        keep = {self._init_pid}
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                children = Path(f"/proc/{self._init_pid}/task/{self._init_pid}/children").read_text().split()
            except OSError:
                children = []
            if children:
                keep.update(int(c) for c in children)
                return keep
            time.sleep(0.005)
        raise SandboxCrashedError(f"container {self.id}: its main process did not start")

    def _load_template(self, *, refresh: bool = True) -> None:
        """Fill the workspace from the template; with ``refresh``, copy the template in first.

        The sandbox keeps its own copy of the template, so a later reset does not
        depend on the caller's directory still existing (a re-judge unpacks each
        final state into a temporary directory that is gone by the next reset).
        """
        if refresh:
            if self._template.exists():
                shutil.rmtree(self._template)
            self._template.mkdir(mode=0o755)
            if self.spec.workspace is not None:
                src = Path(self.spec.workspace)
                if not src.is_dir():
                    raise SandboxError(f"workspace template {src} is not a directory")
                copy_tree(src, self._template)
        clear_dir(self._ws)
        copy_tree(self._template, self._ws, uid=AGENT_UID, gid=AGENT_UID)
        os.chown(self._ws, AGENT_UID, AGENT_UID)

    def _teardown(self) -> None:
        if self._container is not None:
            try:
                self._container.remove(force=True)
            except Exception:  # noqa: BLE001 - already gone is fine at teardown
                pass
        if self._mounted:
            try:
                umount(self._ws)
            except OSError:
                pass
            self._mounted = False
        if self._tmp_mounted:
            try:
                umount(self._tmp)
            except OSError:
                pass
            self._tmp_mounted = False
        remove_tree(self.dir, ignore_errors=True)

    def _close(self) -> None:
        self._teardown()

    def _check_alive(self) -> None:
        try:
            # a killed container's init lingers as a zombie until its shim reaps it
            state = Path(f"/proc/{self._init_pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            state = "gone"
        if state in ("gone", "Z", "X"):
            raise SandboxCrashedError(
                f"container of sandbox {self.id} is gone (init {self._init_pid}: {state})"
            )
        if self._cgroup is None or not self._cgroup.exists():
            raise SandboxCrashedError(f"container of sandbox {self.id} is gone (no cgroup)")

    def _quiesce(self) -> None:
        assert self._cgroup is not None
        self._cgroup.kill_all(exclude=self._keep)

    def _network_report(self) -> NetworkReport | None:
        self._check_alive()
        return None if self._net is None else self._net.report()

    def _writable_outside(self) -> dict[str, Path]:
        return {"/tmp": self._tmp}

    # ------------------------------------------------------------------ exec

    def _exec(
        self, argv: list[str], *, timeout: float, env: dict[str, str], stdin: bytes | None, cwd: str
    ) -> ExecResult:
        import docker.errors

        self._check_alive()
        assert self._cgroup is not None
        cg = self._cgroup
        environment = {"PYTHONDONTWRITEBYTECODE": "1", "USER": "agent", **env}
        oom_before = cg.oom_kills()
        cpu_before = cg.cpu_ns()
        cg.reset_peak()
        out = CappedBuffer(self.spec.output_limit_bytes)
        err = CappedBuffer(self.spec.output_limit_bytes)
        start = time.monotonic()
        deadline = start + timeout
        try:
            exec_id = self._api.exec_create(
                self._container.id,
                argv,
                stdout=True,
                stderr=True,
                stdin=stdin is not None,
                tty=False,
                environment=environment,
                workdir=cwd,
                user=f"{AGENT_UID}:{AGENT_UID}",
            )["Id"]
            sock = self._api.exec_start(exec_id, socket=True)
        except docker.errors.APIError as exc:
            self._raise_if_dead(exc)
            raise SandboxError(f"sandbox {self.id}: exec failed: {exc}") from exc
        raw: socket.socket = getattr(sock, "_sock", sock)
        timed_out = False
        try:
            if stdin is not None:
                raw.sendall(stdin)
                raw.shutdown(socket.SHUT_WR)
            timed_out = not _read_frames(raw, deadline, out, err)
        finally:
            if timed_out:
                cg.kill_all(exclude=self._keep)
            try:
                sock.close()
            except OSError:
                pass
        info = self._exec_result(exec_id)
        duration = time.monotonic() - start
        self._check_alive()  # a command killed because its container died is a crash, not a result
        oom = cg.oom_kills() > oom_before
        code = info.get("ExitCode")
        if code is None:
            code = 137 if (timed_out or oom) else -1
        cpu_after = cg.cpu_ns()
        usage = ResourceUsage(
            cpu_s=round((cpu_after - cpu_before) / 1e9, 6) if cpu_after and cpu_before else None,
            max_rss_bytes=cg.peak_memory(),
            wall_s=round(duration, 6),
        )
        return ExecResult(
            exit_code=int(code),
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

    def _exec_result(self, exec_id: str) -> dict[str, Any]:
        import docker.errors

        for _ in range(200):
            try:
                info: dict[str, Any] = self._api.exec_inspect(exec_id)
            except docker.errors.APIError as exc:
                self._raise_if_dead(exc)
                raise SandboxError(f"sandbox {self.id}: exec inspect failed: {exc}") from exc
            if not info.get("Running"):
                if info.get("ExitCode") is None:
                    self._check_alive()
                return info
            time.sleep(0.005)
        self._check_alive()
        raise SandboxCrashedError(f"sandbox {self.id}: exec still running after its stream closed")

    def _raise_if_dead(self, exc: Exception) -> None:
        try:
            self._check_alive()
        except SandboxCrashedError as dead:
            raise dead from exc
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status in (404, 409):
            raise SandboxCrashedError(f"sandbox {self.id}: container not running: {exc}") from exc

    # ------------------------------------------------------------ files

    def _read_file(self, rel: str, max_bytes: int | None) -> bytes:
        self._check_alive()
        return read_under(self._ws, rel, max_bytes)

    def _write_file(self, rel: str, data: bytes, mode: int) -> None:
        self._check_alive()
        write_under(self._ws, rel, data, mode=mode, uid=AGENT_UID, gid=AGENT_UID)

    # --------------------------------------------------------- snapshots

    def _workspace_root(self) -> Path:
        return self._ws

    def _snapshot(self) -> str:
        self._check_alive()
        self._quiesce()
        ref = f"snap-{len(self._snapshots) + 1}"
        dest = self._snaps / ref
        copy_tree(self._ws, dest)
        self._snapshots[ref] = dest
        return ref

    def _restore(self, ref: str) -> None:
        self._check_alive()
        try:
            src = self._snapshots[ref]
        except KeyError:
            raise SnapshotNotFoundError(f"sandbox {self.id} has no snapshot {ref!r}") from None
        self._quiesce()
        clear_dir(self._ws)
        copy_tree(src, self._ws)

    def _reset(self, workspace: Path | None) -> None:
        self._check_alive()
        self._quiesce()
        clear_dir(self._tmp)
        if self._net is not None:
            self._net.clear()
        clear_dir(self._snaps)
        self._snapshots.clear()
        self._load_template(refresh=workspace is not None)


def _read_frames(raw: socket.socket, deadline: float, out: CappedBuffer, err: CappedBuffer) -> bool:
    """Demultiplex the exec stream into ``out``/``err`` until EOF; ``False`` on the deadline.

    The engine frames non-tty output as an 8-byte header (stream id, 3 zero
    bytes, big-endian length) followed by the payload.
    """
    pending = b""
    raw.setblocking(False)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        ready, _, _ = select.select([raw], [], [], min(remaining, 1.0))
        if not ready:
            continue
        try:
            chunk = raw.recv(1 << 16)
        except BlockingIOError:
            continue
        except OSError:
            return True
        if not chunk:
            return True
        pending += chunk
        while len(pending) >= 8:
            stream, size = pending[0], struct.unpack(">I", pending[4:8])[0]
            if len(pending) < 8 + size:
                break
            payload, pending = pending[8 : 8 + size], pending[8 + size :]
            (err if stream == 2 else out).feed(payload)
