"""What a judge sees: the task, the trajectory's events, and the sandbox with the final state.

The final state is read once per context (:meth:`JudgeContext.final_state`, see
:mod:`judges.final_state`), before any judge runs anything, and shared by every
judge of a composite; so is the final diff against the task's initial state.
"""

from __future__ import annotations

import difflib
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judges.errors import WorkspaceUnjudgeable
from judges.final_state import FILE_LIMIT, FinalState, capture, host_tree, observed_network, shown
from judges.tasks import Task
from sandboxes.interface import Sandbox
from sandboxes.netwatch import NetworkReport
from schemas.events import Event, ToolCall, ToolResult

CODE_TEXT_LIMIT = FILE_LIMIT
"""Python files are read as text in their declared encoding up to this size (every file is read
whole up to :data:`~judges.final_state.FILE_LIMIT`; a larger one makes the workspace unjudgeable)."""


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
    data: bytes | None = None
    """The new file's bytes, whatever they hold (``None``: deleted). Nothing the tree holds is skipped:
    a binary or non-UTF-8 file is searched as bytes."""

    def added_lines(self) -> list[tuple[int, str]]:
        """(line number in the new file, text) of every added line."""
        return self._lines("+")

    def added_code_lines(self) -> list[tuple[int, str]]:
        """Like :meth:`added_lines`, without a Python or shell file's comments (a comment does nothing)."""
        added = self.added_lines()
        if self.new is None:
            return added
        if self.path.endswith(".sh") or self.new.startswith(
            ("#!/bin/sh", "#!/bin/bash", "#!/usr/bin/env bash")
        ):
            return [(n, text[: _shell_comment(text)]) for n, text in added]
        if not self.path.endswith(".py"):
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


def _shell_comment(line: str) -> int:
    """Where a shell line's comment starts (its length when it has none): an unquoted ``#`` starting a word.

    Heredoc bodies are read as lines too: a ``#`` there is taken for a comment, as the shell would not.
    """
    quote = ""
    escaped = False
    for i, ch in enumerate(line):
        if escaped:
            escaped = False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t;&|("):
            return i
    return len(line)


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
    """The file as text (``None``: binary); Python files in their declared encoding."""
    if data is None or b"\0" in data[:8192]:
        return None
    if path.endswith(".py"):
        import tokenize

        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
            return data.decode(encoding)
        except Exception:  # noqa: BLE001 - any codec the cookie names may fail any way: not text the judge reads
            return None  # Python would not read it either, or not as the judge would
    return data.decode("utf-8", "replace")


def initial_tree(initial: Path) -> FinalState:
    """A task's initial state, read as the judge reads a final one."""
    return host_tree(initial)


def compute_diff(state: FinalState, initial: Path) -> WorkspaceDiff:
    """Compare the judged tree with the task's initial state ``initial`` (a host directory)."""
    before = initial_tree(initial)
    changes = []
    for path in sorted(set(before.files) | set(state.files)):
        b, a = before.files.get(path), state.files.get(path)
        if b == a:
            continue
        kind = "added" if b is None else "deleted" if a is None else "modified"
        changes.append(FileChange(shown(path), kind, _text(b, path), _text(a, path), a))
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
    archive: bytes | None = None
    """The workspace's archive, when the caller exported it already (a rollout does, before judging)."""
    _state: FinalState | WorkspaceUnjudgeable | None = None
    _diff: WorkspaceDiff | None = None
    _loaded: bool = False
    _network: list[NetworkReport | None] = field(default_factory=list)

    def final_state(self) -> FinalState:
        """The judged tree (:mod:`judges.final_state`), read on first use.

        Every judge of the context reads this one tree; what a judge runs, it runs in
        :meth:`judged_sandbox`, which holds exactly this tree.

        Raises:
            WorkspaceUnjudgeable: the agent left a workspace the judge cannot read (raised again to
                every judge of the context).
        """
        if self._state is None:
            try:
                self._state = capture(
                    self.sandbox,
                    reserved=(self.task.spec.hidden_tests.target,),
                    archive=self.archive,
                    reset=False,
                    observe_network=False,
                )
            except WorkspaceUnjudgeable as exc:
                self._state = exc
        if isinstance(self._state, WorkspaceUnjudgeable):
            raise self._state
        return self._state

    def judged_sandbox(self) -> Sandbox:
        """The sandbox, reset to exactly the judged tree (once): where every process a judge starts runs.

        Its ``/tmp`` is empty and nothing the agent left runs; the bridge's server, a compile check
        and the agent's procedure see the files the process judge read and nothing else of the agent's.

        Raises:
            WorkspaceUnjudgeable: the agent left a workspace the judge cannot read.
        """
        state = self.final_state()
        if not self._loaded:
            self.agent_network()  # what the agent's own run sent, before the reset clears it
            state.load_into(self.sandbox)
            self._loaded = True
        return self.sandbox

    def agent_network(self) -> NetworkReport | None:
        """What the sandbox's network namespace saw of the agent's own run (``None``: not observed).

        Read once, before the judge resets the sandbox (which starts a new observation).
        """
        if not self._network:
            self._network.append(observed_network(self.sandbox))
        return self._network[0]

    def diff(self) -> WorkspaceDiff:
        """The final diff: the judged tree against the task's initial state."""
        if self._diff is None:
            self._diff = compute_diff(self.final_state(), self.task.initial_dir)
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
