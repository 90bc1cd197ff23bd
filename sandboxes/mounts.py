"""Mounting from the host (as root): tmpfs bounds and overlay workspaces.

Called through libc directly: a mount is on the path of every snapshot and
restore, and spawning ``mount(8)`` would cost more than the mount itself.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from pathlib import Path

from sandboxes.errors import SandboxUnavailableError

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_MNT_DETACH = 2


def mount(source: str, target: Path, fstype: str, options: str) -> None:
    """``mount -t fstype -o options source target``; raises ``OSError`` with the reason."""
    if _libc.mount(source.encode(), str(target).encode(), fstype.encode(), 0, options.encode()) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount -t {fstype} {source} {target} ({options}): {os.strerror(err)}")


def umount(target: Path) -> None:
    """Unmount ``target``; not mounted is fine, busy falls back to a lazy detach."""
    if _libc.umount2(str(target).encode(), 0) == 0:
        return
    err = ctypes.get_errno()
    if err == errno.EINVAL:  # not mounted
        return
    if err == errno.EBUSY and _libc.umount2(str(target).encode(), _MNT_DETACH) == 0:
        return
    raise OSError(err, f"umount {target}: {os.strerror(err)}")


def mount_tmpfs(
    target: Path,
    size_mb: int,
    what: str,
    *,
    mode: str = "0755",
    owner: int | None = None,
    inodes: int | None = None,
) -> None:
    """Mount a size-bounded tmpfs at ``target`` (created here), with at most ``inodes`` entries.

    Raises:
        SandboxUnavailableError: the mount failed (``what`` names it in the message).
    """
    target.mkdir()
    opts = f"size={size_mb}m,mode={mode}" + (f",uid={owner},gid={owner}" if owner is not None else "")
    if inodes is not None:
        opts += f",nr_inodes={inodes}"
    try:
        mount("tmpfs", target, "tmpfs", opts)
    except OSError as exc:
        raise SandboxUnavailableError(f"cannot mount {what}: {exc}") from exc


def untraversable_ancestor(path: Path, uid: int, gid: int | None = None) -> Path | None:
    """The first existing directory on the way to ``path`` that ``uid`` cannot pass through.

    The ``local`` backend's processes run as an unprivileged host uid, so bubblewrap
    can bind the image's root filesystem and the sandbox's own directories only if
    every directory above them lets that uid through (``x`` for it, its group or
    others): a store or runtime directory made by ``mktemp -d`` (mode 0700) does not.
    """
    gid = uid if gid is None else gid
    current = Path(path).absolute()
    for p in [current, *current.parents]:
        try:
            st = os.stat(p)
        except FileNotFoundError:
            continue
        if uid == 0:
            return None
        if st.st_uid == uid:
            ok = st.st_mode & 0o100
        elif st.st_gid == gid:
            ok = st.st_mode & 0o010
        else:
            ok = st.st_mode & 0o001
        if not ok:
            return p
    return None
