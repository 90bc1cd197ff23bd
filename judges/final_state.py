"""The final state a judge judges: the agent's workspace as regular files only, read once.

Every judge of an episode reads the same tree, and every process a judge runs
runs in exactly that tree. :func:`capture` is the one function that decides it:

1. whatever the agent left running is killed, what the sandbox saw outside its
   workspace (files in its ``/tmp``, network packets) is noted;
2. the workspace is exported as an archive and read into memory: directories
   and regular files, each file whole (up to :data:`FILE_LIMIT`); a symlink is
   resolved inside the workspace into a copy of what it names, and refused when
   it leads out of the workspace, nowhere, or round in a loop; caches and the
   judge's reserved names are left out of the tree altogether (so no process of
   the judge's can import or open them either);
3. before a judge runs anything in the sandbox, the sandbox is reset to that
   tree (:meth:`FinalState.load_into`, through
   :meth:`judges.context.JudgeContext.judged_sandbox`): its ``/tmp`` is emptied
   and every process a judge starts there (the bridge's server, a compile check,
   the agent's procedure on generated inputs) sees the files the process judge
   read and nothing else of the agent's.

Anything about the workspace the judge cannot take in (a file over the limit, a
path too long for the host, a name that is not UTF-8, more entries than the
judge lists, a link it refuses) is the agent's doing and raises
:class:`~judges.errors.WorkspaceUnjudgeable`: the verdict is ``fail`` with a
flag, never ``error``, and never a silent skip.
"""

from __future__ import annotations

import hashlib
import io
import os
import posixpath
import tarfile
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from judges.errors import WorkspaceUnjudgeable

if TYPE_CHECKING:
    from sandboxes.interface import Sandbox
    from sandboxes.netwatch import NetworkReport

FILE_LIMIT = 4 << 20
"""Largest file the judge reads (bytes); a larger one makes the workspace unjudgeable."""
WORKSPACE_LIMIT = 256 << 20
"""Largest workspace archive the judge takes, and most bytes the resolved tree may hold."""
PATH_LIMIT = 1024
"""Longest workspace-relative path (bytes): far beyond any honest tree, and well inside the host's
``PATH_MAX`` wherever the judge unpacks it."""
NAME_LIMIT = 255
"""Longest single name (bytes), as every Linux file system has it."""
MAX_ENTRIES = 200_000
"""Most files and directories the tree may hold (links resolved)."""
LINK_HOPS = 40
"""Links followed while resolving one path (the kernel's own bound)."""
MAX_LINKS = 1000
"""Most symlinks a workspace may hold (each becomes a copy; an honest tree has a handful)."""
MAX_DIR_LINKS = 100
"""Most of them that may name directories (each becomes a copy of a subtree)."""
DROPPED_NAMES = frozenset({"__pycache__", ".pytest_cache", ".git"})
"""Directories left out of the tree at any depth: caches (the agent's code runs from source only)
and version control (no package needs it at run time, and it is a place to keep data out of
sight). Left out means left out for every judge: nothing the judge runs can open them."""
RESERVED_PREFIX = ".trajlake-"
"""Top-level names of the judge's own (its channel to the bridge), never the agent's."""
WORKSPACE = "/workspace"


