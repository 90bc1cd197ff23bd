"""Reading and writing workspace files from the host without following the agent's links.

The workspace of both backends is a directory on the host, so files are read and
written there directly instead of through a command in the sandbox. The agent
controls that directory: a symlink ``/workspace/x -> /etc/shadow`` must not make
a host-side read (done by root) disclose the host file. Every path component is
opened relative to its parent's descriptor with ``O_NOFOLLOW``, so a link
anywhere on the way is refused instead of followed.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
from pathlib import Path

from sandboxes.errors import SandboxPathError, SandboxQuotaError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_parent(root: Path, rel: str, *, create: bool, uid: int, gid: int) -> tuple[int, str]:
    """Descriptor of the directory holding ``rel`` and the last component's name."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts:
        raise SandboxPathError("the workspace root is not a file")
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, 0o755, dir_fd=fd)
                os.chown(part, uid, gid, dir_fd=fd, follow_symlinks=False)
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise SandboxPathError(f"{rel!r}: {part!r} is a symlink or not a directory") from None
                raise
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]


def read_under(root: Path, rel: str, max_bytes: int | None = None) -> bytes:
    """Bytes of the regular file ``root/rel``, refusing symlinks anywhere on the path.

    Raises:
        SandboxPathError: a symlink, a directory or a special file, or too large.
        FileNotFoundError: no such file.
    """
    dfd, name = _open_parent(root, rel, create=False, uid=-1, gid=-1)
    try:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dfd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise SandboxPathError(f"{rel!r} is a symlink") from None
            raise
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SandboxPathError(f"{rel!r} is not a regular file")
        if max_bytes is not None and st.st_size > max_bytes:
            raise SandboxPathError(f"{rel!r} has {st.st_size} bytes, more than the limit {max_bytes}")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_under(root: Path, rel: str, data: bytes, *, mode: int, uid: int, gid: int) -> None:
    """Create or replace ``root/rel`` owned by ``uid:gid``, refusing symlinks on the path.

    Raises:
        SandboxPathError: a component is a symlink or not a directory.
        SandboxQuotaError: the workspace filesystem is full.
    """
    dfd, name = _open_parent(root, rel, create=True, uid=uid, gid=gid)
    tmp = f".{name}.trajlake-tmp"
    try:
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd
        )
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchown(fd, uid, gid)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        # rename over the old name replaces a symlink itself, never its target
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except OSError as exc:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise SandboxQuotaError(f"workspace full writing {rel!r}") from exc
        if exc.errno == errno.ELOOP:
            raise SandboxPathError(f"{rel!r} is a symlink") from None
        raise
    finally:
        os.close(dfd)


def copy_tree(src: Path, dst: Path, *, uid: int | None = None, gid: int | None = None) -> None:
    """Copy the contents of ``src`` into ``dst`` keeping modes, links and times.

    With ``uid``/``gid`` every copied entry is re-owned (templates become the
    agent's files). ``cp -a`` does this faster than Python and keeps hard links.
    """
    dst.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["cp", "-a", "--reflink=auto", "--no-target-directory", f"{src}/.", str(dst)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        if "No space left" in proc.stderr or "Disk quota" in proc.stderr:
            raise SandboxQuotaError(f"workspace full copying {src}: {proc.stderr.strip()[-300:]}")
        raise OSError(f"cp -a {src} {dst} failed: {proc.stderr.strip()[-500:]}")
    if uid is not None:
        chown_tree(dst, uid, -1 if gid is None else gid)


def chown_tree(root: Path, uid: int, gid: int) -> None:
    """``chown -R`` without following symlinks."""
    os.chown(root, uid, gid, follow_symlinks=False)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), uid, gid, follow_symlinks=False)


def clear_dir(root: Path) -> None:
    """Remove everything inside ``root`` (not ``root`` itself), links included, never followed."""
    with os.scandir(root) as it:
        for entry in it:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
