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


def remove_paths(paths: list[str | Path]) -> None:
    """Remove each path and everything under it, however deep, links never followed.

    The agent controls these trees and can nest directories thousands deep; Python's ``rmtree``
    recurses once per level and dies at its recursion limit, so the removal is ``rm -rf`` (which
    walks without recursion), kept on the paths' own file system.

    Raises:
        OSError: something could not be removed.
    """
    names = [str(p) for p in paths]
    for i in range(0, len(names), 1000):
        chunk = names[i : i + 1000]
        argv = ["rm", "-rf", "--one-file-system", "--", *chunk]
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            raise OSError(f"rm -rf failed: {proc.stderr.strip()[-500:]}")


def remove_tree(path: str | Path, *, ignore_errors: bool = False) -> None:
    """Remove ``path`` and everything under it, however deep (see :func:`remove_paths`)."""
    try:
        remove_paths([path])
    except OSError:
        if not ignore_errors:
            raise


def clear_dir(root: Path) -> None:
    """Remove everything inside ``root`` (not ``root`` itself), links included, never followed."""
    with os.scandir(root) as it:
        entries = [entry.path for entry in it]
    remove_paths(entries)


MAX_ARCHIVE_DEPTH = 64
"""Deepest directory nesting an archive follows; deeper is refused (an agent can nest thousands)."""


def archive_tree(root: Path, *, max_bytes: int) -> bytes:
    """A deterministic tar of everything under ``root``: the same files give the same bytes.

    Entries are sorted, owned by 0:0 with time 0 and their permission bits only, so
    an archive is content-addressable (the blob store keys it by sha256). Symlinks
    are stored as links, never followed; sockets, fifos and devices are left out.
    The agent controls ``root``, so every entry is opened relative to its
    directory's descriptor with ``O_NOFOLLOW | O_NONBLOCK`` and checked with
    ``fstat`` (a file swapped for a link or a fifo mid-archive is neither followed
    nor waited on); entries that vanish meanwhile are skipped.

    Raises:
        SandboxQuotaError: the archive would exceed ``max_bytes``, or the tree is
            nested deeper than :data:`MAX_ARCHIVE_DEPTH`.
    """
    import io
    import tarfile

    buf = io.BytesIO()
    gone = (errno.ENOENT, errno.ELOOP, errno.ENOTDIR, errno.ENXIO)
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:

        def add(info: tarfile.TarInfo, data: bytes | None = None) -> None:
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
            if buf.tell() > max_bytes:
                raise SandboxQuotaError(f"workspace archive exceeds {max_bytes} bytes")

        def walk(dfd: int, prefix: str, depth: int) -> None:
            for name in sorted(os.listdir(dfd)):
                rel = f"{prefix}{name}"
                try:
                    entry(dfd, name, rel, depth)
                except OSError as exc:
                    if exc.errno not in gone:
                        raise  # removed or swapped while we looked: not part of the state

        def entry(dfd: int, name: str, rel: str, depth: int) -> None:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            info = tarfile.TarInfo(rel)
            info.mode = stat.S_IMODE(st.st_mode) & 0o777
            if stat.S_ISLNK(st.st_mode):
                info.type = tarfile.SYMTYPE
                info.linkname = os.readlink(name, dir_fd=dfd)
                add(info)
            elif stat.S_ISDIR(st.st_mode):
                if depth >= MAX_ARCHIVE_DEPTH:
                    raise SandboxQuotaError(f"workspace nests over {MAX_ARCHIVE_DEPTH} directories at {rel}")
                sub = os.open(name, _DIR_FLAGS, dir_fd=dfd)
                try:
                    info.type = tarfile.DIRTYPE
                    add(info)
                    walk(sub, rel + "/", depth + 1)
                finally:
                    os.close(sub)
            elif stat.S_ISREG(st.st_mode):
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
                with os.fdopen(fd, "rb") as fh:
                    if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                        return  # swapped for something else since the stat
                    data = fh.read(max_bytes + 1)
                info.size = len(data)
                add(info, data)

        top = os.open(root, _DIR_FLAGS)
        try:
            walk(top, "", 0)
        finally:
            os.close(top)
    return buf.getvalue()


def extract_archive(data: bytes, dest: Path) -> None:
    """Unpack an :func:`archive_tree` archive into ``dest`` (created if missing).

    The archive comes from an agent's workspace, so it is unpacked as untrusted:
    only files, directories and symlinks; no absolute names, no ``..``; no entry
    whose path runs through a symlink of the archive, and no entry replacing one,
    so nothing can be written outside ``dest``. Symlinks themselves keep their
    targets (absolute ones included): they are resolved inside the sandbox that
    the unpacked directory becomes, never on the host.

    Raises:
        SandboxPathError: an entry tries to leave ``dest``.
    """
    import io
    import tarfile

    links: set[str] = set()

    def member_filter(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo:
        parts = Path(member.name).parts
        if not parts or member.name.startswith("/") or ".." in parts:
            raise SandboxPathError(f"archive entry {member.name!r} leaves the workspace")
        name = "/".join(parts)
        if any("/".join(parts[:i]) in links for i in range(1, len(parts) + 1)):
            raise SandboxPathError(f"archive entry {member.name!r} goes through a symlink")
        if member.issym():
            links.add(name)
        elif not (member.isfile() or member.isdir()):
            raise SandboxPathError(f"archive entry {member.name!r} is not a file, directory or link")
        return member.replace(mode=member.mode & 0o777, uid=0, gid=0, uname="", gname="", deep=False)

    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        tar.extractall(dest, filter=member_filter)