@dataclass(frozen=True)
class FinalState:
    """The workspace the agent left, as the judge reads it (see the module docstring)."""

    files: Mapping[str, bytes]
    """Every regular file of the tree, by workspace-relative POSIX path, with its content."""
    dirs: frozenset[str]
    """Every directory of the tree (relative paths; empty ones too)."""
    executable: frozenset[str] = frozenset()
    """Files with an execute bit (they are written ``0755``, every other ``0644``)."""
    links: Mapping[str, str] = field(default_factory=dict)
    """Paths that were symlinks in the workspace, with the target the agent wrote (now copies)."""
    dropped: tuple[str, ...] = ()
    """Top-most paths left out of the tree (caches, version control, the judge's reserved names)."""
    outside: tuple[str, ...] = ()
    """Files the sandbox held outside its workspace (its ``/tmp``) before the judge reset it."""
    network: NetworkReport | None = None
    """What the sandbox's network namespace saw before the judge reset it (``None``: not observed)."""
    archive_sha256: str = ""
    """sha256 of the exported archive the tree was read from."""

    @cached_property
    def digest(self) -> str:
        """sha256 over the tree (paths, execute bits, contents): the same tree, the same digest."""
        h = hashlib.sha256()
        for path in sorted(self.files):
            h.update(path.encode("utf-8") + (b"\1" if path in self.executable else b"\0"))
            h.update(hashlib.sha256(self.files[path]).digest())
        for d in sorted(self.dirs):
            h.update(b"d" + d.encode("utf-8") + b"\0")
        return h.hexdigest()

    def listing(self) -> dict[str, str]:
        """Path -> sha256 of every file."""
        return {p: hashlib.sha256(data).hexdigest() for p, data in self.files.items()}

    def materialise(self, dest: Path) -> Path:
        """Write the tree under ``dest`` (created): directories ``0755``, files ``0644``/``0755``."""
        dest.mkdir(parents=True, exist_ok=True)
        for d in sorted(self.dirs):
            (dest / d).mkdir(mode=0o755, parents=True, exist_ok=True)
        for path, data in self.files.items():
            p = dest / path
            p.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            p.write_bytes(data)
            os.chmod(p, 0o755 if path in self.executable else 0o644)
        return dest

    def load_into(self, sandbox: Sandbox, *, replace: Mapping[str, bytes] | None = None,
                  remove: tuple[str, ...] = ()) -> None:  # fmt: skip
        """Reset ``sandbox`` to this tree: processes killed, ``/tmp`` emptied, the workspace exactly the tree.

        Args:
            sandbox: the sandbox to reset.
            replace: files (relative paths) written over the tree's, e.g. generated inputs.
            remove: paths (files or directories) left out first, e.g. stale outputs.
        """
        from sandboxes.errors import SandboxQuotaError

        with tempfile.TemporaryDirectory(prefix="trajlake-judged-") as tmp:
            root = Path(tmp) / "ws"
            self.edited(replace=replace, remove=remove).materialise(root)
            what = "the judged tree" + (" with generated inputs" if replace or remove else "")
            try:
                sandbox.reset(workspace=root, note=f"judge: {what} ({self.digest[:12]})")
            except SandboxQuotaError as exc:  # the tree is the agent's: too much to hold again
                raise WorkspaceUnjudgeable(f"the judged tree does not fit the sandbox again: {exc}") from exc

    def edited(
        self, *, replace: Mapping[str, bytes] | None = None, remove: tuple[str, ...] = ()
    ) -> FinalState:
        """This tree with ``remove`` left out and ``replace`` written over it."""
        if not replace and not remove:
            return self
        gone = tuple(r.rstrip("/") for r in remove)

        def kept(p: str) -> bool:
            return not any(p == r or p.startswith(r + "/") for r in gone)

        files = {p: d for p, d in self.files.items() if kept(p)}
        dirs = {d for d in self.dirs if kept(d)}
        for path, data in (replace or {}).items():
            files[path] = data
            parent = posixpath.dirname(path)
            while parent:
                dirs.add(parent)
                parent = posixpath.dirname(parent)
        return FinalState(files=files, dirs=frozenset(dirs), executable=self.executable & set(files),
                          links={}, archive_sha256="")  # fmt: skip

    def text(self, path: str) -> str | None:
        """A file as UTF-8 text (``None``: absent, or not UTF-8)."""
        data = self.files.get(path)
        if data is None:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None


def shown(path: str) -> str:
    r"""A path as evidence may carry it: bytes that are not UTF-8 shown as ``\xNN``."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def observed_network(sandbox: Sandbox) -> NetworkReport | None:
    """What the sandbox's network namespace saw (``None``: not observed, or the sandbox broke)."""
    from sandboxes.errors import SandboxError

    try:
        return sandbox.network_report()
    except SandboxError:
        return None


