"""What a judge sees: the task, the trajectory's events, and the sandbox with the final state.

The final diff (the workspace against the task's initial state) is computed
once per context, before any judge copies hidden tests in, and shared by every
judge of a composite.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judges.errors import WorkspaceUnjudgeable
from judges.tasks import Task
from sandboxes.errors import SandboxError
from sandboxes.interface import Sandbox
from schemas.events import Event, ToolCall, ToolResult

TEXT_LIMIT = 256 << 10
"""Files larger than this are compared by hash only..."""
CODE_TEXT_LIMIT = 4 << 20
"""... except Python files, read up to this size (a larger one is flagged as code the judge cannot read)."""

MAX_ENTRIES = 200_000
"""Most files and directories a workspace listing walks (a sandbox's tmpfs holds fewer)."""

_LIST_FILES = r"""
import hashlib, json, os, sys
root, limit, skip = sys.argv[1], int(sys.argv[2]), set(sys.argv[3:])
out = {}
seen = 0
for dp, dns, fns in os.walk(root):
    seen += len(dns) + len(fns)
    if seen > limit:
        print(json.dumps({"__too_many__": seen}))
        raise SystemExit(0)
    rel_dp = os.path.relpath(dp, root)
    dns[:] = [d for d in dns if d not in ("__pycache__", ".git", ".pytest_cache")
              and os.path.normpath(os.path.join(rel_dp, d)) not in skip]
    for fn in fns:
        p = os.path.join(dp, fn)
        rel = os.path.normpath(os.path.relpath(p, root))
        if os.path.islink(p):
            out[rel] = "link:" + os.readlink(p)
            continue
        try:
            with open(p, "rb") as fh:
                out[rel] = hashlib.sha256(fh.read()).hexdigest()
        except OSError as e:
            out[rel] = "unreadable:" + type(e).__name__
print(json.dumps(out))
"""


def list_files(sandbox: Sandbox, skip: Sequence[str] = ()) -> dict[str, str]:
    """Every file of the sandbox's workspace with its sha256 (listed inside the sandbox).

    Raises:
        WorkspaceUnjudgeable: the listing ran past its time or memory, or the workspace holds
            more than :data:`MAX_ENTRIES` entries (the agent's doing: a sandbox that broke
            raises its :class:`SandboxError` instead).
    """
    r = sandbox.exec(["python3", "-I", "-c", _LIST_FILES, "/workspace", str(MAX_ENTRIES), *skip], timeout=60)
    if r.timed_out or r.oom_killed:
        why = "ran past 60 s" if r.timed_out else "ran out of the sandbox's memory"
        raise WorkspaceUnjudgeable(f"listing the workspace {why}")
    if r.exit_code != 0:
        raise SandboxError(f"cannot list the workspace: exit {r.exit_code}: {r.stderr[-300:]}")
    data: dict[str, str] = json.loads(r.stdout)
    if "__too_many__" in data:
        raise WorkspaceUnjudgeable(f"the workspace holds more than {MAX_ENTRIES} files and directories")
    return data


def host_files(root: Path) -> dict[str, str]:
    """The same listing for a directory on the host (a task's initial state)."""
    import hashlib
    import os

    out: dict[str, str] = {}
    if not root.is_dir():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in ("__pycache__", ".git", ".pytest_cache")]
        for name in filenames:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            out[rel] = (
                "link:" + os.readlink(p) if p.is_symlink() else hashlib.sha256(p.read_bytes()).hexdigest()
            )
    return out


@dataclass
class FileChange:
    """One file that differs between the initial and the final state."""

    path: str
    kind: str
    """``added``, ``deleted`` or ``modified``."""
    old: str | None = None
    """Old text (``None`` for binary, large, or absent)."""
    new: str | None = None
    """New text (likewise)."""

    def added_lines(self) -> list[tuple[int, str]]:
        """(line number in the new file, text) of every added line."""
        return self._lines("+")

    def added_code_lines(self) -> list[tuple[int, str]]:
        """Like :meth:`added_lines`, with the comments of a Python file taken out (a comment does nothing)."""
        added = self.added_lines()
        if not self.path.endswith(".py") or self.new is None:
            return added
        comments = _comment_spans(self.new)
        out = []
        for n, text in added:
            start = comments.get(n)
            out.append((n, text if start is None else text[:start]))
        return out

    def removed_lines(self) -> list[tuple[int, str]]:
        """(line number in the old file, text) of every removed line."""
        return self._lines("-")

    def _lines(self, sign: str) -> list[tuple[int, str]]:
        old = (self.old or "").splitlines()
        new = (self.new or "").splitlines()
        out = []
        matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            if sign == "+":
                out += [(j + 1, new[j]) for j in range(j1, j2)]
            else:
                out += [(i + 1, old[i]) for i in range(i1, i2)]
        return out


