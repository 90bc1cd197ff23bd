"""A cache of tasks' prepared initial states, shared by every attempt and worker on a host.

A task's initial state is its files copied in, then its setup commands run (an
install, a build, generated data): the same work for every attempt. The first
attempt of a (task version and content, image digest) prepares it cold and
leaves the prepared workspace here, as a directory; every later attempt, in any
worker, starts its sandbox from that directory instead (its ``reset`` template,
copied in with its modes as the task's files are) and runs no setup. Entries
are written to a temporary name and renamed into place, so a reader sees a
whole entry or none; two workers that miss at once both prepare, and one entry
stays; the directory is the host's alone (mode 0700). A setup that leaves anything outside the workspace (in
``/tmp`` or ``$HOME``, the sandbox's other writable places) is not cached: the
cache holds workspaces only, and such a task is prepared cold every time.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from judges.final_state import WORKSPACE_LIMIT, read_archive
from judges.tasks import Task
from sandboxes.interface import Sandbox
from sandboxes.workspace_io import extract_archive


@dataclass
class StateCache:
    """Prepared initial states under ``root``, by (task, image digest)."""

    root: Path
    hits: int = 0
    misses: int = 0
    uncacheable: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def key(self, task: Task, image_digest: str | None) -> str:
        """The entry of a task's version and content on an image."""
        image = (image_digest or "host").removeprefix("sha256:")[:16]
        return f"{task.id}@{task.spec.version}.{task.content_digest[:16]}.{image}"

    def prepare(self, task: Task, sandbox: Sandbox) -> str:
        """Put ``sandbox`` in the task's initial state, from the cache when it holds it.

        Returns:
            ``hit``, ``miss`` (prepared cold and cached), ``no_setup`` (nothing to cache: the files
            are the state) or ``uncacheable`` (the setup wrote outside the workspace).

        Raises:
            SandboxError: the sandbox broke.
            TaskSetupError: a setup command failed.
        """
        if not task.spec.initial_state.setup:
            task.prepare(sandbox)
            return "no_setup"
        entry = Path(self.root) / self.key(task, sandbox.image_digest)
        tree = entry / "tree"
        if (entry / "meta.json").is_file():
            sandbox.reset(
                workspace=tree, note=f"the initial state of {task.id} from the cache ({entry.name})"
            )
            with self._lock:
                self.hits += 1
            return "hit"
        task.prepare(sandbox)
        if sandbox.files_outside_workspace(limit=1):
            with self._lock:
                self.uncacheable += 1
            return "uncacheable"
        archive = sandbox.export_workspace(max_bytes=WORKSPACE_LIMIT)
        self._store(entry, archive)
        with self._lock:
            self.misses += 1
        return "miss"

    def _store(self, entry: Path, archive: bytes) -> None:
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.parent.chmod(0o700)  # the host's: no other user reads or plants an entry
        tmp = entry.parent / f".{entry.name}.{uuid.uuid4().hex[:8]}"
        try:
            extract_archive(archive, tmp / "tree")
            meta = {"digest": read_archive(archive).digest, "bytes": len(archive),
                    "archive_sha256": hashlib.sha256(archive).hexdigest()}  # fmt: skip
            (tmp / "meta.json").write_text(json.dumps(meta))
            entry.parent.mkdir(parents=True, exist_ok=True)
            try:
                tmp.rename(entry)
            except OSError:  # another worker stored it first: keep theirs
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def digest(self, task: Task, image_digest: str | None) -> str | None:
        """The cached state's file-tree digest (``None``: not cached)."""
        meta = Path(self.root) / self.key(task, image_digest) / "meta.json"
        return json.loads(meta.read_text())["digest"] if meta.is_file() else None