def capture(sandbox: Sandbox, *, reserved: tuple[str, ...] = (), archive: bytes | None = None,
            reset: bool = True, observe_network: bool = True) -> FinalState:  # fmt: skip
    """Read the sandbox's final state and (with ``reset``) put the sandbox in exactly that state.

    Args:
        sandbox: the sandbox the agent used.
        reserved: top-level names that are the judge's (the hidden tests' directory): left out.
        archive: the workspace's archive when the caller exported it already (a rollout does,
            before judging); exported here otherwise.
        reset: load the tree back into the sandbox (see :meth:`FinalState.load_into`).
        observe_network: read the network namespace's report now (it costs a process; a caller
            that resets the sandbox later may read it then, before the reset).

    Raises:
        WorkspaceUnjudgeable: the workspace cannot be read within the judge's limits (the agent's
            doing; see :func:`read_archive`).
        SandboxError: the sandbox broke.
    """
    from sandboxes.errors import SandboxError, SandboxQuotaError

    sandbox.stop_processes()
    network = observed_network(sandbox) if observe_network else None
    try:
        outside = tuple(sandbox.files_outside_workspace())
    except SandboxError:
        outside = ()
    if archive is None:
        try:
            archive = sandbox.export_workspace(max_bytes=WORKSPACE_LIMIT)
        except SandboxQuotaError as exc:
            raise WorkspaceUnjudgeable(f"the workspace cannot be archived: {exc}") from exc
    state = read_archive(archive, reserved=reserved)
    _fits(state, sandbox)
    state = FinalState(
        files=state.files, dirs=state.dirs, executable=state.executable, links=state.links,
        dropped=state.dropped, outside=outside, network=network, archive_sha256=state.archive_sha256,
    )  # fmt: skip
    if reset:
        state.load_into(sandbox)
    return state


ROOM_ENTRIES = 256
"""Entries the judge keeps free in a sandbox when it loads the tree back (its own channel, the
overlay's bookkeeping): a tree that leaves less is unjudgeable, decided before the reset, never a
reset that fails half-way."""
ROOM_BYTES = 4 << 20
PAGE = 4096