def _comment_spans(text: str) -> dict[int, int]:
    """Line number -> column where its comment starts (none for a file that does not tokenize)."""
    import io
    import tokenize

    out: dict[int, int] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                out[tok.start[0]] = tok.start[1]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return {}
    return out


@dataclass
class WorkspaceDiff:
    """The final workspace against the initial state."""

    changes: list[FileChange] = field(default_factory=list)

    @property
    def paths(self) -> list[str]:
        """Changed paths."""
        return [c.path for c in self.changes]


def _text(data: bytes | None, path: str = "") -> str | None:
    """The file as text (``None``: binary or too large); Python files in their declared encoding."""
    code = path.endswith(".py")
    if data is None or len(data) > (CODE_TEXT_LIMIT if code else TEXT_LIMIT) or b"\0" in data[:8192]:
        return None
    if code:
        import io
        import tokenize

        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
            return data.decode(encoding)
        except (SyntaxError, LookupError, UnicodeDecodeError):
            return None  # Python would not read it either, or not as the judge would
    return data.decode("utf-8", "replace")


def compute_diff(sandbox: Sandbox, initial: Path, skip: Sequence[str] = ()) -> WorkspaceDiff:
    """Compare the sandbox's workspace with ``initial`` (a host directory)."""
    before = host_files(initial)
    after = list_files(sandbox, skip)
    changes = []
    for path in sorted(set(before) | set(after)):
        b, a = before.get(path), after.get(path)
        if b == a:
            continue
        readable = b is not None and not b.startswith("link:")
        old = _text((initial / path).read_bytes(), path) if readable else None
        new = None
        if a is not None and not a.startswith(("link:", "unreadable:")):
            limit = CODE_TEXT_LIMIT if path.endswith(".py") else TEXT_LIMIT
            try:
                new = _text(sandbox.read_file(path, max_bytes=limit), path)
            except (SandboxError, OSError):
                new = None
        kind = "added" if b is None else "deleted" if a is None else "modified"
        changes.append(FileChange(path, kind, old, new))
    return WorkspaceDiff(changes)


@dataclass
class ToolStep:
    """One tool call of the trajectory and what came back."""

    seq: int
    tool: str
    arguments: dict[str, Any]
    exit_code: int | None = None
    output: str = ""

    @property
    def command(self) -> str:
        """The shell command (``bash`` tools), else the arguments as JSON."""
        cmd = self.arguments.get("command")
        return cmd if isinstance(cmd, str) else json.dumps(self.arguments, sort_keys=True)


@dataclass
class JudgeContext:
    """Everything one judging pass may look at."""

    task: Task
    sandbox: Sandbox
    events: Sequence[Event] = ()
    _diff: WorkspaceDiff | None = None

    def diff(self) -> WorkspaceDiff:
        """The final diff, computed on first use (before hidden tests are copied in)."""
        if self._diff is None:
            self._diff = compute_diff(
                self.sandbox, self.task.initial_dir, skip=[self.task.spec.hidden_tests.target]
            )
        return self._diff

    def tool_steps(self) -> list[ToolStep]:
        """The tool calls of the trajectory in order, with their results."""
        steps: dict[str, ToolStep] = {}
        for ev in self.events:
            if isinstance(ev, ToolCall):
                call = ev.payload
                steps[call.call_id] = ToolStep(ev.seq, call.tool, dict(call.arguments))
            elif isinstance(ev, ToolResult):
                res = ev.payload
                step = steps.get(res.call_id)
                if step is not None:
                    step.exit_code = res.exit_code
                    step.output = (res.stdout.text or "") + (res.stderr.text or "")
        return sorted(steps.values(), key=lambda s: s.seq)

    def steps_taken(self) -> int:
        """Number of policy steps (model calls, or tool calls when no model call was recorded)."""
        calls = sum(1 for ev in self.events if ev.type == "model_call")
        return calls or len(self.tool_steps())
