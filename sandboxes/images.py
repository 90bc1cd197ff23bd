"""Base images built offline and pinned by digest.

No registry is reachable from the machines this runs on, so images are built
from Debian's package mirror: ``debootstrap`` a minimal root filesystem with
Python, add the agent user and ``/workspace``, tar it, and ``docker import`` the
tarball. The record keeps the tarball's sha256 (which is also the digest of the
image's only layer) and the image id the engine gave it; sandboxes run the image
by that id, so a re-tagged or rebuilt image can never slip in (environment
drift). The unpacked root filesystem stays in the store too: the ``local``
backend runs on exactly the same files.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sandboxes.errors import ImageDriftError, ImageError, ImageNotBuiltError, SandboxUnavailableError
from schemas import fixes

DEFAULT_PACKAGES = ("python3", "python3-pytest", "git", "ca-certificates")
DEFAULT_SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
AGENT_UID = 1000
"""uid and gid of the agent inside every sandbox."""


@dataclass(frozen=True)
class ImageRecord:
    """One built base image."""

    name: str
    """Name sandboxes ask for (``SandboxSpec.image``)."""
    rootfs_sha256: str
    """sha256 of the root filesystem tarball (the image layer's digest)."""
    suite: str
    """Debian suite."""
    packages: list[str]
    """Packages installed on top of ``minbase``."""
    mirror: str
    """Package mirror it was built from."""
    built_at: str
    """UTC time of the build."""
    recipe_sha256: str
    """Digest of (suite, mirror, packages): same recipe, same cached rootfs."""
    image_id: str | None = None
    """Docker image id (``sha256:...``) once imported; sandboxes run exactly this."""
    docker_ref: str | None = None
    """Repository:tag it was imported as (informational; never used to run)."""
    size_bytes: int = 0
    """Size of the tarball."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else worth recording."""

    @property
    def digest(self) -> str:
        """What sandboxes report as their image: the docker id, else the rootfs digest."""
        return self.image_id or f"sha256:{self.rootfs_sha256}"


def recipe_digest(suite: str, mirror: str, packages: Sequence[str]) -> str:
    """Digest of what goes into an image."""
    text = json.dumps({"suite": suite, "mirror": mirror, "packages": sorted(set(packages))})
    return hashlib.sha256(text.encode()).hexdigest()


class ImageStore:
    """The recorded images of this machine and their unpacked root filesystems."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.index = self.root / "images.json"

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Exclusive use of the store (builds and index updates)."""
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)
        with open(self.root / ".lock", "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def records(self) -> dict[str, ImageRecord]:
        """Every record, by name."""
        try:
            raw = json.loads(self.index.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise ImageError(f"image index {self.index} is unreadable: {exc}") from exc
        return {name: ImageRecord(**rec) for name, rec in raw.items()}

    def put(self, record: ImageRecord) -> None:
        """Record (or replace) an image under its name."""
        recs = self.records()
        recs[record.name] = record
        tmp = self.index.with_suffix(".tmp")
        tmp.write_text(json.dumps({n: asdict(r) for n, r in sorted(recs.items())}, indent=2) + "\n")
        os.replace(tmp, self.index)

    def get(self, ref: str) -> ImageRecord:
        """The record a name, docker id (full or short) or rootfs digest refers to.

        Raises:
            ImageNotBuiltError: nothing recorded matches.
        """
        recs = self.records()
        if ref in recs:
            return recs[ref]
        key = ref.removeprefix("sha256:")
        for rec in recs.values():
            ids = [rec.rootfs_sha256] + ([rec.image_id.removeprefix("sha256:")] if rec.image_id else [])
            if len(key) >= 12 and any(i.startswith(key) for i in ids):
                return rec
        known = ", ".join(sorted(recs)) or "none"
        raise ImageNotBuiltError(
            f"image {ref!r} is not built yet (the image store {self.root} holds: {known})",
            fix=fixes.BUILD_IMAGE,
        )

    def rootfs(self, record: ImageRecord) -> Path:
        """The unpacked root filesystem of a record."""
        return self.root / "rootfs" / record.rootfs_sha256[:16]


def _run_logged(argv: list[str], on_line: Callable[[str], None] | None, what: str) -> None:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip()
        tail = (tail + [line])[-30:]
        if on_line:
            on_line(line)
    if proc.wait() != 0:
        raise ImageError(f"{what} failed (exit {proc.returncode}):\n" + "\n".join(tail))


def _finish_rootfs(rootfs: Path) -> None:
    """Add the agent user and the workspace; drop caches that only make the image bigger."""
    etc = rootfs / "etc"
    with open(etc / "passwd", "a") as fh:
        fh.write(f"agent:x:{AGENT_UID}:{AGENT_UID}:trajlake agent:/workspace:/bin/sh\n")
    with open(etc / "group", "a") as fh:
        fh.write(f"agent:x:{AGENT_UID}:\n")
    ws = rootfs / "workspace"
    ws.mkdir(exist_ok=True)
    os.chown(ws, AGENT_UID, AGENT_UID)
    for sub in ("var/cache/apt/archives", "var/lib/apt/lists", "var/log"):
        d = rootfs / sub
        if d.is_dir():
            for entry in d.iterdir():
                if entry.is_file() or entry.is_symlink():
                    entry.unlink()
    (etc / "hostname").write_text("sandbox\n")


def _tar_rootfs(rootfs: Path, out: Path) -> str:
    """Tar the root filesystem (sorted, numeric owners) and return the tarball's sha256."""
    subprocess.run(
        ["tar", "--sort=name", "--numeric-owner", "-C", str(rootfs), "-cf", str(out), "."],
        check=True,
        capture_output=True,
    )
    h = hashlib.sha256()
    with open(out, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def docker_image_present(client: Any, image_id: str) -> bool:
    """The engine has an image with exactly this id."""
    import docker.errors

    try:
        return bool(client.images.get(image_id).id == image_id)
    except docker.errors.ImageNotFound:
        return False


def _docker_import(client: Any, tarball: Path, rootfs_sha: str, name: str) -> tuple[str, str]:
    repo, tag = f"trajlake/{name}", rootfs_sha[:16]
    client.api.import_image_from_file(str(tarball), repository=repo, tag=tag)
    image = client.images.get(f"{repo}:{tag}")
    layers = image.attrs.get("RootFS", {}).get("Layers", [])
    if layers != [f"sha256:{rootfs_sha}"]:
        raise ImageError(f"imported image {image.id} has layers {layers}, expected sha256:{rootfs_sha}")
    return str(image.id), f"{repo}:{tag}"


def build_image(
    store: ImageStore,
    *,
    name: str = "trajlake-base",
    suite: str = DEFAULT_SUITE,
    mirror: str = DEFAULT_MIRROR,
    packages: Sequence[str] = DEFAULT_PACKAGES,
    docker_client: Any | None = None,
    force: bool = False,
    on_line: Callable[[str], None] | None = None,
) -> tuple[ImageRecord, bool]:
    """Build (or reuse) a base image and record it.

    Args:
        store: where records and root filesystems live.
        name: the name sandboxes will ask for.
        suite: Debian suite for ``debootstrap``.
        mirror: Debian mirror.
        packages: installed on top of ``minbase``.
        docker_client: import into this engine too (``None``: rootfs for ``local`` only).
        force: rebuild even if the same recipe is recorded.
        on_line: receives build output lines (progress display).

    Returns:
        The record and whether anything was built or imported (``False``: up to date).

    Raises:
        ImageError: debootstrap or the import failed.
        SandboxUnavailableError: not root, or ``debootstrap`` is missing.
    """
    if os.geteuid() != 0:
        raise SandboxUnavailableError("building a base image needs root (debootstrap)")
    if shutil.which("debootstrap") is None:
        raise SandboxUnavailableError("debootstrap is not installed (apt-get install debootstrap)")
    recipe = recipe_digest(suite, mirror, packages)
    with store.locked():
        existing = store.records().get(name)
        if existing and existing.recipe_sha256 == recipe and store.rootfs(existing).is_dir() and not force:
            if docker_client is None or (
                existing.image_id and docker_image_present(docker_client, existing.image_id)
            ):
                return existing, False
            # rootfs is cached but this engine lacks the image: import it again
            with tempfile.TemporaryDirectory(dir=store.root) as tmp:
                tarball = Path(tmp) / "rootfs.tar"
                sha = _tar_rootfs(store.rootfs(existing), tarball)
                if sha != existing.rootfs_sha256:
                    raise ImageDriftError(
                        f"rootfs of {name} changed on disk: sha256 {sha}, recorded {existing.rootfs_sha256}"
                    )
                new_id, new_ref = _docker_import(docker_client, tarball, sha, name)
            rec = ImageRecord(**{**asdict(existing), "image_id": new_id, "docker_ref": new_ref})
            store.put(rec)
            return rec, True

        work = Path(tempfile.mkdtemp(prefix="build-", dir=store.root))
        try:
            rootfs = work / "rootfs"
            _run_logged(
                [
                    "debootstrap",
                    "--variant=minbase",
                    f"--include={','.join(sorted(set(packages)))}",
                    suite,
                    str(rootfs),
                    mirror,
                ],
                on_line,
                "debootstrap",
            )
            _finish_rootfs(rootfs)
            tarball = work / "rootfs.tar"
            if on_line:
                on_line("I: packing the root filesystem")
            sha = _tar_rootfs(rootfs, tarball)
            image_id: str | None = None
            ref: str | None = None
            if docker_client is not None:
                if on_line:
                    on_line("I: importing into the docker engine")
                image_id, ref = _docker_import(docker_client, tarball, sha, name)
            final = store.root / "rootfs" / sha[:16]
            final.parent.mkdir(parents=True, exist_ok=True)
            os.chmod(final.parent, 0o755)
            if final.exists():
                shutil.rmtree(final)
            rootfs.rename(final)
            os.chmod(final, 0o755)
            rec = ImageRecord(
                name=name,
                rootfs_sha256=sha,
                suite=suite,
                packages=sorted(set(packages)),
                mirror=mirror,
                built_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                recipe_sha256=recipe,
                image_id=image_id,
                docker_ref=ref,
                size_bytes=tarball.stat().st_size,
            )
            store.put(rec)
            return rec, True
        finally:
            shutil.rmtree(work, ignore_errors=True)