def _fits(state: FinalState, sandbox: Sandbox) -> None:
    """Refuse a tree the sandbox could not hold again with room for the judge (the agent's doing).

    Raises:
        WorkspaceUnjudgeable: too many entries or bytes (in whole pages) for the sandbox's workspace.
    """
    entries = len(state.files) + len(state.dirs)
    # a tmpfs spends whole pages: a 4097-byte file takes 8 KiB, and each copy a hard link, a link to
    # a directory or a sparse file becomes in the tree takes its own
    size = sum(-(-len(d) // PAGE) * PAGE for d in state.files.values())
    max_files = getattr(sandbox.spec, "max_files", None)
    disk = getattr(sandbox.spec, "disk_mb", None)
    if isinstance(max_files, int) and entries > max_files - ROOM_ENTRIES:
        raise WorkspaceUnjudgeable(
            f"the workspace holds {entries} files and directories: the sandbox holds {max_files}, and the "
            f"judge needs {ROOM_ENTRIES} of them to load it back and judge it"
        )
    if isinstance(disk, int) and size > (disk << 20) - ROOM_BYTES:
        raise WorkspaceUnjudgeable(
            f"the workspace holds {size} bytes: the sandbox holds {disk} MiB, and the judge needs "
            f"{ROOM_BYTES >> 20} MiB of it to load it back and judge it"
        )


# --------------------------------------------------------------------------- reading an archive


def _bad_name(rel: str) -> str | None:
    """Why a workspace-relative path cannot be judged (``None``: it can)."""
    try:
        raw = rel.encode("utf-8")
    except UnicodeEncodeError:
        return "its name is not UTF-8"
    if len(raw) > PATH_LIMIT:
        return f"its path is {len(raw)} bytes long (the judge takes up to {PATH_LIMIT})"
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        return "its path leaves the workspace"
    if any(len(p.encode("utf-8")) > NAME_LIMIT for p in parts):
        return f"a name in its path is over {NAME_LIMIT} bytes"
    if "\0" in rel:
        return "its name holds a NUL byte"
    return None


def _drop_point(parts: list[str], reserved: tuple[str, ...]) -> int | None:
    """Index of the first component that leaves the path out of the tree (``None``: it stays)."""
    if parts[0] in reserved or parts[0].startswith(RESERVED_PREFIX):
        return 0
    for i, p in enumerate(parts):
        if p in DROPPED_NAMES:
            return i
    return None


def read_archive(archive: bytes, *, reserved: tuple[str, ...] = ()) -> FinalState:
    """The tree a workspace archive (:func:`sandboxes.workspace_io.archive_tree`) holds, links resolved.

    Raises:
        WorkspaceUnjudgeable: a file over :data:`FILE_LIMIT`, a path over :data:`PATH_LIMIT` or a
            name that is not UTF-8, more than :data:`MAX_ENTRIES` entries or :data:`WORKSPACE_LIMIT`
            bytes, something that is not a file, directory or link, or a link out of the workspace,
            to nothing, or in a loop (kind ``links_out_of_workspace``).
    """
    files: dict[str, bytes] = {}
    dirs: set[str] = set()
    executable: set[str] = set()
    links: dict[str, str] = {}
    dropped: set[str] = set()
    problems: list[str] = []
    try:
        tar = tarfile.open(fileobj=io.BytesIO(archive), mode="r:")
    except tarfile.TarError as exc:
        raise WorkspaceUnjudgeable(f"the workspace archive does not read: {exc}") from exc
    with tar:
        count = 0
        try:
            members: Iterator[tarfile.TarInfo] = iter(tar)
            for m in members:
                count += 1
                if count > MAX_ENTRIES:
                    raise WorkspaceUnjudgeable(
                        f"the workspace holds more than {MAX_ENTRIES} files and directories"
                    )
                rel = m.name.rstrip("/")
                parts = rel.split("/")
                cut = _drop_point(parts, reserved) if rel else None
                if cut is not None:
                    dropped.add("/".join(parts[: cut + 1]))
                    continue
                why = _bad_name(rel)
                if why:
                    problems.append(f"{shown(rel)!r}: {why}")
                    continue
                if m.isdir():
                    dirs.add(rel)
                elif m.issym():
                    links[rel] = m.linkname
                elif m.isfile():
                    if m.size > FILE_LIMIT:
                        problems.append(f"{rel}: {m.size} bytes (the judge reads files up to {FILE_LIMIT})")
                        continue
                    fh = tar.extractfile(m)
                    files[rel] = fh.read() if fh is not None else b""
                    if m.mode & 0o111:
                        executable.add(rel)
                else:
                    problems.append(f"{rel}: not a regular file, directory or link")
        except tarfile.TarError as exc:
            raise WorkspaceUnjudgeable(f"the workspace archive does not read: {exc}") from exc
    if problems:
        raise WorkspaceUnjudgeable(
            "; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
        )
    for d in list(dirs) + list(files) + list(links):
        parent = posixpath.dirname(d)
        while parent and parent not in dirs:
            dirs.add(parent)
            parent = posixpath.dirname(parent)
    if len(links) > MAX_LINKS:
        raise WorkspaceUnjudgeable(
            f"the workspace holds {len(links)} symlinks (the judge resolves up to {MAX_LINKS})"
        )
    _resolve_links(files, dirs, executable, links)
    total = sum(len(d) for d in files.values())
    if len(files) + len(dirs) > MAX_ENTRIES or total > WORKSPACE_LIMIT:
        raise WorkspaceUnjudgeable(
            f"with its links resolved the workspace holds {len(files) + len(dirs)} entries and {total} bytes "
            f"(the judge takes up to {MAX_ENTRIES} and {WORKSPACE_LIMIT})"
        )
    return FinalState(
        files=files, dirs=frozenset(dirs), executable=frozenset(executable), links=links,
        dropped=tuple(sorted(dropped)), archive_sha256=hashlib.sha256(archive).hexdigest(),
    )  # fmt: skip


class _Refused(Exception):
    pass


def _resolve_links(
    files: dict[str, bytes], dirs: set[str], executable: set[str], links: dict[str, str]
) -> None:
    """Turn every link into a copy of what it names inside the workspace, or refuse the workspace."""
    refused: list[str] = []

    def target_of(path: str, hops: int) -> str:
        """The link-free path ``path`` names (its components may run through links)."""
        parts = path.split("/") if path else []
        done: list[str] = []
        while parts:
            done.append(parts.pop(0))
            here = "/".join(done)
            if here not in links:
                continue
            hops += 1
            if hops > LINK_HOPS:
                raise _Refused("a loop of links")
            goal = links[here]
            if goal.startswith("/"):
                if goal.rstrip("/") == WORKSPACE:
                    base = "."
                elif goal.startswith(WORKSPACE + "/"):
                    base = goal[len(WORKSPACE) + 1 :]
                else:
                    raise _Refused(f"leads out of the workspace ({goal})")
            else:
                base = posixpath.join(posixpath.dirname(here), goal)
            norm = posixpath.normpath(base)
            if norm == ".." or norm.startswith("../") or norm.startswith("/"):
                raise _Refused(f"leads out of the workspace ({goal})")
            norm = "" if norm == "." else norm
            parts = (norm.split("/") if norm else []) + parts
            done = []
        return "/".join(done)

    goals: dict[str, str] = {}
    for link in sorted(links):
        try:
            goal = target_of(link, 0)
            if goal not in files and goal not in dirs and goal != "":
                raise _Refused(f"names nothing ({links[link]})")
            if goal == "" or link == goal or link.startswith(goal + "/"):
                if goal not in files:
                    raise _Refused("names a directory that holds it")
            goals[link] = goal
        except _Refused as exc:
            refused.append(f"{shown(link)} -> {shown(links[link])}: {exc}")
    if refused:
        raise WorkspaceUnjudgeable(
            "links the judge will not follow: " + "; ".join(refused[:5]), kind="links_out_of_workspace"
        )
    for link, goal in goals.items():
        if goal in files:
            files[link] = files[goal]
            if goal in executable:
                executable.add(link)
    pending = {link: goal for link, goal in goals.items() if goal not in files}
    if len(pending) > MAX_DIR_LINKS:
        raise WorkspaceUnjudgeable(
            f"the workspace holds {len(pending)} links to directories "
            f"(the judge copies up to {MAX_DIR_LINKS})"
        )
    while pending:
        # a link to a directory is copied once nothing under that directory is still a link to expand
        ready = [k for k, g in pending.items() if not any(o.startswith(g + "/") for o in pending)]
        if not ready:
            cycle = ", ".join(shown(k) for k in sorted(pending)[:5])
            raise WorkspaceUnjudgeable(
                f"links the judge will not follow: directories that link into each other ({cycle})",
                kind="links_out_of_workspace",
            )
        for link in ready:
            prefix = pending.pop(link) + "/"
            for p in [p for p in files if p.startswith(prefix)]:
                files[link + "/" + p[len(prefix) :]] = files[p]
                if p in executable:
                    executable.add(link + "/" + p[len(prefix) :])
            for d in [d for d in dirs if d.startswith(prefix)]:
                dirs.add(link + "/" + d[len(prefix) :])
            dirs.add(link)
            if len(files) + len(dirs) > MAX_ENTRIES:
                raise WorkspaceUnjudgeable(
                    f"with its links resolved the workspace holds more than {MAX_ENTRIES} entries"
                )


def host_tree(root: Path) -> FinalState:
    """The same reading of a directory on the host (a task's initial state, a reference's tree)."""
    from sandboxes.workspace_io import archive_tree

    if not root.is_dir():
        return FinalState(files={}, dirs=frozenset())
    return read_archive(archive_tree(root, max_bytes=WORKSPACE_LIMIT))
